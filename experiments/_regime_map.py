r"""The regime map on real data: diagonal networks on digit pairs over a grid of α/ρ, beside the
single-example theory's regime at the same α/ρ.

*Task.* One digit against another (:func:`experiments._data.binary_digits`, all images of the
pair), pixels that are 0 in every image dropped (:math:`d` left), features doubled
:math:`x\mapsto(x,-x)` as in :mod:`experiments._diagonal`, :math:`\beta_{\rm eff}=\beta_{1:d}-
\beta_{d+1:2d}`. Uniform start :math:`w^{(l)}(0)=\alpha` (the theory's start), α per depth
(``alphas``), ℓ2-SAM at :math:`\rho=\alpha/r` for each ratio :math:`r` of ``ratios`` (the same
:math:`r` at every depth) and GD, ``steps`` discrete steps of :func:`flows.iterate` at rate
``lr`` (float64).

*The theory's μ.* The reduction to one example: :math:`\mu_j=|\frac1n\sum_iy_ix_{ij}|`, the
pair's mean-difference feature vector in absolute value (the copy :math:`\pm x_j` of the doubled
features whose sign agrees with the label carries it; the single-example analysis needs
:math:`\mu>0`). Minor pixels: :math:`\mu_j` below the median; the major one: :math:`\arg\max\mu`.
The predicted regime is :func:`analysis.phase_diagram` of ℓ2-SAM(ρ = 1) at α = r on that μ
(its regime depends on α/ρ only, docs/theory.md §14).

*The measured regime* (a rule fixed before the runs), from the saved iterates:

* ``collapse``: the final loss is at least 0.95 ℓ(0) = 0.95 log 2 (the run did not fit);
* otherwise, with :math:`j^\dagger=\arg\max_j|\beta_{{\rm eff},j}|` at the first saved step
  where the loss is at most ``early_loss`` and at the end: ``direct`` if it is the major pixel
  at both and at every saved step between, ``excursion`` if at both but not between,
  ``sequential`` if it is another pixel first and the major one at the end, ``minor`` if it is
  not the major one at the end.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

import analysis
import flows

from ._data import binary_digits

METHODS = ("GD", "ℓ2-SAM")


class RegimeMapConfig(NamedTuple):
    """Settings of the real-data regime map (see the module docstring)."""

    pairs: tuple = ((4, 9), (3, 8))
    depths: tuple = (1, 2, 3, 4)
    alphas: tuple = (0.05, 0.05, 0.2, 0.3)
    ratios: tuple = (0.08, 0.1, 0.12, 0.15, 0.2, 0.3, 0.5, 0.8)  # α/ρ
    lr: float = 0.1
    steps: int = 20000
    every: int = 200
    early_loss: float = 0.6


def theory_mu(X, y) -> np.ndarray:
    r""":math:`\mu_j=|\frac1n\sum_i y_ix_{ij}|` of a binary task ``X`` ``(n, d)``, ``y`` ±1."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    return np.abs((y[:, None] * X).mean(axis=0))


def theory_regimes(mu, ratios, depth: int) -> list:
    """The single-example regime of ℓ2-SAM(ρ = 1) at α = each ratio, by
    :func:`analysis.phase_diagram` (names of :data:`analysis.REGIMES`)."""
    ds = analysis.phase_diagram(
        flows.L2SAM(1.0),
        np.asarray(mu),
        alpha=np.asarray(ratios, float),
        depth=depth,
        progress=False,
    )
    names = ds.attrs["regimes"].split()
    return [names[int(c)] for c in np.atleast_1d(ds.code.values)]


def measured_regime(loss, lead, major, early_loss) -> str:
    """The measured regime of one run from its saved ``loss`` and ``lead`` (:math:`j^\\dagger`),
    by the rule of the module docstring."""
    loss = np.asarray(loss)
    if not np.isfinite(loss[-1]) or loss[-1] >= 0.95 * np.log(2.0):
        return "collapse"
    early = int(np.argmax(loss <= early_loss))
    path = np.asarray(lead)[early:]
    if path[-1] != major:
        return "minor"
    if path[0] != major:
        return "sequential"
    return "direct" if np.all(path == major) else "excursion"


