"""``python -m analysis check [--quick] [--json PATH]``: the theorem-check report (claims C1–C4);
``python -m analysis depth``: the ℓ2-SAM depth table."""

import sys

from flows._cli import run_command

from ._check import main

if __name__ == "__main__":
    sys.exit(run_command("python -m analysis", main))
