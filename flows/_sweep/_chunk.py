"""One chunk of a sweep, computed where an executor runs it: a host thread or a Dask worker.

:class:`ChunkFn` is what an executor ships once to each process: the user's
function, the static combinations, the seed and the process-wide settings. In each
process it compiles ``jax.jit(jax.vmap(f))`` once per static combination and chunk
shape and keeps the executable for the following chunks (:data:`_RUNNERS`).

:func:`compute_chunk` evaluates one chunk. Solver failures are not exceptions
(``flows.solve`` reports them in ``status``); a chunk that raises anyway (an
:func:`equinox.error_if` check in ``fn``) is bisected until its failing points are
isolated, which get ``failed = True`` and NaN / -1 outputs, one line each on
stderr and the full message in the manifest. A tracing or compilation error, or
an output name the sweep reserves, is a mistake in ``fn``: it is raised, never
counted as a point failure.

A process that computes chunks first applies the settings of :func:`flows.configure` that
the sweeping process applied (:func:`flows._config.configuration`), then the compilation
cache of ``compile_cache_dir``, set, as everywhere in samflows, by
:func:`flows._config.enable_compilation_cache` (a folder already configured wins).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Mapping

import jax
import numpy as np

from .._config import configuration, configure, enable_compilation_cache, on_release
from ._grid import fill_failed, pad_chunk
from ._store import save_chunk

_RUNNERS: dict = {}  # (function id, static names, static values) -> _Runner, per process
_RUNNERS_LOCK = threading.Lock()


def _release_runners() -> None:
    with _RUNNERS_LOCK:
        _RUNNERS.clear()


on_release(_release_runners)


def default_devices() -> list:
    """The sweep's default devices: all local accelerators, or the first CPU device.

    On a CPU backend, several CPU devices (``XLA_FLAGS=
    --xla_force_host_platform_device_count=N``) run one chunk no faster than one
    device: they execute in turn. Concurrent host threads on one device do run in
    parallel (benchmarks/README.md), so the sweep uses one CPU device and ``workers``
    threads.
    """
    devices = jax.local_devices()
    return devices[:1] if devices[0].platform == "cpu" else devices


def default_chunk(devices=None) -> int:
    """Default points per chunk: 256 per CPU device, 8192 per GPU/TPU.

    On CPU (benchmarks/README.md) a vmapped
    adaptive solve costs least per point at a few hundred points per chunk (the
    batch's working set stays in cache, and small ordered chunks waste few
    lockstep steps). Accelerators need large batches to fill the device.
    """
    devices = default_devices() if devices is None else list(devices)
    per_device = 256 if devices[0].platform == "cpu" else 8192
    return per_device * len(devices)


def default_memory_budget() -> int:
    """Bytes a process's chunks may use by default: min(2 GiB, RAM / 4)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(min(2 << 30, total // 4))


class _QuietCallbacks(logging.Filter):
    """Drops JAX's per-call traceback of a raising host callback while chunks run.

    Each failed chunk (and each step of its bisection) would otherwise print an
    80-line ``jax.pure_callback failed`` traceback; the sweep reports one line per
    failed point instead and keeps the message in the manifest.
    """

    def __init__(self):
        super().__init__()
        self.active = 0
        self.lock = threading.Lock()

    def filter(self, record):
        return not (self.active and str(record.msg).startswith("jax.pure_callback failed"))


_QUIET = _QuietCallbacks()
_CALLBACK_LOGGER = "jax._src.callback"


@contextlib.contextmanager
def quiet_callback_errors():
    """Within this block (in any thread), JAX's callback-failure tracebacks are not logged.

    The filter is on JAX's logger only while some thread is inside such a block.
    """
    with _QUIET.lock:
        if _QUIET.active == 0:
            logging.getLogger(_CALLBACK_LOGGER).addFilter(_QUIET)
        _QUIET.active += 1
    try:
        yield
    finally:
        with _QUIET.lock:
            _QUIET.active -= 1
            if _QUIET.active == 0:
                logging.getLogger(_CALLBACK_LOGGER).removeFilter(_QUIET)


def flatten_out(out) -> dict:
    """A dict of named leaves from the per-point pytree ``out`` (dict keys or pytree paths).

    Raises ``ValueError`` for names the sweep reserves (``failed``, ``__...``).
    """
    if isinstance(out, Mapping) and all(isinstance(k, str) for k in out):
        flat = dict(out)
    else:
        leaves = jax.tree_util.tree_leaves_with_path(out)
        flat = {jax.tree_util.keystr(path).strip("[]'.") or "out": v for path, v in leaves}
    bad = [k for k in flat if k == "failed" or k.startswith("__")]
    if bad:
        raise ValueError(
            f"`fn` must not return outputs named {bad}: 'failed' and names starting with '__' "
            "are reserved by the sweep; rename them."
        )
    return flat


