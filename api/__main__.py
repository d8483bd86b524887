"""`python -m api`: the `orgdeck` command line, from a checkout."""

from api.cli import main

main()
