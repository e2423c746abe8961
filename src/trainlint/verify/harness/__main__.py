"""`python -m trainlint.verify.harness ...`: how `trainlint verify` (verify/run.py) starts one measured run."""

import os
import sys

from trainlint.verify.harness.entry import main

if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)  # threads or workers the script left behind must not keep the process alive
