"""Figures and the command line: ``python -m figures`` regenerates every figure.

Each figure is computed with :mod:`flows` and :mod:`analysis` (sweeps through
:func:`flows.sweep`, cached and resumable) and drawn with matplotlib as vector PDF
and PNG. ``python -m figures --help`` lists them. The public names below are imported on
first use, so that ``--help`` (and a bad flag) answers without loading JAX.
"""

from analysis.internal import lazy_exports

_EXPORTS = {
    "main": "_cli",
    "Context": "_common",
    "FigureSpec": "_common",
    "load_data": "_common",
    "FIGURES": "_registry",
    "make": "_registry",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
