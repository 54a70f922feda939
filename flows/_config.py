"""Numerical configuration shared by the whole package.

The project computes in float64 only: logistic margins reach hundreds and the
initialisations of interest reach 1e-8, neither of which float32 resolves.
Importing :mod:`flows` enables JAX's x64 mode, and :func:`as_float64` refuses to
return anything else, so a float32 result cannot appear by accident.

Importing :mod:`flows` also turns on JAX's persistent compilation cache (compiled
solvers are reused by later processes), in ``$XDG_CACHE_HOME/samflows/jax``
(default ``~/.cache/samflows/jax``), unless a cache folder is already configured.
The environment variable ``SAMFLOWS_COMPILATION_CACHE`` chooses another folder,
or turns the cache off with ``off`` (also ``0``, ``false``, ``no``); after import,
``jax.config.update("jax_enable_compilation_cache", False)`` turns it off too.
"""

import contextlib
import gc
import os
import threading
from pathlib import Path

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

CACHE_ENV = "SAMFLOWS_COMPILATION_CACHE"
_OFF = ("off", "0", "false", "no", "none")


def default_cache_dir() -> Path | None:
    """The persistent compilation cache folder :mod:`flows` uses, or None when off."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value.lower() in _OFF:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "samflows" / "jax"


def enable_compilation_cache(folder, min_compile_secs: float = 0.3) -> bool:
    """Point JAX's persistent compilation cache at ``folder``; return whether it now is.

    The one place where samflows sets JAX's global compilation-cache configuration
    (at import with :func:`default_cache_dir`, in :func:`flows.sweep` and in the
    figures). It does nothing, and returns False, when a cache folder is already
    configured (the first choice, the user's included, wins), when
    ``SAMFLOWS_COMPILATION_CACHE`` turns the cache off, when ``folder`` is None, or
    when ``folder`` cannot be created and written (an unwritable home: the run goes
    on without the cache rather than fail). Executables that take less than
    ``min_compile_secs`` to compile are not written (JAX's default, 1 s, would skip
    some first solves, which compile in 1-3 s).
    """
    if jax.config.jax_compilation_cache_dir:
        return False
    if folder is None or os.environ.get(CACHE_ENV, "").strip().lower() in _OFF:
        return False
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_secs))
    return True


enable_compilation_cache(default_cache_dir())

_CHECKS_LOCK = threading.Lock()
_CHECKS = {"depth": 0, "saved": "raise"}


@contextlib.contextmanager
def cacheable_checks():
    """Trace the solvers' internal :func:`equinox.error_if` checks as NaN, not callbacks.

    JAX's persistent cache stores no executable that contains a host callback, which is
    what an ``error_if`` check is in equinox's default ``raise`` mode. The checks that
    diffrax compiles into a solve guard inputs that :func:`flows.solve` has already
    validated (eagerly, or with its own ``error_if`` outside this context, which still
    raises); so within the solver they are traced in ``nan`` mode, and the solver's
    executable can be cached. A NaN such a check produced would end the run with status
    ``nonfinite``. The mode is equinox's process-wide setting, switched while a solver
    is traced; a mode the user chose (``EQX_ON_ERROR=breakpoint`` or ``off``) is kept.
    """
    try:
        from equinox import _errors
    except ImportError:  # pragma: no cover - a future equinox: no caching, same results
        yield
        return
    if getattr(_errors, "EQX_ON_ERROR", None) not in ("raise", "nan"):
        yield
        return
    with _CHECKS_LOCK:
        if _CHECKS["depth"] == 0:
            _CHECKS["saved"] = _errors.EQX_ON_ERROR
            _errors.EQX_ON_ERROR = "nan"
        _CHECKS["depth"] += 1
    try:
        yield
    finally:
        with _CHECKS_LOCK:
            _CHECKS["depth"] -= 1
            if _CHECKS["depth"] == 0:
                _errors.EQX_ON_ERROR = _CHECKS["saved"]


_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_COMPILES = {"since_check": 0}
_RELEASE_HOOKS: list = []


def _count_compile(event: str, duration: float, **_) -> None:
    if event == _BACKEND_COMPILE:
        _COMPILES["since_check"] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def _map_counts() -> tuple[int, int] | None:
    """(memory regions this process maps, the kernel's limit), or None off Linux."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f), limit
    except (OSError, ValueError):
        return None


def on_release(hook) -> None:
    """Register ``hook()``, called by :func:`release_compiled_when_crowded` after it clears."""
    _RELEASE_HOOKS.append(hook)


def release_compiled_when_crowded(fraction: float = 0.5, every: int = 8) -> bool:
    """Drop every compiled executable once the process maps more than ``fraction`` of its limit.

    XLA:CPU maps each executable's machine code into its own memory regions: about
    430 for one configuration of :func:`flows.solve`. Linux refuses a process more
    than ``vm.max_map_count`` regions (65,530 by default), and XLA then dies with a
    segmentation fault in its next compilation, after some 150 configurations in one
    process (a long analysis session, the test suite). When more than ``fraction``
    of the limit is mapped, this clears JAX's compilation caches
    (:func:`jax.clear_caches`) and samflows' own (the hooks of :func:`on_release`),
    which unmaps the code; later calls compile again. The region count is read only
    after ``every`` new compilations, so a call costs a counter check. It acts only
    on the main thread outside any JAX trace (a trace in progress keeps its caches);
    :func:`flows.solve`, :func:`flows.iterate` and :func:`flows.sweep` call it on
    entry. Returns whether it cleared.
    """
    if _COMPILES["since_check"] < every:
        return False
    if threading.current_thread() is not threading.main_thread() or not _trace_clean():
        return False
    _COMPILES["since_check"] = 0
    counts = _map_counts()
    if counts is None or counts[0] < fraction * counts[1]:
        return False
    jax.clear_caches()
    for hook in _RELEASE_HOOKS:
        hook()
    gc.collect()
    return True


def _trace_clean() -> bool:
    try:
        from jax._src.core import trace_state_clean
    except ImportError:  # pragma: no cover - a future JAX: never clear
        return False
    return trace_state_clean()


def as_float64(x):
    """Return ``x`` as a float64 JAX array; raise if x64 mode was switched off."""
    arr = jnp.asarray(x, dtype=jnp.float64)
    if arr.dtype != jnp.float64:
        raise RuntimeError(
            "JAX x64 mode is disabled (jax_enable_x64=False); this library computes in "
            "float64 only. Do not disable x64 after importing flows."
        )
    return arr
