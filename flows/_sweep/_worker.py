"""What a Dask worker process needs before its first chunk: one XLA thread.

Registered by the Dask executor on every worker of the cluster, including workers
that join later or replace a dead one. Workers started by ``executor="dask"``
already have this environment; workers of a user's cluster get it here, provided
JAX has not yet started its backend in that process (XLA reads its flags then).
"""

from __future__ import annotations

import os

from distributed import WorkerPlugin

from .._jax_internals import backend_started
from ._chunk import worker_env


class OneXlaThread(WorkerPlugin):
    """Sets ``XLA_FLAGS`` (one intra-op thread) on a worker before JAX starts its backend."""

    name = "flows-sweep-one-xla-thread"

    def setup(self, worker):
        del worker
        if backend_started() is False:  # None (cannot tell): leave the worker as it is
            os.environ.update(worker_env())
