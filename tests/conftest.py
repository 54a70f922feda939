"""Test-session settings.

JAX's persistent compilation cache stays off in the test process: a shared per-run cache
was measured to save nothing here (21.4 min against 20.2 min for the suite; most analysis
executables hold host callbacks and are not written). The two segmentation faults once
blamed on the cache came from the kernel's limit on memory regions, ``vm.max_map_count``,
which ``flows._config.release_compiled_when_crowded`` now keeps the process below.

The test process calls :func:`flows.configure` before anything compiles, as the command lines
do: XLA:CPU's classic emitters without fused multiply-adds (tests compare a batched solve with
a single one bit for bit), the compilation counter that keeps the process below that limit, and
the solvers' checks traced as NaN. ``configure`` would turn the cache on in the user's cache
folder; the test process and its subprocesses (the command lines, the README) inherit
``SAMFLOWS_COMPILATION_CACHE=off`` so that a test run neither reads nor fills it
(tests/test_config.py turns it on in a temporary folder).
"""

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

os.environ["SAMFLOWS_COMPILATION_CACHE"] = "off"
# XLA's LLVM back end at optimisation level 0 in the test processes and the processes they
# start: the suite is mostly compilation (backend compile 319 s -> 225 s for
# tests/test_linf.py, since split into test_filippov.py and others). The level changes how
# fast the code runs, not what it computes (no fast-math either way); benchmarks/ and users
# run at XLA's default. flows.configure() below adds XLA:CPU's classic emitters
# (flows._config.fast_compile_flags), for the tests as for the command lines.
_FLAGS = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _FLAGS:
    os.environ["XLA_FLAGS"] = f"{_FLAGS} --xla_backend_optimization_level=0".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

import flows  # noqa: E402

flows.configure()
jax.config.update("jax_enable_compilation_cache", False)

# One folder per test run, shared by the xdist workers (they inherit the environment of
# the process that starts them, which imports this file first) and removed at the end.
_SHARED = "SAMFLOWS_TEST_SHARED"
if _SHARED not in os.environ:
    os.environ[_SHARED] = tempfile.mkdtemp(prefix="samflows-tests-")


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the controller, after every worker
        shutil.rmtree(os.environ[_SHARED], ignore_errors=True)


@pytest.fixture(scope="session")
def quick_figures():
    """The folders ``(out, cache)`` of the quick figures (``figures.make(quick=True)``, as
    ``python -m figures --quick``), each figure made once in the whole test run.

    The figure test files run on either xdist worker; a figure is made by the first worker
    that needs it, under a lock of its own, and read from the shared cache by the other.
    """
    import figures

    root = Path(os.environ[_SHARED]) / "figures"
    out, cache = root / "out", root / "cache"
    root.mkdir(parents=True, exist_ok=True)
    pending = list(figures.FIGURES)
    # First the figures no other worker is making; then wait for the rest (no busy loop).
    for blocking in (False, True):
        for name in list(pending):
            with open(root / f"{name}.lock", "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                if not (root / f"{name}.done").exists():
                    figures.make([name], out=out, cache=cache, quick=True, progress=False)
                    (root / f"{name}.done").touch()
                pending.remove(name)
    return out, cache


# Opt-in profile of the suite: SAMFLOWS_TEST_PROFILE=<file> appends, per test, the wall
# and process CPU seconds, the seconds JAX spent tracing, lowering and compiling, the count of
# XLA compiles, the test's start (seconds since the run began) and its xdist worker, then its
# id (benchmarks/suite_profile.py reads it: totals, files, and when each worker finished).
_PROFILE = os.environ.get("SAMFLOWS_TEST_PROFILE")
if _PROFILE:
    import time

    # the run's start, set by the controller and inherited by the workers, as _SHARED
    _BEGAN = float(os.environ.setdefault("SAMFLOWS_TEST_PROFILE_T0", repr(time.time())))
    _WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")

    _SPENT = {"trace": 0.0, "lower": 0.0, "compile": 0.0, "n": 0}
    _EVENTS = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "compile",
    }

    def _listen(event, duration, **_):
        if event in _EVENTS:
            _SPENT[_EVENTS[event]] += duration
            _SPENT["n"] += event.endswith("backend_compile_duration")

    jax.monitoring.register_event_duration_secs_listener(_listen)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        before = dict(_SPENT)
        start = time.time() - _BEGAN
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        d = {k: _SPENT[k] - before[k] for k in _SPENT}
        with open(_PROFILE, "a") as f:
            f.write(
                f"{wall:.2f}\t{cpu:.2f}\t{d['trace']:.2f}\t{d['lower']:.2f}\t"
                f"{d['compile']:.2f}\t{d['n']}\t{start:.1f}\t{_WORKER}\t{item.nodeid}\n"
            )