def _numeric_output(out):
    """``out``, a pytree of numbers and arrays, else a ``ValueError`` naming ``fn``'s output
    (JAX's own error names neither the function nor the argument)."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(out):
        if not isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)):
            where = jax.tree_util.keystr(path) or ""
            raise ValueError(
                f"`fn` must return numbers or arrays (a dict or pytree of them); its output"
                f"{where} is {type(leaf).__name__} {leaf!r:.60}."
            )
    return out


class _Runner:
    """The compiled ``jit(vmap(f))`` for one static combination, on a fixed chunk shape."""

    def __init__(self, fn, static_kw, uses_key, seed, devices):
        def batched(points, index):
            def one(p, i):
                extra = {"key": jax.random.fold_in(jax.random.key(seed), i)} if uses_key else {}
                return _numeric_output(fn(**static_kw, **p, **extra))

            return jax.vmap(one)(points, index)

        self.devices = devices
        if len(devices) > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.asarray(devices), ("points",))
            self.sharding = NamedSharding(mesh, PartitionSpec("points"))
            self.fn = jax.jit(batched, in_shardings=self.sharding, out_shardings=self.sharding)
        else:
            self.sharding = None
            self.fn = jax.jit(batched)
        self.compiled = {}  # argument shapes and dtypes -> executable
        self.lock = threading.Lock()

    def put(self, points, index):
        if self.sharding is None:
            return jax.device_put((points, index), self.devices[0])
        return jax.device_put((points, index), self.sharding)

    def compile(self, points, index):
        """Compile for these argument shapes and dtypes (once), check the output names.

        An executable runs only on the shapes and dtypes it was compiled for: the same
        function swept over float and then over integer values needs two.
        """
        signature = tuple(
            (k, np.shape(v), np.result_type(v).str) for k, v in sorted(points.items())
        ) + (index.shape, np.result_type(index).str)
        with self.lock:
            if signature not in self.compiled:
                lowered = self.fn.lower(*self.put(points, index))
                flatten_out(lowered.out_info)  # a reserved name is the user's error: raise
                self.compiled[signature] = lowered.compile()
        return self.compiled[signature]

    def __call__(self, points, index):
        out = self.compile(points, index)(*self.put(points, index))
        return jax.tree_util.tree_map(np.asarray, out)


class _BatchRunner:
    """A batch function ``fn(**static, **points) -> dict of (n, ...) arrays`` run as it is, on
    whole chunks (no jit, no vmap): a compiled engine of its own, e.g. the numba driver of
    :func:`analysis.phase_diagram`."""

    def __init__(self, fn, static_kw):
        self.fn, self.static_kw = fn, static_kw

    def compile(self, points, index):
        del points, index  # nothing to compile here: the function compiles its own code

    def __call__(self, points, index):
        del index
        out = self.fn(**self.static_kw, **{k: np.asarray(v) for k, v in points.items()})
        return {k: np.asarray(v) for k, v in flatten_out(out).items()}


class ChunkFn:
    """The per-point function with what a process needs to compile and run its chunks.

    Shipped once to each process (a Dask worker receives it as one scattered
    object); ``fn_id`` identifies the compiled chunk functions it may reuse. It carries
    the :func:`flows.configure` settings of the process that made it, which a worker
    applies before it compiles.
    """

    def __init__(self, fn, statics, combos, uses_key, seed, fn_id, devices, compile_cache_dir,
                 batched=False):
        self.fn = fn
        self.batched = bool(batched)
        self.statics = list(statics)
        self.combos = list(combos)
        self.uses_key = uses_key
        self.seed = int(seed)
        self.fn_id = fn_id
        self.device_list = None if devices is None else list(devices)
        self.compile_cache_dir = compile_cache_dir
        self.configuration = configuration()

    def devices(self) -> list:
        return default_devices() if self.device_list is None else self.device_list

    def runner(self, ci: int) -> _Runner:
        """The compiled chunk function of static combination ``ci`` in this process."""
        configure(**self.configuration)  # in the sweeping process: already applied, no-op
        enable_compilation_cache(self.compile_cache_dir)
        # Keyed by the static values, not by their index ci: two sweeps of one function with
        # different single static values both have ci = 0 (the second got the first's results).
        # With their types: 1, 1.0 and True are equal as dict keys but not as arguments.
        combo = tuple((type(v).__qualname__, v) for v in self.combos[ci])
        rkey = (self.fn_id, tuple(self.statics), combo)
        with _RUNNERS_LOCK:
            if rkey not in _RUNNERS:
                if len(_RUNNERS) >= 32:
                    _RUNNERS.pop(next(iter(_RUNNERS)))
                static_kw = dict(zip(self.statics, self.combos[ci], strict=True))
                if self.batched:
                    _RUNNERS[rkey] = _BatchRunner(self.fn, static_kw)
                else:
                    _RUNNERS[rkey] = _Runner(
                        self.fn, static_kw, self.uses_key, self.seed, self.devices()
                    )
            return _RUNNERS[rkey]


def _error_line(err: Exception) -> str:
    """One line: the innermost ``...Error: message`` line of ``err``."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    inner = [line for line in lines if "Error" in line.split(":")[0]]
    return (inner[-1] if inner else f"{type(err).__name__}: {lines[0] if lines else ''}")[:300]


