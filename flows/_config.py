"""Numerical configuration: float64 at import, everything else by :func:`configure`.

The project computes in float64 only: logistic margins reach hundreds and the
initialisations of interest reach 1e-8, neither of which float32 resolves.
Importing :mod:`flows` enables JAX's x64 mode, and :func:`as_float64` refuses to
return anything else, so a float32 result cannot appear by accident. Importing
:mod:`flows` changes no other global setting: XLA's flags, JAX's persistent
compilation cache, equinox's error mode and JAX's monitoring are left to
:func:`configure`, which the command lines call and a user may call.
"""

import contextlib
import gc
import os
import platform
import threading
import warnings
from importlib import metadata
from pathlib import Path

import jax
import jax.numpy as jnp

from ._jax_internals import backend_started, trace_clean

jax.config.update("jax_enable_x64", True)

_OFF = ("off", "0", "false", "no", "none")
FAST_COMPILE_ENV = "SAMFLOWS_XLA_FAST_COMPILE"
CACHE_ENV = "SAMFLOWS_COMPILATION_CACHE"
_FAST_COMPILE_FLAGS = ("--xla_cpu_use_fusion_emitters=false", "--xla_cpu_max_isa=AVX")
# jaxlib releases on which the flags were checked to exist (an unknown flag in XLA_FLAGS
# aborts the process) and to leave the test suite's answers unchanged.
_FAST_COMPILE_JAXLIB = ((0, 10),)
_PARTS = ("xla_flags", "compilation_cache", "cacheable_checks", "release_when_crowded")
_CONFIG_LOCK = threading.Lock()
_APPLIED: dict = {}  # part -> the value configure() applied it with (at most once each)


