#!/usr/bin/env python3
"""tollgate benchmark driver: the command-line entry. The code is in bench/tollgate_bench/ (one
module per concern, listed in its __init__.py); usage in bench/README.md and `run.py --help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tollgate_bench.cli import main  # noqa: E402
from tollgate_bench.common import run_main  # noqa: E402

if __name__ == "__main__":
    run_main(main)
