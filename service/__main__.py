import sys

from service.runtime.cli import main

sys.exit(main())
