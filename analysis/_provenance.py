r"""What a swept result records of what made it: the method, described by value, and the
analysis's own source digest (part of a sweep's cache key and of a result's attributes).
"""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from flows.internal import digest, source_digest


def describe(method, swept=()) -> str:
    """A readable, reproducible description of a method: its type and field values, the
    fields named in ``swept`` (the axes of a diagram) written as ``swept``."""
    parts = []
    for name in (f.name for f in dataclasses.fields(method)):  # not the class variables
        value = getattr(method, name)
        if name in swept:
            value = "swept"
        elif callable(value):
            value = _describe_schedule(value)
        elif hasattr(value, "shape"):
            value = float(value)
        parts.append(f"{name}={value}")
    return f"{type(method).__name__}({', '.join(parts)})"


#: The times at which a schedule's values are fingerprinted (:func:`_describe_schedule`).
_SCHEDULE_PROBES = np.r_[0.0, np.geomspace(1e-3, 1e12, 61)]


def _describe_schedule(schedule) -> str:
    """A schedule σ(t) by its name and a digest of its values at :data:`_SCHEDULE_PROBES`, so
    that two different schedules (two lambdas) never share a diagram's cache key."""
    values = np.asarray(jax.vmap(schedule)(jnp.asarray(_SCHEDULE_PROBES)), dtype=np.float64)
    name = getattr(schedule, "__name__", type(schedule).__name__)
    return f"<schedule {name} {digest(values)[:12]}>"


def analysis_version() -> str:
    """SHA-256 of the analysis's sources (:func:`flows.internal.source_digest`): an edit to any
    of them changes a diagram's cache key."""
    return source_digest(Path(__file__).resolve().parent)
