r"""Diagonal linear networks on real images: the theory's own model, pixels as features.

Task: one digit against another (:func:`experiments._data.binary_digits`), pixels in
:math:`[0,1]` as features (pixels that are 0 in every image of the task dropped, :math:`d`
left). A balanced positive start keeps every :math:`\beta_j` of an even-depth network
:math:`\ge0`, and pixels are :math:`\ge0`, so no such network separates the two classes; the
features are therefore doubled, :math:`x\mapsto(x,-x)\in\mathbb R^{2d}`, and the predictor
on the pixels is :math:`\beta_{\rm eff}=\beta_{1:d}-\beta_{d+1:2d}` (the usual
:math:`u^{\odot L}-v^{\odot L}` parametrisation).

Training: discrete updates of :func:`flows.iterate` (float64) with GD, ℓ2-SAM(ρ),
ℓ∞-SAM(ρ/√(L·2d), the same ℓ2 length of perturbation as ℓ2-SAM's) and LE-SAM (σ annealed
from σ₀ to 0 by a cosine over the run, ρ_max = ρ). Each seed draws a random subset of the
images (a share ``subset`` of them) and a start :math:`w^{(l)}_j(0)=\alpha\,e^{0.1\xi_j}`,
:math:`\xi_j\sim N(0,1)`, the same in every layer (balanced, not uniform).

Measured at every saved step:

* ``low_share``: :math:`\sum_{j\in\rm low}|\beta_{{\rm eff},j}|/\sum_j|\beta_{{\rm eff},j}|`,
  the low-intensity pixels being those whose mean intensity
  :math:`\mu_j=\frac1n\sum_i x_{ij}` over the seed's images lies below the median;
* ``dominant_rank``: the intensity quantile (0 = dimmest pixel, 1 = brightest) of
  :math:`j^\dagger=\arg\max_j|\beta_{{\rm eff},j}|`, j† in the style of the single-example
  theory (ties: the first index);
* ``cos_l1``, ``cos_l2``: cosine of :math:`\beta_{\rm eff}` with the ℓ1 and ℓ2 max-margin
  directions of the seed's images (:func:`analysis.max_margin`; NaN where it fails);
* ``loss``, the training loss, and ``radius``: LE-SAM's :math:`\rho_t` (the radius for the
  others).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

import analysis
import flows

from ._data import binary_digits

METHODS = ("GD", "ℓ2-SAM", "ℓ∞-SAM", "LE-SAM")


class DiagonalConfig(NamedTuple):
    """Settings of the diagonal-network experiment (see the module docstring)."""

    depths: tuple = (1, 2, 3, 4)
    alphas: tuple = (0.05, 0.05, 0.2, 0.3)  # start scale α per depth
    rho: float = 0.4
    sigma: float = 0.02  # LE-SAM's initial loss budget σ₀
    lr: float = 0.1
    steps: int = 20000
    every: int = 20
    seeds: tuple = (0, 1, 2, 3, 4)
    subset: float = 0.8
    digits: tuple = (4, 9)
    long_steps: int = 200000  # the horizon of GD and ℓ2-SAM for "majors last" (10×)
    long_every: int = 1000
    long_depths: tuple = (2, 3, 4)


def long_config(config: DiagonalConfig) -> DiagonalConfig:
    """The long-horizon runs' settings: ``long_steps`` steps saved every ``long_every``, at the
    depths ``long_depths`` with their start scales."""
    alphas = dict(zip(config.depths, config.alphas, strict=True))
    return config._replace(
        steps=config.long_steps,
        every=config.long_every,
        depths=tuple(config.long_depths),
        alphas=tuple(alphas[L] for L in config.long_depths),
    )


def _method(name, depth, d2, config, total_time):
    if name == "GD":
        return flows.GD()
    if name == "ℓ2-SAM":
        return flows.L2SAM(config.rho)
    if name == "ℓ∞-SAM":
        return flows.LinfSAM(config.rho / np.sqrt(depth * d2))
    sigma0 = config.sigma
    return flows.LESAM(lambda t: sigma0 * 0.5 * (1 + jnp.cos(jnp.pi * t / total_time)), config.rho)


def _max_margin(X, y, p):
    try:
        return analysis.max_margin(flows.Dataset(X, y), p)
    except RuntimeError:  # the solver failed; the cosine is then NaN, not a guess
        return np.full(X.shape[1], np.nan)


def _cos(B, u):
    return B @ u / np.maximum(np.linalg.norm(B, axis=1), np.finfo(float).tiny)


def run_diagonal(config: DiagonalConfig, progress=None, methods=METHODS) -> xr.Dataset:
    """Train every (method, depth, seed) and return the measurements (dims method, depth,
    seed, step). ``methods``: a subset of :data:`METHODS`. ``progress(message)`` is called
    after each (method, depth)."""
    if not methods or any(m not in METHODS for m in methods):
        raise ValueError(f"`methods` must be a non-empty subset of {METHODS}; got {methods!r}.")
    if len(config.alphas) != len(config.depths):
        raise ValueError(
            f"`alphas` must give one scale per depth ({len(config.depths)}); got {config.alphas}."
        )
    if not 0 < config.subset <= 1:
        raise ValueError(f"`subset` must lie in (0, 1]; got {config.subset!r}.")
    X_all, y_all = binary_digits(*config.digits)
    X_all = X_all[:, X_all.max(axis=0) > 0]
    n, d = X_all.shape
    m = int(round(config.subset * n))
    subsets, starts_xi = [], []
    for seed in config.seeds:
        rng = np.random.default_rng(seed)
        subsets.append(np.sort(rng.permutation(n)[:m]))
        starts_xi.append(rng.standard_normal(2 * d))
    Xs = np.stack([X_all[s] for s in subsets])  # (S, m, d)
    ys = np.stack([y_all[s] for s in subsets])
    mu = Xs.mean(axis=1)  # (S, d) pixel intensity per seed
    low = mu < np.median(mu, axis=1, keepdims=True)
    ranks = np.argsort(np.argsort(mu, axis=1), axis=1) / (d - 1)  # intensity quantile of pixel j
    mm1 = np.stack([_max_margin(X, y, 1) for X, y in zip(Xs, ys, strict=True)])
    mm2 = np.stack([_max_margin(X, y, 2) for X, y in zip(Xs, ys, strict=True)])
    X2 = jnp.asarray(np.concatenate([Xs, -Xs], axis=2))
    Y = jnp.asarray(ys)
    total_time = config.steps * config.lr
    n_saved = config.steps // config.every + 1
    shape = (len(methods), len(config.depths), len(config.seeds), n_saved)
    out = {
        k: np.full(shape, np.nan)
        for k in ("loss", "low_share", "dominant_rank", "cos_l1", "cos_l2", "radius")
    }
    for a, name in enumerate(methods):
        for b, (depth, alpha) in enumerate(zip(config.depths, config.alphas, strict=True)):
            method = _method(name, depth, 2 * d, config, total_time)
            theta0 = jnp.asarray(
                np.stack(
                    [np.broadcast_to(alpha * np.exp(0.1 * xi), (depth, 2 * d)) for xi in starts_xi]
                )
            )

            def one(X, y, th, method=method):
                return flows.iterate(
                    method,
                    flows.Dataset(X, y),
                    th,
                    lr=config.lr,
                    steps=config.steps,
                    every=config.every,
                )

            # one Trajectory, batched over the seeds: lax.map runs them one after another in one
            # program (on a CPU a vmapped run costs more per lane than a lone one)
            runs = jax.lax.map(lambda a, one=one: one(*a), (X2, Y, theta0))
            thetas, loss = runs.thetas, runs.loss
            beta = np.asarray(flows.beta(thetas))  # (S, T, 2d)
            be = beta[..., :d] - beta[..., d:]
            mag = np.abs(be)
            total = mag.sum(axis=2)
            out["loss"][a, b] = np.asarray(loss)
            out["low_share"][a, b] = np.where(
                total > 0,
                (mag * low[:, None, :]).sum(axis=2) / np.where(total > 0, total, 1),
                np.nan,
            )
            lead = np.argmax(mag, axis=2)  # (S, T)
            out["dominant_rank"][a, b] = np.take_along_axis(ranks, lead, axis=1)
            out["cos_l1"][a, b] = np.stack([_cos(be[s], mm1[s]) for s in range(len(config.seeds))])
            out["cos_l2"][a, b] = np.stack([_cos(be[s], mm2[s]) for s in range(len(config.seeds))])
            out["radius"][a, b] = _radius(method, name, runs, X2, Y)
            if progress is not None:
                progress(f"diagonal {name} L={depth}: final loss {np.nanmean(loss[:, -1]):.2e}")
    coords = {
        "method": list(methods),
        "depth": list(config.depths),
        "seed": list(config.seeds),
        "step": np.arange(n_saved) * config.every,
    }
    dims = ("method", "depth", "seed", "step")
    ds = xr.Dataset({k: (dims, v) for k, v in out.items()}, coords=coords)
    ds["time"] = ("step", ds.step.values * config.lr)
    ds.attrs.update(
        experiment="diagonal networks on digits",
        digits=f"{config.digits[0]} (+1) vs {config.digits[1]} (-1)",
        pixels=d,
        images_per_seed=m,
        rho=config.rho,
        sigma0=config.sigma,
        lr=config.lr,
        alphas=str(dict(zip(config.depths, config.alphas, strict=True))),
        mm_failures=int(np.isnan(mm1[:, 0]).sum() + np.isnan(mm2[:, 0]).sum()),
    )
    return ds


def _radius(method, name, runs, X2, Y):
    """The perturbation radius at the saved iterates of each seed's run (``runs``: their
    Trajectory, batched over the seeds): LE-SAM's ρ_t by :func:`analysis.lesam_radius`, ρ for
    ℓ2-SAM and ℓ∞-SAM, 0 for GD."""
    S, T = runs.thetas.shape[:2]
    if name == "GD":
        return np.zeros((S, T))
    if name != "LE-SAM":
        return np.full((S, T), float(method.rho))
    seed = lambda s: jax.tree.map(lambda x: x[s], runs)  # noqa: E731
    return np.stack(
        [analysis.lesam_radius(seed(s), flows.Dataset(X2[s], Y[s]), method).rho for s in range(S)]
    )
