"""The compile options of the engine's functions (numba, the machine code cached on disk).

``jit`` compiles a function on its own; ``inlined`` puts it into its caller's IR, so that
LLVM sees the caller's loops and constants through it (the field's column passes, the
per-lane steps of the loop); ``loop`` is the chunk loop, which releases the GIL so that
threads run chunks side by side. The NumPy error model: a division by zero gives inf or NaN,
as in JAX, and nothing raises inside the loop.

The disk cache of each function is keyed by :data:`SOURCES` together, not by its own file
alone (numba's default): a compiled function holds the code and the constants of the
functions it calls, from other modules, and would otherwise outlive an edit of them.
"""

import functools
import hashlib
import os

from numba import njit
from numba.core import caching

_HERE = os.path.dirname(os.path.abspath(__file__))
_FLOWS = os.path.dirname(_HERE)
#: The sources whose code or constants the engine's functions compile in.
SOURCES = tuple(
    [os.path.join(_HERE, f) for f in sorted(os.listdir(_HERE)) if f.endswith(".py")]
    + [os.path.join(_FLOWS, f"{m}.py") for m in ("_rules", "_problem", "_events", "_options",
                                                 "_tracking", "_dynamics", "_trajectory")]
)  # fmt: skip


@functools.cache
def _digest(path, mtime, size):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def sources_stamp():
    """SHA-256 of the contents of :data:`SOURCES`."""
    h = hashlib.sha256()
    for path in SOURCES:
        st = os.stat(path)
        h.update(_digest(path, st.st_mtime_ns, st.st_size))
    return h.digest()


class _Stamped:
    """A cache locator for the engine's functions (others decline it): numba's, with the
    stamp of every source instead of the function's own file's."""

    def get_source_stamp(self):
        return sources_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) != _HERE:
            return None
        return super().from_function(py_func, py_file)


class _UserProvided(_Stamped, caching.UserProvidedCacheLocator):
    pass


class _InTree(_Stamped, caching.InTreeCacheLocator):
    pass


# numba's private list of locators (stable since numba 0.49; absent in some future numba, the
# engine keeps numba's default cache, keyed by each function's own file)
_LOCATORS = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
if isinstance(_LOCATORS, list) and _UserProvided not in _LOCATORS:  # (NUMBA_CACHE_DIR first)
    _LOCATORS[:0] = [_UserProvided, _InTree]

jit = njit(cache=True, error_model="numpy")
inlined = njit(cache=True, error_model="numpy", inline="always")
loop = njit(cache=True, error_model="numpy", nogil=True)
