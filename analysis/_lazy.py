"""Public names of a package imported on first use (PEP 562), for instant ``--help``.

``analysis``, ``figures`` and ``experiments`` export their names this way, so that their
command lines parse flags before JAX, flows or matplotlib is imported. This module imports
nothing heavy.
"""

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package`` whose name ``n`` lives in ``exports[n]``.

    ``exports`` maps each public name to the submodule (``"_phase"``) that defines it; the
    submodule is imported at the first lookup of one of its names, and the value is then
    stored in ``package``, so later lookups do not come here. ``package`` may also be a
    module of a package (``"analysis.internal"``): the submodules are then its siblings.
    """

    def __getattr__(name):
        if name in exports:
            parent = sys.modules[package].__package__  # the package itself, for a package
            value = getattr(importlib.import_module(f".{exports[name]}", parent), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
