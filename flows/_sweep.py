r"""A cached, resumable, batched sweep of a per-point function over a parameter grid.

Contract. Given a per-point function :math:`f` (a pure JAX function of named
parameters returning a pytree of arrays) and a grid
:math:`G=S_1\times\cdots\times S_k\times P` of *static* values :math:`S_i` (Python
values that change shapes or code: depth, d, solver name) and *dynamic* points
:math:`P` (numbers or arrays: α, ρ, σ, μ, ...), :func:`sweep` returns
:math:`f(s, p)` for every :math:`(s, p)\in G`, stacked with the grid's shape.

How it runs (issue 5, "The sweep engine"; issue 6, workloads 1 and 5):

* one ``jax.jit(jax.vmap(f))`` per static combination, applied to *chunks* of
  dynamic points of one fixed size (the last chunk is padded by repeating its
  last point, so nothing recompiles); the chunk size is chosen from XLA's memory
  analysis of the compiled chunk, within a memory budget;
* points may be ordered by an expected-cost key before chunking, so that the
  adaptive solves of a chunk take similar numbers of steps (vmapped solvers run
  in lockstep: a chunk costs its *slowest* point times its size);
* on a CPU, ``workers`` host threads (one per core) compute chunks
  concurrently on one device; with several accelerators each chunk is split
  across them;
* each finished chunk is written atomically to
  ``cache_dir/<key>/chunks/<static>-<i>.npz``. The key is a SHA-256 of the
  configuration (grid, static values, chunk size, order, seed, the source and
  closure of ``f``, ``config``), the code version (a hash of the ``flows``
  source) and the package versions, so a changed configuration never reads stale
  results and an interrupted sweep (Ctrl-C, a killed process) resumes without
  recomputing finished chunks;
* a chunk that raises (e.g. an :func:`equinox.error_if` check) is bisected until
  the failing points are isolated; they get ``failed = True`` and NaN (float) or
  -1 (int) outputs, and the sweep goes on. Solver failures are not exceptions:
  ``flows.solve`` reports them in ``status`` per point;
* the final result is saved as ``result.npz`` beside ``manifest.json``
  (configuration, code version, package versions, seed, timings), and
  :func:`load_sweep` reloads it to redraw a figure without recomputing.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib import metadata
from pathlib import Path

import jax
import numpy as np

_PACKAGES = ("jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "numpy", "scipy")
_FORMAT = 1  # bump when the on-disk layout changes


# --- versions and hashing ----------------------------------------------------------


@functools.cache
def code_version() -> dict:
    """The code version: SHA-256 of every ``flows/*.py`` source, plus the git commit.

    Only the source hash enters cache keys (a commit elsewhere in the repository
    does not invalidate results); the git commit and dirty flag are recorded in
    the manifest for provenance.
    """
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    version = {"flows_source_sha256": h.hexdigest()}
    try:
        version["samflows"] = metadata.version("samflows")
    except metadata.PackageNotFoundError:
        version["samflows"] = None
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=10
        )
        if commit.returncode == 0:
            version["git_commit"] = commit.stdout.strip()
            version["git_dirty"] = bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return version


@functools.cache
def package_versions() -> dict:
    """Versions of Python and of the numerical packages results depend on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _global_names(code) -> set:
    """Global names read by ``code`` and by the functions nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _fingerprint(obj, h, depth=0, seen=None) -> None:
    """Feed a stable description of ``obj`` (arrays by value, functions by source) to ``h``."""
    seen = set() if seen is None else seen
    if depth > 12:
        h.update(b"<deep>")
        return
    if isinstance(obj, (np.ndarray, jax.Array, np.generic)):
        arr = np.asarray(obj)
        h.update(f"array{arr.dtype}{arr.shape}".encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(repr(obj).encode())
    elif isinstance(obj, Mapping):
        h.update(b"{")
        for k in sorted(obj, key=repr):
            _fingerprint(k, h, depth + 1, seen)
            _fingerprint(obj[k], h, depth + 1, seen)
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(type(obj).__name__.encode())
        for item in obj:
            _fingerprint(item, h, depth + 1, seen)
    elif isinstance(obj, functools.partial):
        _fingerprint((obj.func, obj.args, obj.keywords), h, depth + 1, seen)
    elif getattr(obj, "__wrapped__", None) is not None and callable(obj):  # jax.jit(f), ...
        h.update(type(obj).__name__.encode())
        _fingerprint(obj.__wrapped__, h, depth + 1, seen)
    elif inspect.isfunction(obj) or inspect.ismethod(obj):
        func = getattr(obj, "__func__", obj)
        h.update(f"{func.__module__}.{func.__qualname__}".encode())
        if func.__module__ in ("flows", "jax", "numpy") or func.__module__.startswith(
            ("flows.", "jax.", "jax._src", "numpy.", "diffrax", "equinox")
        ):
            return  # library code: covered by the code and package versions
        try:
            h.update(inspect.getsource(func).encode())
        except (OSError, TypeError):
            h.update(func.__code__.co_code)
        if id(func) in seen:
            return
        seen.add(id(func))
        for cell in func.__closure__ or ():
            try:
                _fingerprint(cell.cell_contents, h, depth + 1, seen)
            except ValueError:  # empty cell
                h.update(b"<empty>")
        if func.__defaults__:
            _fingerprint(func.__defaults__, h, depth + 1, seen)
        # Module-level values the function reads (T1 = 50.0, DATA = ...) are not in
        # its closure but change its result just as much.
        for name in sorted(_global_names(func.__code__)):
            value = func.__globals__.get(name, None)
            if value is not None and not inspect.ismodule(value) and not isinstance(value, type):
                h.update(name.encode())
                _fingerprint(value, h, depth + 1, seen)
    else:
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        if len(leaves) == 1 and leaves[0] is obj:  # an opaque object
            text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))  # no memory addresses
            h.update(f"{type(obj).__module__}.{type(obj).__qualname__}:{text}".encode())
        else:  # a pytree (an equinox Module, a flows method or Dataset)
            h.update(str(treedef).encode())
            for leaf in leaves:
                _fingerprint(leaf, h, depth + 1, seen)


def _digest(obj) -> str:
    h = hashlib.sha256()
    _fingerprint(obj, h)
    return h.hexdigest()


# --- the grid ----------------------------------------------------------------------


def _as_axes(params: Mapping, name: str) -> dict[str, np.ndarray]:
    if not isinstance(params, Mapping) or not params:
        raise ValueError(f"`{name}` must be a non-empty mapping of name -> values; got {params!r}.")
    axes = {}
    for key, values in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"`{name}` keys must be parameter names; got {key!r}.")
        arr = np.asarray(values)
        if arr.ndim == 0 or arr.shape[0] < 1:
            raise ValueError(
                f"`{name}[{key!r}]` must be a non-empty sequence of values (leading axis = "
                f"grid axis); got shape {arr.shape}."
            )
        if arr.dtype == object:
            raise ValueError(f"`{name}[{key!r}]` must be numeric; pass Python values as `static`.")
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        axes[key] = arr
    return axes


def _as_static(static: Mapping | None) -> dict[str, list]:
    if static is None:
        return {}
    if not isinstance(static, Mapping):
        raise ValueError(f"`static` must be a mapping of name -> list of values; got {static!r}.")
    out = {}
    for key, values in static.items():
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if not values:
            raise ValueError(f"`static[{key!r}]` must hold at least one value.")
        for v in values:
            try:
                hash(v)
            except TypeError:
                raise ValueError(f"`static[{key!r}]` values must be hashable; got {v!r}.") from None
        out[key] = values
    return out


# --- results -------------------------------------------------------------------------


@dataclasses.dataclass
class SweepResult:
    """Outputs of :func:`sweep`, stacked with the grid's shape.

    Attributes:
        out: name -> array of shape ``(*static_shape, *grid_shape, *leaf_shape)``,
            where ``static_shape`` has one axis per ``static`` entry (in order) and
            ``grid_shape`` is one axis per parameter (``product=True``) or ``(N,)``.
            Outputs whose shape differs between static values (θ at different
            depths) are padded at the end with NaN / -1 / False.
            ``out["failed"]`` marks points whose evaluation raised.
        params: the dynamic grid axes, name -> array.
        static: the static values, name -> list.
        manifest: configuration, versions, seed, key and timings (also in JSON).
        path: the result folder (``None`` without ``cache_dir``).
        n_chunks, n_computed, n_cached: chunks in total, computed in this call,
            and read from the cache.
    """

    out: dict
    params: dict
    static: dict
    manifest: dict
    path: Path | None = None
    n_chunks: int = 0
    n_computed: int = 0
    n_cached: int = 0

    def __getitem__(self, name):
        return self.out[name]


def load_sweep(path) -> SweepResult:
    """Reload a finished sweep (``result.npz`` + ``manifest.json`` in ``path``) without recomputing.

    >>> import flows, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> r = flows.sweep(lambda a: {"sq": a * a}, {"a": [1.0, 2.0]}, cache_dir=folder,
    ...                 progress=False, compile_cache=False)
    >>> flows.load_sweep(r.path)["sq"].tolist()
    [1.0, 4.0]
    """
    path = Path(path)
    if not (path / "result.npz").exists():
        raise ValueError(f"`path` must be a finished sweep folder with result.npz; got {path}.")
    manifest = json.loads((path / "manifest.json").read_text())
    with np.load(path / "result.npz") as z:
        out = {k[4:]: z[k] for k in z.files if k.startswith("out/")}
        params = {k[6:]: z[k] for k in z.files if k.startswith("param/")}
    return SweepResult(
        out=out,
        params=params,
        static=manifest["config"]["static"],
        manifest=manifest,
        path=path,
        n_chunks=manifest["n_chunks"],
    )


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _save_npz(path: Path, arrays: dict) -> None:
    def write(tmp):
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    _atomic_write(path, write)


def _save_json(path: Path, obj: dict) -> None:
    def write(tmp):
        Path(tmp).write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))

    _atomic_write(path, write)


# --- the engine ----------------------------------------------------------------------


def _memory_budget() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(min(2 << 30, total // 4))


_RUNNERS: dict = {}  # (function fingerprint, static values) -> _Runner


class _Runner:
    """The compiled ``jit(vmap(f))`` for one static combination, on a fixed chunk shape."""

    def __init__(self, fn, static_kw, uses_key, seed, devices):
        def batched(points, index):
            def one(p, i):
                extra = {"key": jax.random.fold_in(jax.random.key(seed), i)} if uses_key else {}
                return fn(**static_kw, **p, **extra)

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
        self.compiled = {}  # chunk size -> executable

    def put(self, points, index):
        if self.sharding is None:
            return jax.device_put((points, index), self.devices[0])
        return jax.device_put((points, index), self.sharding)

    def compile(self, points, index):
        """Compile for this chunk shape (once) and return the executable."""
        size = index.shape[0]
        if size not in self.compiled:
            self.compiled[size] = self.fn.lower(*self.put(points, index)).compile()
        return self.compiled[size]

    def __call__(self, points, index):
        out = self.compile(points, index)(*self.put(points, index))
        return jax.tree_util.tree_map(np.asarray, out)


def _fill_failed(out_like: dict, n: int) -> dict:
    def fill(x):
        x = np.asarray(x)
        shape = (n, *x.shape[1:])
        if x.dtype.kind == "f" or x.dtype.kind == "c":
            return np.full(shape, np.nan, dtype=x.dtype)
        if x.dtype.kind == "b":
            return np.zeros(shape, dtype=x.dtype)
        return np.full(shape, -1, dtype=x.dtype)

    return {k: fill(v) for k, v in out_like.items()}


def _error_message(err: Exception) -> str:
    """One line for the manifest: the innermost ``...Error: message`` line of ``err``."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    inner = [line for line in lines if "Error" in line.split(":")[0]]
    return (inner[-1] if inner else f"{type(err).__name__}: {lines[0] if lines else ''}")[:300]


def _pad_to_common_shape(arrays: list) -> list:
    """Pad arrays whose shapes differ between static values (depth L: θ is (L, d)).

    Padding is at the end of each axis, with NaN (float), -1 (int) or False (bool).
    """
    shape = tuple(np.max([a.shape for a in arrays], axis=0))
    out = []
    for a in arrays:
        if a.shape != shape:
            fill = _fill_failed({"x": a.reshape(1, -1)}, 1)["x"].ravel()[0]
            padded = np.full(shape, fill, dtype=a.dtype)
            padded[tuple(slice(0, n) for n in a.shape)] = a
            a = padded
        out.append(a)
    return out


def _flatten_out(out) -> dict:
    """A dict of named arrays from the per-point pytree ``out`` (dict keys or pytree paths)."""
    if isinstance(out, Mapping) and all(isinstance(k, str) for k in out):
        flat = dict(out)
    else:
        leaves = jax.tree_util.tree_leaves_with_path(out)
        flat = {jax.tree_util.keystr(path).strip("[]'.") or "out": v for path, v in leaves}
    if "failed" in flat:
        raise ValueError("`fn` must not return an output named 'failed' (reserved).")
    return flat


def sweep(
    fn: Callable,
    params: Mapping,
    *,
    static: Mapping | None = None,
    product: bool = True,
    order: Callable | None = None,
    chunk_size: int | None = None,
    max_chunk: int | None = None,
    memory_budget: int | None = None,
    cache_dir=None,
    config: Mapping | None = None,
    seed: int = 0,
    devices=None,
    workers: int | None = None,
    progress: bool = True,
    compile_cache: bool = True,
) -> SweepResult:
    r"""Evaluate ``fn(**static, **point)`` on every point of a grid, in cached jit/vmap chunks.

    The grid is :math:`\prod_i S_i\times P`, with static values :math:`S_i` (one
    compiled function per combination) and dynamic points :math:`P` (the
    Cartesian product of the ``params`` axes, or with ``product=False`` the
    ``N`` points listed row by row). Returns
    ``out[name][s_1, ..., s_k, p_1, ..., p_m] = fn(...)[name]``.

    Arguments:
        fn: pure JAX function of keyword arguments (every ``params`` and ``static``
            name, plus ``key`` if it takes one: a per-point PRNG key
            ``fold_in(key(seed), flat point index)``) returning a dict (or any
            pytree) of arrays. Keep outputs small (reduce a Trajectory to status,
            ``t_end``, j†(τ) on a grid, ...): they are copied to the host and saved.
        params: name -> values; the leading axis is the grid axis, trailing axes
            are the per-point value's shape (e.g. ``mu`` of shape ``(k, d)``).
        static: name -> list of hashable Python values (depth, d, solver, ...).
        product: Cartesian product of the ``params`` axes (default), or zip them
            (all must share the leading length ``N``).
        order: optional expected-cost key ``order(points) -> (N,) array`` of the
            dynamic points (a dict of NumPy arrays). Points are sorted by it before
            chunking so that the lockstep batches hold solves of similar cost; the
            output is unsorted back to the grid.
        chunk_size: points per compiled batch; default: ``max_chunk`` (or ``N``),
            halved until XLA's memory analysis fits in ``memory_budget`` bytes
            (default min(2 GiB, RAM/4), shared by the workers). Rounded up to a
            multiple of the device count.
        max_chunk: default :func:`default_chunk` (256 points per CPU device, 8192
            per accelerator).
        cache_dir: folder for chunk files, ``result.npz`` and ``manifest.json``
            (under ``cache_dir/<key>/``); ``None`` keeps results in memory only.
        config: extra JSON-able configuration that ``fn`` depends on and that is
            not visible in its source, closure or the grid; recorded and hashed.
        seed: recorded, hashed and used for the per-point ``key``.
        devices: devices to split each chunk across (default: the first CPU device,
            or all local accelerators).
        workers: host threads computing chunks concurrently (default: the usable
            CPU cores on a CPU backend, 1 on accelerators).
        progress: show a progress bar over chunks (tqdm, on stderr).
        compile_cache: with a ``cache_dir``, enable JAX's persistent compilation
            cache in ``cache_dir/jax-cache`` unless one is already configured, so a
            second process reuses the compiled chunk function. JAX caches no
            executable that contains host callbacks, which equinox's runtime checks
            (``eqx.error_if``, used by flows and diffrax) are unless the environment
            sets ``EQX_ON_ERROR=nan`` before equinox is imported.

    Returns:
        A :class:`SweepResult`.

    >>> import flows, jax.numpy as jnp
    >>> data = flows.single_example([1.0, 2.0])
    >>> def point(alpha, rho):
    ...     traj = flows.solve(flows.L2SAM(rho), data, flows.balanced_init(alpha, 2, 2),
    ...                        t1=20.0, rescaled=True)
    ...     return {"status": traj.status, "t_end": traj.t_end}
    >>> r = flows.sweep(point, {"alpha": [0.01, 1.0], "rho": [0.5]}, progress=False)
    >>> flows.Status.name(r["status"][:, 0]).tolist()
    ['collapsed', 'escaped']
    """
    t_start = time.perf_counter()
    if not callable(fn):
        raise ValueError(f"`fn` must be callable; got {fn!r}.")
    axes = _as_axes(params, "params")
    statics = _as_static(static)
    overlap = set(axes) & set(statics)
    if overlap:
        raise ValueError(f"names {sorted(overlap)} appear in both `params` and `static`.")
    if product:
        grid_shape = tuple(a.shape[0] for a in axes.values())
    else:
        lengths = {k: a.shape[0] for k, a in axes.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"with product=False all `params` need one length; got {lengths}.")
        grid_shape = (next(iter(lengths.values())),)
    n_points = int(np.prod(grid_shape))
    devices = default_devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("`devices` must hold at least one device.")
    if workers is None:
        workers = usable_cores() if devices[0].platform == "cpu" else 1
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"`workers` must be None or a positive integer; got {workers!r}.")
    if max_chunk is None:
        max_chunk = default_chunk(devices)
    for name, value in (("max_chunk", max_chunk), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"`{name}` must be an integer; got {value!r}.")
    if max_chunk < 1:
        raise ValueError(f"`max_chunk` must be >= 1; got {max_chunk}.")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
    ):
        raise ValueError(f"`chunk_size` must be None or a positive integer; got {chunk_size!r}.")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"`chunk_size` must be None or a positive integer; got {chunk_size!r}.")
    config = dict(config or {})
    try:
        json.dumps(config)
    except TypeError as err:
        raise ValueError(f"`config` must be JSON-serialisable: {err}") from None
    uses_key = "key" in inspect.signature(fn).parameters

    # The dynamic points, flattened, then ordered by expected cost.
    if product:
        index = np.unravel_index(np.arange(n_points), grid_shape)
        points = {k: a[index[i]] for i, (k, a) in enumerate(axes.items())}
    else:
        points = dict(axes)
    if order is not None:
        cost = np.asarray(order({k: v.copy() for k, v in points.items()}), dtype=np.float64)
        if cost.shape != (n_points,):
            raise ValueError(f"`order` must return shape ({n_points},); got {cost.shape}.")
        perm = np.argsort(cost, kind="stable")
    else:
        perm = np.arange(n_points)
    points = {k: v[perm] for k, v in points.items()}

    # The configuration and the cache key.
    static_combos = list(itertools.product(*statics.values()))
    manifest_config = {
        "fn": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}",
        "params": {
            k: a.tolist() if a.size <= 4096 else f"{a.dtype}{a.shape}" for k, a in axes.items()
        },
        "static": {
            k: [repr(v) if not isinstance(v, (int, float, str, bool)) else v for v in vs]
            for k, vs in statics.items()
        },
        "product": product,
        "grid_shape": list(grid_shape),
        "order": None if order is None else getattr(order, "__qualname__", repr(order)),
        "config": config,
    }
    budget = (_memory_budget() if memory_budget is None else int(memory_budget)) // workers
    # Compiled chunk functions are reused across calls (a changed grid, order or
    # cache folder needs no recompilation) but only for the same function: the
    # fingerprint covers fn's source, closure and globals, so changing a closure
    # constant recompiles instead of silently reusing a stale trace.
    fn_id = _digest((fn, uses_key and int(seed), [str(d) for d in devices]))

    def runner(combo):
        rkey = (fn_id, repr(combo))
        if rkey not in _RUNNERS:
            if len(_RUNNERS) >= 32:
                _RUNNERS.pop(next(iter(_RUNNERS)))
            _RUNNERS[rkey] = _Runner(
                fn, dict(zip(statics, combo, strict=True)), uses_key, seed, devices
            )
        return _RUNNERS[rkey]

    def chunk_points(lo, hi, size):
        idx = np.arange(lo, lo + size)
        idx = np.minimum(idx, hi - 1)  # pad the last chunk by repeating its last point
        return {k: v[idx] for k, v in points.items()}, perm[idx].astype(np.int64)

    versions = {"code": code_version(), "packages": package_versions()}
    key_source = {
        "format": _FORMAT,
        "config": manifest_config,
        "grid": {k: a for k, a in axes.items()},
        "static_values": {k: vs for k, vs in statics.items()},
        "fn": fn,
        "order": order,
        "perm": perm,
        "seed": int(seed),
        "code": versions["code"]["flows_source_sha256"],
        "packages": versions["packages"],
    }
    key = _digest(key_source)[:20]
    manifest = {
        "key": key,
        "config": manifest_config,
        "seed": int(seed),
        "code_version": versions["code"],
        "package_versions": versions["packages"],
        "backend": jax.default_backend(),
        "devices": [str(d) for d in devices],
        "n_points": n_points,
        "n_chunks": None,
        "complete": False,
    }

    folder = None
    if cache_dir is not None:
        folder = Path(cache_dir) / key
        (folder / "chunks").mkdir(parents=True, exist_ok=True)
        if compile_cache and not jax.config.jax_compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", str(Path(cache_dir) / "jax-cache"))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        if (folder / "result.npz").exists() and (folder / "manifest.json").exists():
            done = load_sweep(folder)
            done.n_cached = done.n_chunks
            return done

    # Chunk size: fixed by the user, or the largest power-of-two fraction of
    # max_chunk whose compiled memory fits in the budget (compiled once, reused).
    nd = len(devices)
    if chunk_size is None:
        size = min(max_chunk, n_points)
        probe = runner(static_combos[0])
        while True:
            size = -(-size // nd) * nd
            compiled = probe.compile(*chunk_points(0, n_points, size))
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
            except Exception:  # no memory analysis on this backend
                used = 0
            if used <= budget or size <= nd:
                break
            size //= 2
        chunk_size = size
    chunk_size = -(-int(chunk_size) // nd) * nd
    manifest["chunk_size"] = chunk_size
    bounds = [(lo, min(lo + chunk_size, n_points)) for lo in range(0, n_points, chunk_size)]
    n_chunks = len(bounds) * len(static_combos)
    manifest["n_chunks"] = n_chunks
    if folder is not None:
        _save_json(folder / "manifest.json", manifest)

    def evaluate(run, lo, hi):
        """Outputs of sorted points ``lo:hi``; a chunk that raises is bisected to isolate points."""
        args = chunk_points(lo, hi, chunk_size)
        run.compile(*args)  # a tracing or compilation error is a bug in `fn`: raise it
        try:
            out = _flatten_out(run(*args))
            out = {k: v[: hi - lo] for k, v in out.items()}
            out["failed"] = np.zeros(hi - lo, dtype=bool)
            return out, []
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - one bad point must not kill the sweep
            if "KeyboardInterrupt" in str(err):  # Ctrl-C inside a host callback, re-wrapped
                raise KeyboardInterrupt from err
            if hi - lo == 1:
                return None, [(int(perm[lo]), _error_message(err))]
            mid = (lo + hi) // 2
            a, ea = evaluate(run, lo, mid)
            b, eb = evaluate(run, mid, hi)
            if a is None and b is None:
                return None, ea + eb
            like = a if a is not None else b
            a = (
                a
                if a is not None
                else {**_fill_failed(like, mid - lo), "failed": np.ones(mid - lo, bool)}
            )
            b = (
                b
                if b is not None
                else {**_fill_failed(like, hi - mid), "failed": np.ones(hi - mid, bool)}
            )
            return {k: np.concatenate([a[k], b[k]]) for k in like}, ea + eb

    results = {}  # (combo index, chunk index) -> outputs of the sorted points
    errors, timings = [], []
    n_cached = 0
    todo = []  # (combo index, chunk index, path) of the chunks to compute
    for ci in range(len(static_combos)):
        for k, (lo, hi) in enumerate(bounds):
            name = f"{ci:03d}-{lo:08d}-{hi:08d}.npz"  # the chunk size may change
            path = None if folder is None else folder / "chunks" / name
            if path is not None and path.exists():
                try:
                    with np.load(path) as z:
                        if str(z["__key__"]) == key:
                            results[ci, k] = {f: z[f] for f in z.files if f != "__key__"}
                except (OSError, ValueError, KeyError):
                    pass  # a damaged chunk file is recomputed
            if (ci, k) in results:
                n_cached += 1
            else:
                todo.append((ci, k, path))

    def compute(ci, k, path):
        """One chunk, in a worker thread: evaluate, then cache it at once."""
        t0 = time.perf_counter()
        out, errs = evaluate(runner(static_combos[ci]), *bounds[k])
        if out is None:  # every point failed and no output shape is known
            out = {"failed": np.ones(bounds[k][1] - bounds[k][0], dtype=bool)}
        if path is not None:
            _save_npz(path, {**out, "__key__": np.asarray(key)})
        return out, errs, time.perf_counter() - t0

    for ci in sorted({ci for ci, _, _ in todo}):  # compile in this thread, once per combo
        runner(static_combos[ci]).compile(*chunk_points(0, n_points, chunk_size))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_chunks, desc=f"sweep {key[:8]}", unit="chunk", file=sys.stderr)
        bar.update(n_cached)
    # Host threads run chunks concurrently (XLA releases the GIL while it computes):
    # on a CPU this is what uses every core, as one CPU device runs one computation
    # per calling thread.
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(compute, *job): job[:2] for job in todo}
        for future in as_completed(futures):
            out, errs, seconds = future.result()
            results[futures[future]] = out
            errors.extend(errs)
            timings.append(seconds)
            if bar is not None:
                bar.update(1)
    finally:
        # On Ctrl-C: drop the queued chunks; running ones finish and are cached.
        pool.shutdown(wait=False, cancel_futures=True)
        if bar is not None:
            bar.close()
    n_computed = len(todo)

    # Assemble: concatenate the chunks, undo the cost order, reshape to the grid.
    names = {}
    for out in results.values():
        for name, v in out.items():
            names.setdefault(name, v)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(n_points)
    stacked = {}
    for name, like in names.items():
        per_combo = []
        for ci in range(len(static_combos)):
            parts = []
            for k, (lo, hi) in enumerate(bounds):
                part = results[ci, k].get(name)
                if part is None:
                    part = _fill_failed({name: like}, hi - lo)[name]
                parts.append(part)
            flat = np.concatenate(parts)[inverse]
            per_combo.append(flat.reshape(*grid_shape, *flat.shape[1:]))
        arr = np.stack(_pad_to_common_shape(per_combo))
        stacked[name] = arr.reshape(*(len(v) for v in statics.values()), *arr.shape[1:])
    manifest.update(
        complete=True,
        n_failed=int(np.sum(stacked["failed"])),
        errors=sorted(errors)[:100],
        chunk_seconds={"computed": len(timings), "total": float(np.sum(timings))},
        wall_seconds=time.perf_counter() - t_start,
    )
    result = SweepResult(
        out=stacked,
        params=axes,
        static=statics,
        manifest=manifest,
        path=folder,
        n_chunks=n_chunks,
        n_computed=n_computed,
        n_cached=n_cached,
    )
    if folder is not None:
        arrays = {f"out/{k}": v for k, v in stacked.items()}
        arrays.update({f"param/{k}": v for k, v in axes.items()})
        _save_npz(folder / "result.npz", arrays)
        _save_json(folder / "manifest.json", manifest)
    return result


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_devices() -> list:
    """The sweep's default devices: all local accelerators, or the first CPU device.

    On a CPU backend, several CPU devices (``XLA_FLAGS=
    --xla_force_host_platform_device_count=N``) run one chunk no faster than one
    device: they execute in turn. Concurrent host threads on one device do run in
    parallel (workload 1, issue 6: 32 chunks in 1.58 s on two devices, 0.77 s with
    two threads), so the sweep uses one CPU device and ``workers`` threads.
    """
    devices = jax.local_devices()
    return devices[:1] if devices[0].platform == "cpu" else devices


def default_chunk(devices=None) -> int:
    """Default points per chunk: 256 per CPU device, 8192 per GPU/TPU.

    Measured on workload 1 (issue 6, benchmarks/README.md): on CPU a vmapped
    adaptive solve costs least per point at a few hundred points per chunk (the
    batch's working set stays in cache, and small ordered chunks waste few
    lockstep steps). Accelerators need large batches to fill the device.
    """
    devices = default_devices() if devices is None else list(devices)
    per_device = 256 if devices[0].platform == "cpu" else 8192
    return per_device * len(devices)


def chunk_efficiency(n_steps, chunk_size: int) -> float:
    r"""Lockstep efficiency :math:`\sum_i s_i/\sum_c(|c|\max_{i\in c}s_i)` of vmapped solves.

    ``n_steps`` lists the solver steps per point *in execution order* (sorted by
    the sweep's ``order``); ``chunk_size`` is the batch size. 1 means no point
    waited for a slower one in its batch.

    >>> chunk_efficiency([1, 1, 2, 2], 2), chunk_efficiency([1, 2, 1, 2], 2)
    (1.0, 0.75)
    """
    s = np.asarray(n_steps, dtype=np.float64).ravel()
    chunks = [s[i : i + chunk_size] for i in range(0, s.size, chunk_size)]
    return float(s.sum() / sum(c.max() * c.size for c in chunks))
