"""``python -m figures``: see ``python -m figures --help``."""

import sys

from ._cli import main

sys.exit(main())
