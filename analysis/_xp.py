"""The array namespace of the pass policy, from its inputs.

The policy (:mod:`analysis._run`, the certificates of :mod:`analysis._certify`,
:func:`analysis._regime.decide`) is written once, on arrays of any leading batch shape
(``theta`` is ``(..., L, d)``; each run's numbers are ``(...)``), in the namespace of its inputs:
:mod:`numpy` where every input is a NumPy array or a Python number (the engine driver,
:func:`analysis._drive.drive`, evaluates it eagerly on a whole batch of runs between two
engine passes, with no program to trace or compile), :mod:`jax.numpy` as soon as one is a JAX
array or a tracer (the JAX driver, :func:`analysis._run.run`, under ``jit`` and ``vmap``).
"""

import jax
import jax.numpy as jnp
import numpy as np


def namespace(*xs):
    """:mod:`jax.numpy` if any of ``xs`` is a JAX array (tracers included), else :mod:`numpy`."""
    return jnp if any(isinstance(x, jax.Array) for x in xs) else np


def at(xp, x, k):
    """``x[..., k]`` for each run: the entry ``k`` (an index per run, shape ``(...)``) of the
    run's last axis."""
    return xp.take_along_axis(x, xp.asarray(k)[..., None], axis=-1)[..., 0]
