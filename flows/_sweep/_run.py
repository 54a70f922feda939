r"""The sweep's orchestrator: validate, key, reuse the cache, run the missing chunks, assemble.

Contract. Given a per-point function :math:`f` (a pure JAX function of named
parameters returning a pytree of arrays) and a grid
:math:`G=S_1\times\cdots\times S_k\times P` of *static* values :math:`S_i` (Python
values that change shapes or code: depth, d, solver name) and *dynamic* points
:math:`P` (numbers or arrays: α, ρ, σ, μ, ...), :func:`sweep` returns
:math:`f(s, p)` for every :math:`(s, p)\in G`, stacked with the grid's shape.
The pieces: the grid and its cost order (``_grid``), the key
(``_key``), the store of chunk files (``_store``), one chunk's computation
(``_chunk``) and the executors that run chunks on threads or on Dask
(``_executors``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping

import numpy as np

from .._config import release_compiled_when_crowded
from .._validate import check_type, with_overrides
from ._chunk import ChunkFn
from ._executors import check_devices, check_executor, executor_factory
from ._grid import Grid
from ._key import Unhashable, function_key, sweep_key
from ._store import Store, SweepResult, report

_REPORTED_FAILURES = 20  # failed points reported on stderr, one line each; all in the manifest


def _check_int(name, value, minimum, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        accepted = f"an integer >= {minimum}" + (" or None" if allow_none else "")
        raise ValueError(f"`{name}` must be {accepted}; got {value!r}.")


@dataclasses.dataclass(frozen=True, eq=False)
class SweepOptions:
    """How :func:`flows.sweep` runs its chunks: none of these changes a result or the cache key
    (but ``order``, which sorts the points of each chunk, is recorded with the key).

    Arguments:
        order: optional expected-cost key ``order(points) -> (N,) array`` of the
            dynamic points (a dict of NumPy arrays). Points are sorted by it before
            chunking so that the lockstep batches hold solves of similar cost; the
            output is unsorted back to the grid.
        chunk_size: points per compiled batch; default: ``max_chunk`` (or ``N``),
            halved until XLA's memory analysis fits in ``memory_budget`` bytes
            (a positive integer; default min(2 GiB, RAM/4), shared by the threads of
            one process). Rounded up to a multiple of the device count.
        max_chunk: default 256 points per CPU device, 8192 per accelerator.
        memory_budget: see ``chunk_size``.
        devices: devices to split each chunk across (default: the first CPU device,
            or all local accelerators).
        workers: host threads computing chunks concurrently, at most 4096 (default: the usable
            CPU cores on a CPU backend, 1 on accelerators); with ``executor="dask"``
            the number of worker processes (default: one per core, or per GPU).
        executor: where chunks run: ``None`` or ``"threads"`` (host threads of this
            process), ``"dask"`` (a ``LocalCluster`` of spawned single-threaded
            worker processes, started and closed by the sweep) or a
            ``dask.distributed.Client`` of any cluster (each chunk one task). The
            results, the key and the cache are the same for every executor; the
            manifest records which one ran.
        compile_cache: with a ``cache_dir``, in each process that computes chunks,
            enable JAX's persistent compilation cache in ``cache_dir/jax-cache``
            unless a cache folder is already configured there (:func:`flows.configure`
            configures its own, ``~/.cache/samflows/jax`` or
            ``$SAMFLOWS_COMPILATION_CACHE``, which wins) or that variable turns the
            cache off; so a second process reuses the compiled chunk function. JAX caches no
            executable that contains host callbacks, which equinox's runtime checks
            (``eqx.error_if``, used by flows and diffrax) are unless the environment
            sets ``EQX_ON_ERROR=nan`` before equinox is imported.
    """

    order: Callable | None = None
    chunk_size: int | None = None
    max_chunk: int | None = None
    memory_budget: int | None = None
    devices: object = None
    workers: int | None = None
    executor: object = None
    compile_cache: bool = True

    def __post_init__(self):
        for name, minimum in (("chunk_size", 1), ("max_chunk", 1), ("memory_budget", 1)):
            _check_int(name, getattr(self, name), minimum)
        if self.order is not None and not callable(self.order):
            raise ValueError(
                f"`order` must be None or a callable of the points; got {self.order!r}."
            )
        if not isinstance(self.compile_cache, (bool, np.bool_)):
            raise ValueError(f"`compile_cache` must be True or False; got {self.compile_cache!r}.")
        if self.devices is not None:
            object.__setattr__(self, "devices", check_devices(self.devices))
        check_executor(self.executor, self.workers, self.devices)

    def replace(self, **changes) -> SweepOptions:
        """A copy with some options changed (validated again)."""
        return sweep_options(self, changes)


SWEEP_FIELDS = tuple(f.name for f in dataclasses.fields(SweepOptions))


def sweep_options(options, overrides: dict) -> SweepOptions:
    """``options`` (a :class:`SweepOptions`, or None for the defaults) with the keyword
    shortcuts ``overrides`` applied; a name that is not a field is refused, naming it."""
    return with_overrides(options, overrides, SweepOptions, SWEEP_FIELDS)


def sweep(
    fn: Callable,
    params: Mapping,
    *,
    static: Mapping | None = None,
    product: bool = True,
    cache_dir=None,
    config: Mapping | None = None,
    seed: int = 0,
    key: str | None = None,
    progress: bool = True,
    batched: bool = False,
    options: SweepOptions | None = None,
    **overrides,
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
        cache_dir: folder for chunk files, ``result.npz`` and ``manifest.json``
            (under ``cache_dir/<key>/``); ``None`` keeps results in memory only.
            With a Dask executor it must be on storage every worker can write.
            Damaged files in it are reported and recomputed.
        config: extra JSON-able configuration that ``fn`` depends on and that is
            not visible in its source, closure or the grid; recorded and hashed.
        seed: recorded, hashed and used for the per-point ``key``.
        progress: show a progress bar over chunks (tqdm, on stderr).
        batched: ``fn`` takes whole chunks (NumPy arrays with a leading axis of points, the
            static values as they are) and returns a dict of arrays with that leading axis;
            it is called as it is, without ``jax.jit`` or ``jax.vmap`` (a function with a
            compiled engine of its own, e.g. the numba driver of
            :func:`analysis.phase_diagram`). It cannot take a ``key``.
        options: a :class:`SweepOptions`: where and in what batches the chunks run (cost
            order, chunk size, devices, threads or a Dask cluster, compilation cache).
        overrides: fields of :class:`SweepOptions` as keywords (``executor="dask"``,
            ``workers=4``, ``chunk_size=...``, ``order=...``), applied to ``options``.
        key: a non-empty string naming the state of ``fn`` that the sweep cannot
            describe by value, to be changed whenever that state changes. The cache
            key covers ``fn``'s code, its closure, defaults and the globals it
            reads, the object of a bound method and the attributes of a callable
            object, all by value; an object with neither attributes nor a pytree
            structure (a file, a lock, a random generator) cannot be described, and
            a sweep of a function holding one refuses a ``cache_dir`` unless ``key``
            is given (then that object counts by its type, and ``key`` in its place).
            Without a ``cache_dir`` such a function is compiled afresh for each sweep.

    A point whose evaluation raises gets ``failed = True``, one line on stderr
    and its full message in ``manifest["errors"]``; it never stops the sweep.

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
    release_compiled_when_crowded()
    if not callable(fn):
        raise ValueError(f"`fn` must be callable; got {fn!r}.")
    opts = sweep_options(options, overrides)
    order, devices, compile_cache = opts.order, opts.devices, opts.compile_cache
    if (
        isinstance(seed, bool)
        or not isinstance(seed, (int, np.integer))
        or not (-(2**63) <= seed < 2**63)
    ):
        raise ValueError(f"`seed` must be an integer in [-2**63, 2**63); got {seed!r}.")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise ValueError(f"`key` must be None or a non-empty string; got {key!r}.")
    if cache_dir is not None:
        accepted = "None or a folder path (str or os.PathLike)"
        check_type("cache_dir", cache_dir, (str, os.PathLike), accepted)
    if config is not None and not isinstance(config, Mapping):
        raise ValueError(f"`config` must be None or a mapping of JSON values; got {config!r}.")
    config = dict(config or {})
    if batched:
        config["batched"] = True
    try:
        json.dumps(config)
    except TypeError as err:
        raise ValueError(f"`config` must be JSON-serialisable: {err}") from None
    if not isinstance(batched, (bool, np.bool_)):
        raise ValueError(f"`batched` must be True or False; got {batched!r}.")
    if batched and "key" in inspect.signature(fn).parameters:
        raise ValueError("`batched`: a batched `fn` cannot take a per-point `key`.")
    make_executor = executor_factory(opts.executor, opts.workers, devices)  # checked
    grid = Grid(params, static, product, order)
    try:
        cache_key, versions = sweep_key(grid, fn, order, seed, config, key)
    except Unhashable as err:
        if cache_dir is not None:
            raise ValueError(
                f"{err}: the sweep cannot tell when its cached results stop being valid. "
                "Pass `key=` a string that changes whenever that state does, or run "
                "without `cache_dir`."
            ) from None
        cache_key, versions = sweep_key(grid, fn, order, seed, config, uuid.uuid4().hex)
    store = None if cache_dir is None else Store(cache_dir, cache_key)
    if store is not None and (done := store.load_result()) is not None:
        done.n_cached = done.n_chunks
        return done
    ex = make_executor()
    try:
        uses_key = "key" in inspect.signature(fn).parameters
        chunk_fn = ChunkFn(
            fn,
            grid.statics,
            grid.combos,
            uses_key,
            seed,
            function_key(
                fn, key, uses_key and int(seed), devices and [str(d) for d in devices], batched
            )
            or uuid.uuid4().hex,  # state it cannot describe: compiled for this sweep only
            devices,
            str(store.folder.parent / "jax-cache") if store and compile_cache else None,
            batched,
        )
        ex.start(chunk_fn, store)
        chunk_size, where = ex.probe(
            chunk_fn, grid.chunk(0, 1)[0], grid.n_points, opts.chunk_size, opts.max_chunk,
            opts.memory_budget,
        )  # fmt: skip
        bounds = grid.bounds(chunk_size)
        n_chunks = len(bounds) * len(grid.combos)
        manifest = {
            "key": cache_key,
            "config": grid.describe(fn, order, config),
            "seed": int(seed),
            "code_version": versions["code"],
            "package_versions": versions["packages"],
            **where,
            "executor": ex.describe(),
            "chunk_size": chunk_size,
            "n_points": grid.n_points,
            "n_chunks": n_chunks,
            "complete": False,
        }
        if store is not None:
            store.save_manifest(manifest)

        results, errors, jobs = {}, [], []  # (combo, chunk) -> outputs; failures; to compute
        for ci in range(len(grid.combos)):
            for k, (lo, hi) in enumerate(bounds):
                path = None if store is None else store.chunk_path(ci, lo, hi)
                cached = None if store is None else store.load_chunk(path)
                if cached is None:
                    jobs.append(((ci, k), (ci, *grid.chunk(lo, hi), chunk_size, path, cache_key)))
                else:
                    results[ci, k] = cached[0]
                    errors.extend(cached[1])
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_chunks, desc=f"sweep {cache_key[:8]}", unit="chunk", file=sys.stderr)
            bar.update(n_chunks - len(jobs))
        seconds, n_new_failures = [], 0
        try:
            for jid, (out, errs, secs) in ex.run(chunk_fn, jobs):
                results[jid] = out
                errors.extend(errs)
                seconds.append(secs)
                for ci, i, line, _ in errs:
                    if n_new_failures < _REPORTED_FAILURES:
                        report(f"point {grid.label(ci, i)} failed: {line}")
                    n_new_failures += 1
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    finally:
        ex.close()

    stacked = grid.assemble(results, bounds)
    errors = sorted(tuple(e) for e in errors)
    if n_new_failures > _REPORTED_FAILURES:
        report(f"{n_new_failures} points failed in all; their messages are in the manifest")
    manifest.update(
        complete=True,
        n_failed=int(np.sum(stacked["failed"])),
        errors=[
            {"static": c, "index": i, "point": grid.label(c, i), "error": line, "detail": detail}
            for c, i, line, detail in errors[:1000]
        ],
        chunk_seconds={"computed": len(seconds), "total": float(np.sum(seconds))},
        wall_seconds=time.perf_counter() - t_start,
    )
    result = SweepResult(
        out=stacked,
        params=grid.axes,
        static=grid.statics,
        manifest=manifest,
        path=None if store is None else store.folder,
        n_chunks=n_chunks,
        n_computed=len(jobs),
        n_cached=n_chunks - len(jobs),
    )
    if store is not None:
        store.save_result(result)
    return result
