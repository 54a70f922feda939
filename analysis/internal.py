"""Shared plumbing for the packages built on :mod:`analysis` (:mod:`figures`,
:mod:`experiments`): not part of the user API.

The lazy exports of a package and the validators those packages share, in one clearly internal
home (the convention of ``equinox.internal``), so that no package imports another's private
modules. Importing this module imports no JAX: :func:`lazy_exports` is light, and
:func:`check_mu` and :func:`check_parameters` (which need :mod:`flows`) are imported on first
use. (The command lines' one parser is below every package, in :mod:`samflows_cli`.)

* :func:`lazy_exports`: a package's public names, imported on first use (PEP 562).
* :func:`check_mu`: a single example μ, validated (``ValueError`` naming ``mu``).
* :func:`check_parameters`: the "does not belong to this method" check of a diagram's
  parameters (:data:`analysis.METHOD_PARAMETERS`), with the caller's spelling of a name.
"""

from ._lazy import lazy_exports

_LAZY = {"check_mu": "_inputs", "check_parameters": "_inputs"}  # on first use: need JAX
__all__ = sorted(["lazy_exports", *_LAZY])
__getattr__, _ = lazy_exports(__name__, _LAZY)


def __dir__():
    return __all__
