"""The command line's entry point: `trainlint` (the console script) and `python -m trainlint`."""

from trainlint import _dccache


def run() -> None:
    _dccache.install()  # before the first dataclass (the CLI's modules, LibCST's nodes) is built
    from trainlint.cli import main

    main()


if __name__ == "__main__":
    run()
