"""What a Dask worker process needs before its first chunk: one XLA thread.

Registered by the Dask executor on every worker of the cluster, including workers
that join later or replace a dead one. Workers started by ``executor="dask"``
already have this environment; workers of a user's cluster get it here, provided
JAX has not yet started its backend in that process (XLA reads its flags then).
"""

from __future__ import annotations

import os

from distributed import WorkerPlugin

from ._executors import worker_env


def _backend_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # cannot tell: leave the worker as it is
        return True


class OneXlaThread(WorkerPlugin):
    """Sets ``XLA_FLAGS`` (one intra-op thread) on a worker before JAX starts its backend."""

    name = "flows-sweep-one-xla-thread"

    def setup(self, worker):
        del worker
        if not _backend_started():
            os.environ.update(worker_env())
