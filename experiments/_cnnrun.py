r"""The CNN experiments: every method and seed on one task, attributions over training, and
the flatness of the minima reached at fixed training-loss levels.

Methods (:mod:`experiments._cnn`), all fixed before the run:

* SGD;
* ℓ2-SAM at each radius of a small sweep (``sweep``), and "ℓ2-SAM best", the sweep radius with
  the highest final test accuracy (mean over seeds): the strongest SAM the sweep offers;
* LE-SAM in its own regime (σ₀ → 0 by cosine, a cap ρ_max that binds on few steps: σ₀ from
  a pilot SGD run's gradient norms, :func:`experiments._cnn.pilot_sigma`; the share of steps
  where the cap binds is the ``capped`` record);
* "LE-SAM capped": the same σ₀ with a small cap that binds on most steps (then LE-SAM is ℓ2-SAM
  at that cap until late in training);
* ℓ2-SAM at :math:`\bar\rho`, LE-SAM's radius :math:`\rho_t` averaged over its steps and seeds
  (run after LE-SAM).

*Flatness at fixed loss levels.* For each level :math:`\ell` of ``levels`` every run is measured
at its first checkpoint with training loss :math:`\le\ell`; a run that never gets there is NaN at
that level (reported, not averaged in). There the Hessian of the training loss on the first
``flat_images`` training images gets a Hutchinson trace and a power-iteration top eigenvalue
(:mod:`experiments._hessian`).
"""

import equinox as eqx
import jax
import numpy as np
import xarray as xr
from jax.flatten_util import ravel_pytree

from ._cnn import (
    L2,
    LESAM,
    SGD,
    Method,
    Schedule,
    Task,
    cross_entropy,
    init_params,
    train_seeds,
)
from ._hessian import hutchinson_trace, top_eigenvalue

FIXED = ("SGD", "LE-SAM", "LE-SAM capped", "ℓ2-SAM ρ̄")
FLAT = FIXED + ("ℓ2-SAM best",)  # the methods whose flatness is measured


def sweep_name(rho) -> str:
    """The method name of ℓ2-SAM at sweep radius ``rho``."""
    return f"ℓ2-SAM ρ={rho:g}"


def methods(sweep) -> tuple:
    """Every method of a run, in order: the fixed ones, the sweep, and "ℓ2-SAM best"."""
    return FIXED + tuple(sweep_name(r) for r in sweep) + ("ℓ2-SAM best",)


