"""Where a sweep's chunks run: host threads of this process, or tasks on a Dask cluster.

Both executors run the same :func:`~flows._sweep._chunk.compute_chunk` on the same
chunks, so their answers are bit for bit the same; they differ only in where:

* :class:`Threads` (the default) runs chunks in ``workers`` host threads on one
  device. XLA releases the GIL while it computes, and one CPU device runs one
  computation per calling thread, so this uses every core with nothing started.
* :class:`Dask` runs each chunk as one task on a ``dask.distributed`` cluster (a
  ``LocalCluster``, or SLURM/PBS/SGE workers through ``dask-jobqueue``). The
  chunk function is scattered to every worker once; each worker process compiles
  it once and reuses it. The scheduler re-runs the tasks of a worker that dies;
  chunk files written by the workers to the shared ``cache_dir`` make an
  interrupted client resumable.

Workers are processes started by spawning, never forking (JAX is multithreaded,
and a forked copy of its thread pool deadlocks), each with one XLA thread so that
``n`` workers use ``n`` cores, not ``n²`` threads.
"""

from __future__ import annotations

import functools
import os
import sys
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import jax
import numpy as np

from .._cores import usable_cores
from .._validate import MAX_WORKERS
from ._chunk import ChunkFn, choose_chunk_size, compute_chunk, worker_env
from ._key import code_version, package_versions
from ._store import writable

# XLA's CPU backend: no Eigen thread pool, one intra-op thread (one core per worker).
EXECUTORS = ("None", "'threads'", "'dask'", "a dask.distributed.Client")


def _is_client(obj) -> bool:
    distributed = sys.modules.get("distributed")
    return distributed is not None and isinstance(obj, distributed.Client)


def check_devices(devices) -> list:
    """``devices`` (a list, tuple or other iterable of ``jax.Device``) as a list, else a
    ``ValueError`` naming ``devices`` (a string such as ``"gpu"`` is not a list of devices)."""
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
        raise ValueError(
            f"`devices` must be None or a list of JAX devices (e.g. jax.devices('gpu')); "
            f"got {devices!r}."
        )
    devices = list(devices)
    bad = [d for d in devices if not isinstance(d, jax.Device)]
    if bad:
        raise ValueError(
            f"`devices` must be None or a list of JAX devices (e.g. jax.devices('gpu')); "
            f"{bad[0]!r} is not one."
        )
    return devices


def check_executor(executor, workers, devices) -> None:
    """Check ``sweep``'s ``executor``, ``workers`` and ``devices`` together: a named ``ValueError``.

    Called once, where they are given (:class:`flows.SweepOptions`).
    """
    if workers is not None and (
        isinstance(workers, bool)
        or not isinstance(workers, (int, np.integer))
        or not 1 <= workers <= MAX_WORKERS
    ):
        raise ValueError(
            f"`workers` must be None or an integer in [1, {MAX_WORKERS}]; got {workers!r}."
        )
    if devices is not None and not list(devices):
        raise ValueError("`devices` must hold at least one device.")
    if executor is None or (isinstance(executor, str) and executor == "threads"):
        return
    if isinstance(executor, str) and executor == "dask":
        if devices is not None:
            raise ValueError(
                "`devices` must be None with a Dask executor: each worker uses its own."
            )
        return
    if _is_client(executor):
        if devices is not None or workers is not None:
            raise ValueError(
                "`devices` and `workers` must be None with a Dask Client: the cluster sets them."
            )
        return
    raise ValueError(f"`executor` must be one of {', '.join(EXECUTORS)}; got {executor!r}.")


def executor_factory(executor, workers, devices):
    """A maker of the executor of validated ``executor``, ``workers`` and ``devices``
    (:func:`check_executor`); the executor (a cluster, for ``"dask"``) is only started when
    the maker is called, after the cache is read."""
    if executor is None or (isinstance(executor, str) and executor == "threads"):
        return functools.partial(Threads, workers, devices)
    if isinstance(executor, str) and executor == "dask":
        return functools.partial(Dask, None, workers)
    return functools.partial(Dask, executor, None)


