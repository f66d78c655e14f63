#!/usr/bin/env python3
"""tollgate chaos soak: three gateways on Redis Sentinel under mixed traffic and scheduled faults,
then a loss account (bench/README.md, "Chaos soak"). The code is in bench/tollgate_soak/.

    bench/soak.py --minutes 60
    bench/soak.py --minutes 3 --tollgate-binary target/debug/tollgate \\
        --echo-binary target/debug/tollgate-echo

Needs the h2 and grpcio packages (bench/requirements.txt): run it with the repository venv
(scripts/venv.sh). Exit status: 0 when every account line passed, 1 when one failed, 2 when the
run could not be done.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tollgate_bench.common import run_main  # noqa: E402
from tollgate_soak.driver import main  # noqa: E402

if __name__ == "__main__":
    run_main(main)
