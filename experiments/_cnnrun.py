r"""The CNN experiments: every method and seed on one task, attributions over training, and
the flatness of the minima reached at equal training loss.

Methods (:mod:`experiments._cnn`): SGD; ℓ2-SAM at LE-SAM's cap ρ_max; ℓ∞-SAM at
ρ_max/√P (:math:`P` parameters: the same ℓ2 length); LE-SAM(σ₀ → 0 by cosine, ρ_max);
and ℓ2-SAM at :math:`\bar\rho`, LE-SAM's radius :math:`\rho_t` averaged over its steps and
seeds (run after LE-SAM), so that SAM is compared at both radii.

*Equal training loss.* :math:`\mathcal L^*` is the largest, over all runs, of the smallest
training loss a run reaches at a checkpoint, so every run reaches it; each run is
measured at its first checkpoint with loss :math:`\le\mathcal L^*` (the loss there is
kept as ``flat_loss``). There the Hessian of the training loss on the first
``flat_images`` training images gets a Hutchinson trace and a power-iteration top
eigenvalue (:mod:`experiments._hessian`).
"""

import equinox as eqx
import jax
import numpy as np
import xarray as xr
from jax.flatten_util import ravel_pytree

from ._cnn import (
    L2,
    LESAM,
    LINF,
    SGD,
    Method,
    Schedule,
    Task,
    cross_entropy,
    init_params,
    train_seeds,
)
from ._hessian import hutchinson_trace, top_eigenvalue

METHODS = ("SGD", "ℓ2-SAM ρmax", "ℓ∞-SAM", "LE-SAM", "ℓ2-SAM ρ̄")
SCALARS = (
    "train_loss",
    "test_acc",
    "acc_only_minor",
    "acc_only_major",
    "cam_minor_share",
    "sal_minor_share",
    "radius",
)


def _n_params(task, schedule):
    params, _ = init_params((0,), task.classes, schedule)
    return ravel_pytree(params)[0].size


def run_cnn(
    name,
    task: Task,
    schedule: Schedule,
    seeds,
    *,
    rho,
    sigma,
    probes,
    iterations,
    flat_images,
    progress=None,
) -> xr.Dataset:
    """Train all methods on ``task`` for each seed; dims (method, seed, checkpoint)."""
    P = _n_params(task, schedule)
    plans = {
        "SGD": Method(SGD),
        "ℓ2-SAM ρmax": Method(L2, rho),
        "ℓ∞-SAM": Method(LINF, rho / np.sqrt(P)),
        "LE-SAM": Method(LESAM, rho, sigma),
    }
    records, kept = {}, {}
    for method in METHODS:
        if method == "ℓ2-SAM ρ̄":
            rho_bar = float(np.mean(records["LE-SAM"]["radius"][:, 1:]))
            plans[method] = Method(L2, rho_bar)
        records[method], kept[method] = train_seeds(seeds, task, schedule, plans[method])
        if progress is not None:
            acc = records[method]["test_acc"][:, -1]
            progress(
                f"cnn {name} {method}: test accuracy {acc.mean():.3f} (radius "
                f"{plans[method].rho:.3g})"
            )
    losses = np.stack([records[m]["train_loss"] for m in METHODS])  # (M, S, C)
    target = float(np.max(np.min(losses, axis=2)))
    index = np.argmax(losses <= target, axis=2)  # first checkpoint at or below L*
    flat_X, flat_y = task.X[:flat_images], task.y[:flat_images]
    trace, trace_se, top = (np.zeros((len(METHODS), len(seeds))) for _ in range(3))
    for a, method in enumerate(METHODS):
        params = jax.tree.map(lambda k, a=a: k[np.arange(len(seeds)), index[a]], kept[method])
        t, se, lam = _flatness(params, task, schedule, flat_X, flat_y, probes, iterations)
        trace[a], trace_se[a], top[a] = t, se, lam
    if progress is not None:
        progress(f"cnn {name}: flatness at training loss {target:.3g}")
    n_ckpt = losses.shape[2]
    dims = ("method", "seed", "checkpoint")
    data = {k: (dims, np.stack([records[m][k] for m in METHODS])) for k in SCALARS}
    for k in ("cam_maps", "sal_maps"):
        data[k] = (dims + ("example", "row", "col"), np.stack([records[m][k] for m in METHODS]))
    data["flat_trace"] = (("method", "seed"), trace)
    data["flat_trace_se"] = (("method", "seed"), trace_se)
    data["flat_top"] = (("method", "seed"), top)
    data["flat_loss"] = (
        ("method", "seed"),
        np.take_along_axis(losses, index[..., None], 2)[..., 0],
    )
    data["flat_step"] = (("method", "seed"), index * schedule.every)
    data["attr_images"] = (
        ("example", "row", "col"),
        np.asarray(task.attr_X[: schedule.n_maps, 0], np.float64),
    )
    data["attr_minor"] = (("example", "row", "col"), np.asarray(task.minor[: schedule.n_maps]))
    data["attr_major"] = (("example", "row", "col"), np.asarray(task.major[: schedule.n_maps]))
    ds = xr.Dataset(
        {k: (d, np.asarray(v, np.float64)) for k, (d, v) in data.items()},
        coords={
            "method": list(METHODS),
            "seed": list(seeds),
            "checkpoint": np.arange(n_ckpt),
            "step": ("checkpoint", np.arange(n_ckpt) * schedule.every),
        },
    )
    ds.attrs.update(
        experiment=f"CNN on {name}",
        rho_max=rho,
        sigma0=sigma,
        rho_bar=plans["ℓ2-SAM ρ̄"].rho,
        rho_linf=plans["ℓ∞-SAM"].rho,
        params=P,
        lr=schedule.lr,
        batch=schedule.batch,
        steps=schedule.steps,
        width=schedule.width,
        equal_loss=target,
        probes=probes,
        power_iterations=iterations,
        flat_images=flat_images,
        train_images=int(task.X.shape[0]),
        dtype="float32",
    )
    return ds


def _flatness(params, task, schedule, X, y, probes, iterations):
    _, static = init_params((0,), task.classes, schedule)
    out = _flatness_many(params, static, X, y, probes, iterations)
    return tuple(np.asarray(o) for o in out)


@eqx.filter_jit
def _flatness_many(params, static, X, y, probes, iterations):
    def one(p, key):
        def loss(q):
            return cross_entropy(eqx.combine(q, static), X, y)

        k1, k2 = jax.random.split(key)
        tr, se = hutchinson_trace(loss, p, k1, probes)
        return tr, se, top_eigenvalue(loss, p, k2, iterations)

    n = jax.tree.leaves(params)[0].shape[0]
    keys = jax.random.split(jax.random.PRNGKey(1234), n)
    return jax.vmap(one)(params, keys)