class Threads:
    """Chunks in host threads of this process, on one device (or split across ``devices``)."""

    def __init__(self, workers, devices):
        cpu = devices is None or devices[0].platform == "cpu"
        self.workers = int(workers) if workers is not None else (usable_cores() if cpu else 1)

    def describe(self) -> dict:
        return {"kind": "threads", "workers": self.workers}

    def start(self, chunk_fn: ChunkFn, store) -> None:
        del chunk_fn, store  # nothing to ship: the threads share this process

    def probe(self, chunk_fn, point0, n_points, chunk_size, max_chunk, budget):
        return choose_chunk_size(
            chunk_fn, point0, n_points, chunk_size, max_chunk, budget, self.workers
        )

    def run(self, chunk_fn, jobs):
        """Yield ``(job id, (outputs, errors, seconds))`` as chunks finish."""
        pool = ThreadPoolExecutor(max_workers=self.workers)
        try:
            futures = {pool.submit(compute_chunk, chunk_fn, *args): jid for jid, args in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            # On Ctrl-C: drop the queued chunks; running ones finish and are cached.
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        pass


def _local_cluster(n_workers):
    """A ``LocalCluster`` of spawned single-threaded workers: one per core, or one per GPU."""
    import dask
    import jax
    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster

    env = worker_env()
    devices = jax.local_devices()
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        if devices[0].platform == "gpu":
            # One worker per GPU, each seeing only its device, without JAX's default
            # preallocation of 75 % of the device memory.
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = visible.split(",") if visible else [str(i) for i in range(len(devices))]
            ids = ids[:n_workers] if n_workers else ids
            spec = {
                f"gpu-{i}": {
                    "cls": Nanny,
                    "options": {
                        "host": "127.0.0.1",
                        "nthreads": 1,
                        "env": {
                            **env,
                            "CUDA_VISIBLE_DEVICES": i,
                            "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                        },
                    },
                }
                for i in ids
            }
            scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False}}
            return SpecCluster(workers=spec, scheduler=scheduler, silence_logs=40)
        return LocalCluster(
            n_workers=n_workers or usable_cores(),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,  # logging.ERROR: worker restarts are expected, not news
            env=env,
        )


def _check_worker(folder: str, token: str) -> str | None:
    """On a worker: ``None`` if it sees the client's ``token`` file and can write ``folder``."""
    folder = Path(folder)
    if not (folder / token).exists():
        return f"does not see {folder} (not on storage shared with the client?)"
    return writable(folder / "chunks")


def _versions():
    """On a worker: its flows source hash and package versions (they enter the cache key)."""
    return code_version()["flows_source_sha256"], package_versions()


def _probe(chunk_fn, *args):
    """On a worker: the chunk size and where it was measured (backend, devices)."""
    return choose_chunk_size(chunk_fn, *args, 1)


class Dask:
    """Chunks as tasks on a Dask cluster: the given ``Client``'s, or a new ``LocalCluster``."""

    def __init__(self, client, n_workers):
        try:
            import distributed
        except ImportError:
            raise ValueError(
                "`executor='dask'` needs dask.distributed: pip install -e '.[dask]'."
            ) from None
        self.owned = client is None
        if self.owned:
            self.cluster = _local_cluster(n_workers)
            client = distributed.Client(self.cluster)
        self.client = client
        self.fn_future = None
        n = len(client.nthreads())
        if n == 0:
            self.close()
            raise RuntimeError(
                "`executor` is a dask.distributed Client with no workers; start some first "
                "(cluster.scale(n), then client.wait_for_workers(n))."
            )

    def describe(self) -> dict:
        return {
            "kind": "dask",
            "scheduler": self.client.scheduler.address,
            "workers": len(self.client.nthreads()),
        }

    def start(self, chunk_fn: ChunkFn, store) -> None:
        """Check the workers' folder access and versions, set up their XLA, ship the function."""
        if store is not None:
            token = f".client-{uuid.uuid4().hex}"
            (store.folder / token).write_bytes(b"")
            try:
                seen = self.client.run(_check_worker, str(store.folder), token)
            finally:
                (store.folder / token).unlink()
            bad = {w: msg for w, msg in seen.items() if msg is not None}
            if bad:
                raise ValueError(
                    "`cache_dir` must be a folder that every Dask worker can read and write; "
                    + "; ".join(f"worker {w} {msg}" for w, msg in sorted(bad.items()))
                )
        here = _versions()
        other = {w: v for w, v in self.client.run(_versions).items() if tuple(v) != here}
        if other:
            worker, (code, packages) = sorted(other.items())[0]
            raise RuntimeError(
                f"`executor`: {len(other)} Dask worker(s) run other versions of flows or of its "
                f"packages than this process, so their results would not match the cache key "
                f"(e.g. {worker}: {packages}, code {code[:12]}; here: {here[1]}, code "
                f"{here[0][:12]})."
            )
        from ._worker import OneXlaThread

        self.client.register_plugin(OneXlaThread(), name=OneXlaThread.name)
        self.fn_future = self.client.scatter(chunk_fn, broadcast=True, hash=False)

    def probe(self, chunk_fn, point0, n_points, chunk_size, max_chunk, budget):
        del chunk_fn  # the scattered copy is used
        future = self.client.submit(
            _probe, self.fn_future, point0, n_points, chunk_size, max_chunk, budget, pure=False
        )
        return future.result()

    def run(self, chunk_fn, jobs):
        """Yield ``(job id, (outputs, errors, seconds))`` as tasks finish."""
        from distributed import as_completed as dask_completed

        del chunk_fn  # the scattered copy is used
        futures = {}
        for jid, args in jobs:
            futures[self.client.submit(compute_chunk, self.fn_future, *args, pure=False)] = jid
        try:
            for future, value in dask_completed(futures, with_results=True):
                yield futures[future], value
        finally:
            self.client.cancel(list(futures))

    def close(self) -> None:
        if self.fn_future is not None:
            self.fn_future.release()
            self.fn_future = None
        if self.owned:  # bounded: a worker that does not stop must not hang the sweep
            self.client.close(timeout=60)
            self.cluster.close(timeout=60)
