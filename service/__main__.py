import gc
import sys

# A start builds what the process keeps until it ends (modules, models, mappers, routes), and the
# collector would walk all of it again and again while it grows: it is held until the command runs
# (service.runtime.cli.main), or for a served app until the app is up (service.app's lifespan).
gc.disable()

from service.runtime.cli import main  # noqa: E402

sys.exit(main())
