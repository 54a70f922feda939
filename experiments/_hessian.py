r"""Curvature of a loss at a point: Hessian-vector products, Hutchinson's trace, top eigenvalue.

For a scalar loss :math:`\mathcal L(\theta)` of a parameter pytree, flattened to
:math:`\theta\in\mathbb R^P`:

* the Hessian-vector product :math:`Hv=\frac{d}{dt}\nabla\mathcal L(\theta+tv)|_{t=0}`,
  forward-over-reverse (:func:`jax.jvp` of :func:`jax.grad`), without forming :math:`H`;
* Hutchinson's estimator :math:`\operatorname{tr}H\approx\frac1m\sum_{k=1}^m v_k^\top Hv_k`
  with Rademacher probes :math:`v_k\in\{-1,1\}^P` (unbiased, since
  :math:`\mathbb E[vv^\top]=I`; its variance is :math:`\frac2m\sum_{i\ne j}H_{ij}^2`);
* power iteration :math:`v\leftarrow Hv/\lVert Hv\rVert`, :math:`\lambda=v^\top Hv`, which
  converges to the eigenvalue of largest magnitude. Near a minimum :math:`H` is close to
  positive semi-definite, and that eigenvalue is the top one :math:`\lambda_{\max}`.

The arithmetic is in the dtype of ``params`` (the caller chooses it).
"""

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

import flows  # noqa: F401  (importing flows enables float64: dtypes stay explicit)


def _flat(loss, params):
    flat, unravel = ravel_pytree(params)

    def flat_loss(z):
        return loss(unravel(z))

    return flat, flat_loss


def hvp(loss, params, v):
    """:math:`H v` for the Hessian of ``loss`` at ``params``; ``v`` flat, shape ``(P,)``."""
    flat, flat_loss = _flat(loss, params)
    return jax.jvp(jax.grad(flat_loss), (flat,), (v.astype(flat.dtype),))[1]


def _check_count(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be an integer >= 1; got {value!r}.")


def hutchinson_trace(loss, params, key, probes: int = 64):
    r"""Hutchinson estimate of :math:`\operatorname{tr}\nabla^2\mathcal L`.

    Uses ``probes`` Rademacher vectors; returns ``(estimate, standard_error)`` as 0-d arrays."""
    _check_count("probes", probes)
    flat, flat_loss = _flat(loss, params)
    grad = jax.grad(flat_loss)
    vs = jax.random.rademacher(key, (probes, flat.size), dtype=flat.dtype)
    quad = jax.vmap(lambda v: v @ jax.jvp(grad, (flat,), (v,))[1])(vs)
    return jnp.mean(quad), jnp.std(quad, ddof=1) / jnp.sqrt(probes) if probes > 1 else jnp.nan


def top_eigenvalue(loss, params, key, iterations: int = 50):
    r"""Power iteration on :math:`H` from a random start: the eigenvalue of largest magnitude."""
    _check_count("iterations", iterations)
    flat, flat_loss = _flat(loss, params)
    grad = jax.grad(flat_loss)

    def mv(v):
        return jax.jvp(grad, (flat,), (v,))[1]

    v0 = jax.random.normal(key, flat.shape, flat.dtype)
    v0 = v0 / jnp.linalg.norm(v0)

    def body(_, v):
        w = mv(v)
        return w / jnp.maximum(jnp.linalg.norm(w), jnp.finfo(flat.dtype).tiny)

    v = jax.lax.fori_loop(0, iterations, body, v0)
    return v @ mv(v)
