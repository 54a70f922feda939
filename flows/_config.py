"""Numerical configuration shared by the whole package.

The project computes in float64 only: logistic margins reach hundreds and the
initialisations of interest reach 1e-8, neither of which float32 resolves.
Importing :mod:`flows` enables JAX's x64 mode, and :func:`as_float64` refuses to
return anything else, so a float32 result cannot appear by accident.
"""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def as_float64(x):
    """Return ``x`` as a float64 JAX array; raise if x64 mode was switched off."""
    arr = jnp.asarray(x, dtype=jnp.float64)
    if arr.dtype != jnp.float64:
        raise RuntimeError(
            "JAX x64 mode is disabled (jax_enable_x64=False); this library computes in "
            "float64 only. Do not disable x64 after importing flows."
        )
    return arr
