"""The sweep engine: a cached, resumable, batched sweep of a per-point function over a grid.

Modules: ``_grid`` (static combinations, cost-ordered points, chunks), ``_key``
(the cache key and the code and package versions), ``_store`` (chunk files,
``result.npz``, ``manifest.json``), ``_chunk`` (one chunk: compile once, evaluate,
isolate failing points), ``_executors`` (host threads or Dask tasks), ``_worker``
(the set-up of a Dask worker process) and ``_run`` (the orchestrator, :func:`sweep`).
"""

from ._run import SweepOptions as SweepOptions
from ._run import sweep as sweep
from ._store import SweepResult as SweepResult
from ._store import load_sweep as load_sweep