def run_regime_map(config: RegimeMapConfig, progress=None) -> xr.Dataset:
    """Every (pair, depth, method, ratio) run; dims pair, depth, method, ratio, step."""
    if len(config.alphas) != len(config.depths):
        raise ValueError(
            f"`alphas` must give one scale per depth ({len(config.depths)}); got {config.alphas}."
        )
    ratios = np.asarray(config.ratios, np.float64)
    if ratios.ndim != 1 or ratios.size < 1 or np.any(~(ratios > 0)):
        raise ValueError(f"`ratios` must be numbers > 0; got {config.ratios!r}.")
    n_saved = config.steps // config.every + 1
    P, D, R = len(config.pairs), len(config.depths), len(ratios)
    shape = (P, D, len(METHODS), R, n_saved)
    out = {k: np.full(shape, np.nan) for k in ("loss", "low_share", "lead", "lead_quantile")}
    measured = np.empty((P, D, len(METHODS), R), dtype=object)
    theory = np.empty((P, D, R), dtype=object)
    majors, dims = [], []
    for p, pair in enumerate(config.pairs):
        X, y = binary_digits(*pair)
        X = X[:, X.max(axis=0) > 0]
        n, d = X.shape
        mu = theory_mu(X, y)
        keep = mu > 0
        major = int(np.argmax(mu))
        majors.append(major)
        dims.append(d)
        low = mu < np.median(mu)
        quantile = np.argsort(np.argsort(mu)) / (d - 1)
        data = flows.Dataset(jnp.asarray(np.concatenate([X, -X], axis=1)), jnp.asarray(y))
        for b, (depth, alpha) in enumerate(zip(config.depths, config.alphas, strict=True)):
            theory[p, b] = theory_regimes(mu[keep], ratios, depth)
            theta0 = jnp.full((depth, 2 * d), alpha)

            def one(rho, theta0=theta0, data=data):
                return flows.iterate(
                    flows.L2SAM(rho),
                    data,
                    theta0,
                    lr=config.lr,
                    steps=config.steps,
                    every=config.every,
                )

            # ρ = 0 is GD exactly (ε = 0); lax.map: one program, the runs one after another
            rhos = jnp.asarray(np.concatenate([[0.0], alpha / ratios]))
            runs = jax.lax.map(one, rhos)
            beta = np.asarray(flows.beta(runs.thetas))  # (1 + R, T, 2d)
            be = np.abs(beta[..., :d] - beta[..., d:])
            total = be.sum(axis=2)
            share = np.where(
                total > 0, (be * low).sum(axis=2) / np.where(total > 0, total, 1), np.nan
            )
            lead = np.argmax(be, axis=2)
            loss = np.asarray(runs.loss)
            for a, rows in ((0, [0] * R), (1, list(range(1, R + 1)))):
                out["loss"][p, b, a] = loss[rows]
                out["low_share"][p, b, a] = share[rows]
                out["lead"][p, b, a] = lead[rows]
                out["lead_quantile"][p, b, a] = quantile[lead[rows]]
                for r, row in enumerate(rows):
                    measured[p, b, a, r] = measured_regime(
                        loss[row], lead[row], major, config.early_loss
                    )
            if progress is not None:
                agree = sum(m == t for m, t in zip(measured[p, b, 1], theory[p, b], strict=True))
                progress(
                    f"regime map {pair[0]} vs {pair[1]} L={depth}: theory and measurement "
                    f"agree at {agree} of {R} ratios"
                )
    pair_names = [f"{a} vs {b}" for a, b in config.pairs]
    coords = {
        "pair": pair_names,
        "depth": list(config.depths),
        "method": list(METHODS),
        "ratio": ratios,
        "step": np.arange(n_saved) * config.every,
    }
    full = ("pair", "depth", "method", "ratio", "step")
    ds = xr.Dataset({k: (full, v) for k, v in out.items()}, coords=coords)
    ds["measured"] = (("pair", "depth", "method", "ratio"), measured.astype(str))
    ds["theory"] = (("pair", "depth", "ratio"), theory.astype(str))
    ds["major"] = (("pair",), np.asarray(majors))
    ds["pixels"] = (("pair",), np.asarray(dims))
    ds["time"] = ("step", ds.step.values * config.lr)
    ds.attrs.update(
        experiment="regime map on digit pairs",
        alphas=str(dict(zip(config.depths, config.alphas, strict=True))),
        lr=config.lr,
        early_loss=config.early_loss,
    )
    return ds
