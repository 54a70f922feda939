"""Figures and the command line: ``python -m figures`` regenerates every figure.

Each figure is computed with :mod:`flows` and :mod:`analysis` (sweeps through
:func:`flows.sweep`, cached and resumable) and drawn with matplotlib as vector PDF
and PNG. ``python -m figures --help`` lists them.
"""

from ._cli import main as main
from ._common import Context as Context
from ._common import FigureSpec as FigureSpec
from ._common import load_data as load_data
from ._registry import FIGURES as FIGURES
from ._registry import make as make
