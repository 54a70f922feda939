"""``python -m figures``: see ``python -m figures --help``."""

import sys

from samflows_cli import run_command

from ._cli import main

sys.exit(run_command("python -m figures", main))
