"""Shared test fixtures: the list of all methods, datasets, and an independent numpy SAM.

Adding a method means adding one line to ``all_methods``.
"""

import jax.numpy as jnp
import numpy as np

import flows


def cosine_sigma(t):
    """An annealed LE-SAM budget σ(t) (the training schedule of the LE-SAM paper)."""
    return 0.35 * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t / 2.0, 1.0)))


def all_methods():
    """One instance of every method (ids for pytest parametrisation)."""
    return {
        "gd": flows.GD(),
        "l2sam": flows.L2SAM(0.3),
        "l2sam_layer": flows.L2SAM(0.3, per_layer=True),
        "linfsam": flows.LinfSAM(0.05),
        "lesam": flows.LESAM(0.35, 0.3),
        "lesam_capped": flows.LESAM(5.0, 0.2),
    }


def smooth_methods():
    """Methods with a smooth (or Lipschitz) vector field: every method but ℓ∞-SAM."""
    return {k: m for k, m in all_methods().items() if not isinstance(m, flows.LinfSAM)}


def separable_data(n=4, d=3, seed=0):
    """A random dataset separable by a positive teacher w > 0, with margins >= 0.2·‖w‖.

    The teacher is positive because a balanced even-depth network only reaches
    β ≥ 0: with a teacher outside the positive orthant the loss has a finite
    minimiser, ‖∇L‖ → 0 in finite time and the ℓ2-SAM direction g/‖g‖ becomes
    undefined there (the solvers then stall, status max_steps).
    """
    rng = np.random.default_rng(seed)
    w = np.abs(rng.normal(size=d)) + 0.1
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    X += 0.2 * y[:, None] * w / np.linalg.norm(w)  # push every point away from the boundary
    return flows.Dataset(X, y)


def numpy_perturbation(method, g, t=0.0):
    """An independent numpy implementation of each perturbation rule (science.md §2)."""
    if isinstance(method, flows.GD):
        return np.zeros_like(g)
    if isinstance(method, flows.L2SAM):
        rho = float(method.rho)
        if method.per_layer:
            return rho * g / np.linalg.norm(g, axis=1, keepdims=True)
        return rho * g / np.linalg.norm(g)
    if isinstance(method, flows.LinfSAM):
        return float(method.rho) * np.sign(g)
    if isinstance(method, flows.LESAM):
        sigma = method.sigma(t) if callable(method.sigma) else float(method.sigma)
        norm = np.linalg.norm(g)
        rho_t = min(sigma / (norm + float(method.eps)), float(method.rho_max))
        return rho_t * g / norm
    raise NotImplementedError(type(method))
