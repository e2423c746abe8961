"""`python -m trainlint` runs the command-line interface."""

from trainlint.cli import main

main()
