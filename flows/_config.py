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

Importing :mod:`flows` also asks XLA:CPU for its classic code generators without
fused multiply-adds, in ``XLA_FLAGS`` (:func:`fast_compile_flags`): the solvers compile
in about half the time, run as fast and give the same answers.
"""

import contextlib
import gc
import os
import platform
import threading
from importlib import metadata
from pathlib import Path

_OFF = ("off", "0", "false", "no", "none")
FAST_COMPILE_ENV = "SAMFLOWS_XLA_FAST_COMPILE"
_FAST_COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false", "--xla_cpu_max_isa=AVX")
# jaxlib releases on which the flags were checked to exist (an unknown flag in XLA_FLAGS
# aborts the process) and to leave the test suite's answers unchanged.
_FAST_COMPILE_JAXLIB = ((0, 10),)


def fast_compile_flags(
    flags: str, jaxlib_version: str | None, setting: str = "", machine: str | None = None
) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with XLA:CPU's classic code generators, without FMA.

    XLA:CPU's MLIR fusion emitters (its default) take about half of the compile time of
    this package's solvers. ``--xla_cpu_use_fusion_emitters=false`` asks for the classic
    ones, which compile faster and run as fast (measured in benchmarks/README.md). The
    classic emitters contract ``a * b + c`` into fused multiply-adds, differently in a
    batched (vmapped) program and in a single solve: a sweep's point then differs from
    :func:`flows.solve` of that point by up to 5e-10 relative after an adaptive solve.
    ``--xla_cpu_max_isa=AVX`` (x86 vector instructions without FMA) keeps every program's
    rounding the same, as with XLA's default emitters: the same answers, bit for bit where
    the tests ask for it.

    The flags are added only where it is safe and wanted: on x86-64 (``machine``, default
    :func:`platform.machine`), on a jaxlib release in ``_FAST_COMPILE_JAXLIB`` (XLA aborts
    on a flag it does not know, and later releases retire the classic emitters), when
    ``flags`` sets neither already (the user's choice wins), and unless ``setting``
    (``SAMFLOWS_XLA_FAST_COMPILE``) is ``off`` (also ``0``, ``false``, ``no``). They take
    effect only if XLA has not started yet in the process.
    """
    machine = platform.machine() if machine is None else machine
    if setting.strip().lower() in _OFF or machine.lower() not in ("x86_64", "amd64"):
        return flags
    if "xla_cpu_use_fusion_emitters" in flags or "xla_cpu_max_isa" in flags:
        return flags
    try:
        release = tuple(int(part) for part in (jaxlib_version or "").split(".")[:2])
    except ValueError:
        return flags
    if release not in _FAST_COMPILE_JAXLIB:
        return flags
    return " ".join([flags, *_FAST_COMPILE_FLAGS]).strip()


def _jaxlib_version() -> str | None:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None


_XLA_FLAGS = fast_compile_flags(
    os.environ.get("XLA_FLAGS", ""), _jaxlib_version(), os.environ.get(FAST_COMPILE_ENV, "")
)
if _XLA_FLAGS:
    os.environ["XLA_FLAGS"] = _XLA_FLAGS

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

CACHE_ENV = "SAMFLOWS_COMPILATION_CACHE"


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
    some of the package's first solves).
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
    170 for one configuration of :func:`flows.solve` (430 with XLA's fusion emitters,
    see :func:`fast_compile_flags`). Linux refuses a process more than
    ``vm.max_map_count`` regions (65,530 by default), and XLA then dies with a
    segmentation fault in its next compilation, after some 150-380 configurations in
    one process (a long analysis session, the test suite). When more than ``fraction``
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