SCALARS = (
    "train_loss",
    "test_acc",
    "acc_only_minor",
    "acc_only_major",
    "cam_minor_share",
    "sal_minor_share",
    "radius",
    "capped",
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
    rho_max,
    rho_capped,
    sigma,
    sigma_capped,
    sweep,
    levels,
    probes,
    iterations,
    flat_images,
    progress=None,
) -> xr.Dataset:
    """Train all methods on ``task`` for each seed; dims (method, seed, checkpoint), the
    flatness with dims (method, level, seed)."""
    P = _n_params(task, schedule)
    names = methods(sweep)
    plans = {
        "SGD": Method(SGD),
        "LE-SAM": Method(LESAM, rho_max, sigma),
        "LE-SAM capped": Method(LESAM, rho_capped, sigma_capped),
    }
    plans.update({sweep_name(r): Method(L2, r) for r in sweep})
    records, kept = {}, {}
    for method in names:
        if method == "ℓ2-SAM ρ̄":
            plans[method] = Method(L2, float(np.mean(records["LE-SAM"]["radius"][:, 1:])))
        if method == "ℓ2-SAM best":
            acc = [np.mean(records[sweep_name(r)]["test_acc"][:, -1]) for r in sweep]
            best = sweep_name(sweep[int(np.argmax(acc))])
            plans[method] = plans[best]
            records[method], kept[method] = records[best], kept[best]
        else:
            records[method], kept[method] = train_seeds(seeds, task, schedule, plans[method])
        if progress is not None:
            acc = records[method]["test_acc"][:, -1]
            progress(
                f"cnn {name} {method}: test accuracy {acc.mean():.3f} (radius "
                f"{plans[method].rho:.3g})"
            )
    losses = np.stack([records[m]["train_loss"] for m in names])  # (M, S, C)
    flat_X, flat_y = task.X[:flat_images], task.y[:flat_images]
    shape = (len(names), len(levels), len(seeds))
    trace, trace_se, top, flat_loss, flat_step = (np.full(shape, np.nan) for _ in range(5))
    for j, level in enumerate(levels):
        reached = losses <= level
        index = np.argmax(reached, axis=2)  # first checkpoint at or below the level
        ok = reached.any(axis=2)
        for a, method in enumerate(names):
            if method not in FLAT:
                continue
            at = (np.arange(len(seeds)), index[a])
            params = jax.tree.map(lambda k, at=at: k[at], kept[method])
            t, se, lam = _flatness(params, task, schedule, flat_X, flat_y, probes, iterations)
            keep = ok[a]
            trace[a, j] = np.where(keep, t, np.nan)
            trace_se[a, j] = np.where(keep, se, np.nan)
            top[a, j] = np.where(keep, lam, np.nan)
            flat_loss[a, j] = np.where(keep, losses[a, np.arange(len(seeds)), index[a]], np.nan)
            flat_step[a, j] = np.where(keep, index[a] * schedule.every, np.nan)
        if progress is not None:
            progress(
                f"cnn {name}: flatness at training loss {level:g} "
                f"({int(ok.sum())} of {ok.size} runs reach it)"
            )
    n_ckpt = losses.shape[2]
    dims = ("method", "seed", "checkpoint")
    data = {k: (dims, np.stack([records[m][k] for m in names])) for k in SCALARS}
    for k in ("cam_maps", "sal_maps"):
        data[k] = (dims + ("example", "row", "col"), np.stack([records[m][k] for m in names]))
    flat = ("method", "level", "seed")
    data["flat_trace"] = (flat, trace)
    data["flat_trace_se"] = (flat, trace_se)
    data["flat_top"] = (flat, top)
    data["flat_loss"] = (flat, flat_loss)
    data["flat_step"] = (flat, flat_step)
    data["method_rho"] = (("method",), np.array([plans[m].rho for m in names]))
    data["attr_images"] = (
        ("example", "row", "col"),
        np.asarray(task.attr_X[: schedule.n_maps, 0], np.float64),
    )
    data["attr_minor"] = (("example", "row", "col"), np.asarray(task.minor[: schedule.n_maps]))
    data["attr_major"] = (("example", "row", "col"), np.asarray(task.major[: schedule.n_maps]))
    ds = xr.Dataset(
        {k: (d, np.asarray(v, np.float64)) for k, (d, v) in data.items()},
        coords={
            "method": list(names),
            "level": list(levels),
            "seed": list(seeds),
            "checkpoint": np.arange(n_ckpt),
            "step": ("checkpoint", np.arange(n_ckpt) * schedule.every),
        },
    )
    ds.attrs.update(
        experiment=f"CNN on {name}",
        rho_max=rho_max,
        rho_capped=rho_capped,
        sigma0=sigma,
        sigma0_capped=sigma_capped,
        rho_bar=plans["ℓ2-SAM ρ̄"].rho,
        rho_best=plans["ℓ2-SAM best"].rho,
        sweep=list(sweep),
        init_scale=schedule.init_scale,
        params=P,
        lr=schedule.lr,
        batch=schedule.batch,
        steps=schedule.steps,
        width=schedule.width,
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


# --- CNNs from a small start: attention, and training on the minor feature alone ----------

SMALL_SCALARS = SCALARS[:6]  # the records of a small-start run (no LE-SAM radius or cap)


def minor_only(method: str) -> str:
    """The name of ``method`` trained on the minor feature alone."""
    return f"{method}, minor only"


def param_norms(kept) -> np.ndarray:
    r""":math:`\lVert\theta\rVert_2` over all parameters, per leading (seed, checkpoint) index
    of the kept parameters (float64)."""
    return np.sqrt(
        sum(
            np.sum(np.asarray(x, np.float64).reshape(*x.shape[:2], -1) ** 2, axis=2)
            for x in jax.tree.leaves(kept)
        )
    )


def run_small_start(name, task: Task, minor_task: Task, schedule: Schedule, seeds, *, radii,
                    judged, progress=None) -> xr.Dataset:  # fmt: skip
    r"""SGD and ℓ2-SAM at each radius of ``radii`` from the small start
    ``schedule.init_scale`` on ``task``; SGD and ℓ2-SAM at ``judged`` (one of ``radii``) also
    trained on ``minor_task``, the minor feature alone (:func:`minor_only` names). Dims
    (method, seed, checkpoint): the records of :data:`SMALL_SCALARS` and ``param_norm``,
    :math:`\lVert\theta\rVert_2` at each checkpoint (ρ/‖θ‖ follows from ``method_rho``)."""
    if judged not in radii:
        raise ValueError(f"`judged` must be one of `radii` {tuple(radii)}; got {judged!r}.")
    plans = {"SGD": (task, Method(SGD))}
    plans.update({sweep_name(r): (task, Method(L2, r)) for r in radii})
    plans[minor_only("SGD")] = (minor_task, Method(SGD))
    plans[minor_only(sweep_name(judged))] = (minor_task, Method(L2, judged))
    data = {k: [] for k in SMALL_SCALARS + ("param_norm",)}
    for method, (on, plan) in plans.items():
        recs, kept = train_seeds(seeds, on, schedule, plan)
        for k in SMALL_SCALARS:
            data[k].append(recs[k])
        data["param_norm"].append(param_norms(kept))
        if progress is not None:
            progress(
                f"cnn {name}, small start, {method}: test accuracy "
                f"{recs['test_acc'][:, -1].mean():.3f}"
            )
    n_ckpt = data["train_loss"][0].shape[1]
    dims = ("method", "seed", "checkpoint")
    ds = xr.Dataset(
        {k: (dims, np.asarray(np.stack(v), np.float64)) for k, v in data.items()},
        coords={
            "method": list(plans),
            "seed": list(seeds),
            "checkpoint": np.arange(n_ckpt),
            "step": ("checkpoint", np.arange(n_ckpt) * schedule.every),
        },
    )
    ds["method_rho"] = ("method", np.array([p.rho for _, p in plans.values()], np.float64))
    ds.attrs.update(
        experiment=f"CNN on {name} from a small start",
        radii=list(radii),
        judged=judged,
        init_scale=schedule.init_scale,
        params=_n_params(task, schedule),
        lr=schedule.lr,
        batch=schedule.batch,
        steps=schedule.steps,
        width=schedule.width,
        train_images=int(task.X.shape[0]),
        dtype="float32",
    )
    return ds