def configure(
    *,
    xla_flags: bool = True,
    compilation_cache=True,
    cacheable_checks: bool = True,
    release_when_crowded: bool = True,
) -> None:
    """Set the process-wide options that make samflows compile fast and answer reproducibly.

    ``import flows`` changes no global setting but JAX's x64 mode, so that it leaves a
    user's own JAX code as it was. This function applies the four settings below, each
    unless its keyword is False; ``python -m flows``, ``python -m analysis``,
    ``python -m figures``, ``python -m experiments`` and the test suite call it with
    the defaults before their first JAX computation. Call it likewise, right after
    ``import flows``, to compute what they compute at their speed.

    Arguments:
        xla_flags: add ``--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX`` to
            ``os.environ["XLA_FLAGS"]`` (:func:`fast_compile_flags`, which says where:
            x86-64, the jaxlib releases they were checked on, neither flag set by the
            user, ``SAMFLOWS_XLA_FAST_COMPILE`` not ``off``). The first flag selects
            XLA:CPU's classic code generators, which compile the solvers faster and run
            as fast (measured in benchmarks/README.md). The second caps the instruction
            set at AVX, which has no fused multiply-add (FMA). An FMA rounds ``a * b + c``
            once where a multiply then an add rounds twice, and XLA contracts to FMA
            differently in a batched (vmapped) program and in a single solve; an adaptive
            solver's step
            control then amplifies those last-bit differences (up to 5e-10 relative after
            a solve). Without FMA every program rounds each product and each sum alike,
            so a point of :func:`flows.sweep` or ``jax.vmap`` equals :func:`flows.solve`
            of that point bit for bit, on every x86-64 machine. XLA reads its flags once,
            when JAX starts its backend (the first computation, not ``import jax``): if
            it has started and the flags would change, ``XLA_FLAGS`` is left as it is and
            a :class:`RuntimeWarning` says so (a warning, not an error: the other
            settings still apply, and the results stay correct, only not bitwise
            reproducible across batching).
        compilation_cache: turn on JAX's persistent compilation cache, so that a later
            process loads a compiled solver instead of compiling it. True: the folder
            ``SAMFLOWS_COMPILATION_CACHE`` names, else ``$XDG_CACHE_HOME/samflows/jax``
            (default ``~/.cache/samflows/jax``); a path: that folder. Nothing is changed
            when a cache folder is already configured (the user's choice wins), when
            ``SAMFLOWS_COMPILATION_CACHE`` is ``off`` (also ``0``, ``false``, ``no``) or
            when the folder cannot be written (:func:`enable_compilation_cache`).
        cacheable_checks: while :func:`flows.solve` traces a solver, switch equinox's
            process-wide error mode from ``raise`` to ``nan`` (:func:`cacheable_checks`),
            so that the checks diffrax compiles into the solver hold no host callback;
            JAX's persistent cache stores no executable that holds one. flows has checked
            the inputs those checks guard (traced inputs with raising checks of its own,
            outside the solver); a NaN such a check produced would end the run with
            status ``nonfinite``. The mode is restored when the trace ends, and a mode
            the user chose (``breakpoint``, ``off``) is kept.
        release_when_crowded: count XLA compilations with a :mod:`jax.monitoring`
            listener, so that :func:`flows.solve`, :func:`flows.iterate`,
            :func:`flows.solve_many` and :func:`flows.sweep` drop every compiled function
            (:func:`jax.clear_caches`) before the process runs out of memory regions
            (:func:`release_compiled_when_crowded`). Without it they never clear.

    Each setting is applied at most once per process: calling again changes nothing that
    is applied, and a False keyword means "not now", never "undo" (to stop the cache
    later, ``jax.config.update("jax_enable_compilation_cache", False)``). A sweep's worker
    processes apply the settings this process applied.

    Raises:
        ValueError: a keyword of the wrong type (each is a bool; ``compilation_cache``
            may also be a folder).
    """
    for name, value in (
        ("xla_flags", xla_flags),
        ("cacheable_checks", cacheable_checks),
        ("release_when_crowded", release_when_crowded),
    ):
        if not isinstance(value, bool):
            raise ValueError(f"`{name}` must be True or False; got {value!r}.")
    if not isinstance(compilation_cache, (bool, str, os.PathLike)) or compilation_cache == "":
        raise ValueError(
            f"`compilation_cache` must be True, False or a folder; got {compilation_cache!r}."
        )
    asked = {
        "xla_flags": xla_flags,
        "compilation_cache": compilation_cache,
        "cacheable_checks": cacheable_checks,
        "release_when_crowded": release_when_crowded,
    }
    with _CONFIG_LOCK:
        todo = {k: v for k, v in asked.items() if v is not False and k not in _APPLIED}
        if "xla_flags" in todo:
            todo["xla_flags"] = _apply_xla_flags()  # False: too late, and said so
        if "compilation_cache" in todo:
            folder = todo["compilation_cache"]
            enable_compilation_cache(default_cache_dir() if folder is True else folder)
        if "cacheable_checks" in todo:
            _CHECKS["enabled"] = True
        if "release_when_crowded" in todo:
            jax.monitoring.register_event_duration_secs_listener(_count_compile)
        for k, v in todo.items():
            _APPLIED[k] = str(v) if isinstance(v, os.PathLike) else v


def configuration() -> dict:
    """The keywords of :func:`configure` that reproduce what it applied in this process.

    A sweep ships them to its worker processes, which call ``configure(**configuration())``;
    ``xla_flags`` is False where XLA had started before :func:`configure` could set them, so
    that the workers compute as this process does.
    """
    with _CONFIG_LOCK:
        return {part: _APPLIED.get(part, False) for part in _PARTS}


