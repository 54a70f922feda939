"""Eager validation of concrete inputs.

Every public entry point checks the values it is given when they are concrete
(Python numbers or NumPy/JAX arrays) and raises a ``ValueError`` naming the
argument. Traced values (inside ``jax.jit``/``jax.vmap``) cannot be inspected
eagerly: they are guarded with :func:`equinox.error_if` instead, which raises a
checked runtime error, never a silent NaN.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def is_traced(x) -> bool:
    """True when any leaf of ``x`` is a JAX tracer (value unknown at trace time)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def check_finite(name: str, x) -> None:
    """Raise ``ValueError`` if the concrete array ``x`` holds NaN or inf."""
    if not is_traced(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError(f"`{name}` must be finite (no NaN or inf); got {x!r}.")


def check_scalar(name: str, x, *, positive: bool = False, nonnegative: bool = False):
    """Check a real scalar parameter; return it as a float64 array.

    Concrete values are checked eagerly (finite, scalar, and the sign constraint);
    traced values get an :func:`equinox.error_if` guard with the same message.
    """
    arr = jnp.asarray(x, dtype=jnp.float64)
    if arr.ndim != 0:
        raise ValueError(f"`{name}` must be a real scalar; got shape {arr.shape}.")
    bound = "> 0" if positive else ">= 0" if nonnegative else "finite"
    message = f"`{name}` must be finite and {bound}"
    bad = ~jnp.isfinite(arr)
    if positive:
        bad = bad | (arr <= 0)
    elif nonnegative:
        bad = bad | (arr < 0)
    if is_traced(arr):
        return eqx.error_if(arr, bad, message)
    if bool(bad):
        raise ValueError(f"{message}; got {x!r}.")
    return arr


def check_int(name: str, x, *, minimum: int) -> int:
    """Check a static integer parameter (depth, step counts)."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"`{name}` must be a Python integer >= {minimum}; got {x!r}.")
    if x < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {x!r}.")
    return int(x)