def _evaluate(run: _Runner, points: dict, index: np.ndarray, size: int):
    """Outputs of one (sub)chunk; a chunk that raises is bisected to isolate its points.

    Returns ``(outputs or None, errors)``; each error is ``(flat index, line, detail)``.
    """
    n = index.shape[0]
    args = pad_chunk(points, index, size)
    run.compile(*args)  # a tracing or compilation error is a bug in `fn`: raise it
    try:
        out = flatten_out(run(*args))
        out = {k: v[:n] for k, v in out.items()}
        out["failed"] = np.zeros(n, dtype=bool)
        return out, []
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:  # noqa: BLE001 - one bad point must not kill the sweep
        if "KeyboardInterrupt" in str(err):  # Ctrl-C inside a host callback, re-wrapped
            raise KeyboardInterrupt from err
        if n == 1:
            detail = f"{type(err).__name__}: {err}"[:4000]
            return None, [(int(index[0]), _error_line(err), detail)]
    mid = n // 2
    halves = [
        _evaluate(run, {k: v[s] for k, v in points.items()}, index[s], size)
        for s in (slice(0, mid), slice(mid, n))
    ]
    (a, ea), (b, eb) = halves
    if a is None and b is None:
        return None, ea + eb
    like = a if a is not None else b
    a = a if a is not None else {**fill_failed(like, mid), "failed": np.ones(mid, bool)}
    b = b if b is not None else {**fill_failed(like, n - mid), "failed": np.ones(n - mid, bool)}
    return {k: np.concatenate([a[k], b[k]]) for k in like}, ea + eb


def compute_chunk(chunk_fn: ChunkFn, ci, points, index, size, path, key):
    """Evaluate one chunk (sorted points with flat indices ``index``) and cache it at once.

    Returns ``(outputs, errors, seconds)``. Runs in a sweep thread or a Dask worker.
    """
    t0 = time.perf_counter()
    run = chunk_fn.runner(ci)
    with quiet_callback_errors():
        out, errors = _evaluate(run, points, index, size)
    if out is None:  # every point failed and no output shape is known
        out = {"failed": np.ones(index.shape[0], dtype=bool)}
    errors = [(ci, i, line, detail) for i, line, detail in errors]
    if path is not None:
        save_chunk(path, key, out, errors)
    return out, errors, time.perf_counter() - t0


#: The default largest chunk of a batched function (:class:`_BatchRunner`).
BATCH_CHUNK = 4096


def choose_chunk_size(chunk_fn: ChunkFn, point0, n_points, chunk_size, max_chunk, budget, share):
    """The chunk size for this process's devices, after compiling static combination 0.

    Fixed by the user (rounded up to a multiple of the device count), or the largest
    power-of-two fraction of ``max_chunk`` (default :func:`default_chunk`) whose
    compiled memory fits in ``budget`` bytes (default :func:`default_memory_budget`
    divided among ``share`` concurrent chunks). Compiling also checks ``fn``'s
    output names before any chunk runs. Returns ``(chunk_size, description of the
    process: backend, devices)``.
    """
    devices = chunk_fn.devices()
    nd = len(devices)
    run = chunk_fn.runner(0)
    index0 = np.zeros(1, dtype=np.int64)
    if chunk_fn.batched:  # its own compiled code: chunks for progress, balance and caching
        if chunk_size is None:
            per_worker = -(-n_points // (4 * share))  # a few chunks per concurrent worker
            chunk_size = min(BATCH_CHUNK if max_chunk is None else max_chunk, per_worker)
        return max(1, int(chunk_size)), {"backend": "batched", "devices": ["cpu"]}
    if chunk_size is None:
        max_chunk = default_chunk(devices) if max_chunk is None else max_chunk
        budget = (default_memory_budget() if budget is None else budget) // share
        size = min(max_chunk, n_points)
        while True:
            size = -(-size // nd) * nd
            compiled = run.compile(*pad_chunk(point0, index0, size))
            try:
                mem = compiled.memory_analysis()
                used = sum(
                    getattr(mem, a, 0) or 0
                    for a in (
                        "temp_size_in_bytes",
                        "argument_size_in_bytes",
                        "output_size_in_bytes",
                    )
                )
            except Exception:  # noqa: BLE001 - no memory analysis on this backend
                used = 0
            if used <= budget or size <= nd:
                break
            size //= 2
        chunk_size = size
    chunk_size = -(-int(chunk_size) // nd) * nd
    run.compile(*pad_chunk(point0, index0, chunk_size))
    where = {"backend": jax.default_backend(), "devices": [str(d) for d in devices]}
    return chunk_size, where


ONE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def worker_env() -> dict:
    """Environment of a sweep worker process: one XLA thread, one OpenMP/BLAS thread."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        flags = f"{flags} {ONE_THREAD_XLA_FLAGS}".strip()
    return {"XLA_FLAGS": flags, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