def _apply_xla_flags() -> bool:
    """Add :func:`fast_compile_flags` to ``XLA_FLAGS``; False if XLA started too early for it."""
    current = os.environ.get("XLA_FLAGS", "")
    flags = fast_compile_flags(current, _jaxlib_version(), os.environ.get(FAST_COMPILE_ENV, ""))
    if flags == current:
        return True
    if backend_started():
        warnings.warn(
            "flows.configure(): XLA has already started in this process, so "
            f"XLA_FLAGS={flags!r} could no longer take effect and was not set; "
            "call flows.configure() before the first JAX computation (or pass "
            "xla_flags=False).",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    os.environ["XLA_FLAGS"] = flags
    return True


def fast_compile_flags(
    flags: str, jaxlib_version: str | None, setting: str = "", machine: str | None = None
) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with XLA:CPU's classic code generators, without FMA.

    XLA:CPU's MLIR fusion emitters (its default) take about half of the compile time of
    this package's solvers. ``--xla_cpu_use_fusion_emitters=false`` asks for the classic
    ones, which compile faster and run as fast (measured in benchmarks/README.md). The
    classic emitters contract ``a * b + c`` into fused multiply-adds, differently in a
    batched (vmapped) program and in a single solve: a sweep's point then differed from
    :func:`flows.solve` of that point by up to 5e-10 relative after an adaptive solve.
    ``--xla_cpu_max_isa=AVX`` (x86 vector instructions without FMA) keeps every program's
    rounding the same, as with XLA's default emitters: the same answers, bit for bit where
    the tests ask for it.

    The flags are added only where it is safe and wanted: on x86-64 (``machine``, default
    :func:`platform.machine`), on a jaxlib release in ``_FAST_COMPILE_JAXLIB`` (XLA aborts
    on a flag it does not know, and later releases retire the classic emitters), when
    ``flags`` sets neither already (the user's choice wins), and unless ``setting``
    (``SAMFLOWS_XLA_FAST_COMPILE``) is ``off`` (also ``0``, ``false``, ``no``).
    :func:`configure` sets them, before XLA starts.
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


def default_cache_dir() -> Path | None:
    """The folder ``configure(compilation_cache=True)`` uses, or None when switched off."""
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
    (in :func:`configure`, in :func:`flows.sweep` with a ``cache_dir``, and in
    :func:`figures.make`). It does nothing, and returns False, when a cache folder is
    already configured (the first choice, the user's included, wins), when
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


_CHECKS_LOCK = threading.Lock()
_CHECKS = {"depth": 0, "saved": "raise", "enabled": False}


@contextlib.contextmanager
def cacheable_checks():
    """Trace the solvers' internal :func:`equinox.error_if` checks as NaN, not callbacks.

    Active once :func:`configure` has applied ``cacheable_checks``; before, it does
    nothing. JAX's persistent cache stores no executable that contains a host callback,
    which is what an ``error_if`` check is in equinox's default ``raise`` mode. The
    checks that diffrax compiles into a solve guard inputs that :func:`flows.solve` has
    already validated (eagerly, or with its own ``error_if`` outside this context,
    which still raises); so within the solver they are traced in ``nan`` mode, and the
    solver's executable can be cached. A NaN such a check produced would end the run
    with status ``nonfinite``. The mode is equinox's process-wide setting, switched
    while a solver is traced; a mode the user chose (``EQX_ON_ERROR=breakpoint`` or
    ``off``) is kept.
    """
    if not _CHECKS["enabled"]:
        yield
        return
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
    one process (a long analysis session, the test suite). Once :func:`configure` has
    applied ``release_when_crowded`` (which counts compilations), when more than ``fraction``
    of the limit is mapped, this clears JAX's compilation caches
    (:func:`jax.clear_caches`) and samflows' own (the hooks of :func:`on_release`),
    which unmaps the code; later calls compile again. The region count is read only
    after ``every`` new compilations, so a call costs a counter check. It acts only
    on the main thread outside any JAX trace (a trace in progress keeps its caches);
    :func:`flows.solve`, :func:`flows.iterate`, :func:`flows.solve_many` and
    :func:`flows.sweep` call it on entry. Returns whether it cleared.
    """
    if _COMPILES["since_check"] < every:
        return False
    if threading.current_thread() is not threading.main_thread() or not trace_clean():
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


def as_float64(x):
    """Return ``x`` as a float64 JAX array; raise if x64 mode was switched off."""
    arr = jnp.asarray(x, dtype=jnp.float64)
    if arr.dtype != jnp.float64:
        raise RuntimeError(
            "JAX x64 mode is disabled (jax_enable_x64=False); this library computes in "
            "float64 only. Do not disable x64 after importing flows."
        )
    return arr
