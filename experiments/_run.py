"""One run of every experiment: train, save netCDF, draw the figures, write the results page."""

import json
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import xarray as xr

from figures.internal import check_folder, folder_path

from ._cnn import Schedule, calibrate_sigma, pilot_sigma, sgd_grad_norms
from ._cnnrun import run_cnn, run_small_start
from ._diagonal import DiagonalConfig, long_config, run_diagonal
from ._figures import (
    diagonal_figure,
    flatness_figure,
    maps_figure,
    regime_figure,
    shares_figure,
    small_figure,
)
from ._regime_map import RegimeMapConfig, run_regime_map
from ._report import write_page
from ._tasks import digits_task, patches_task


class Plan(NamedTuple):
    """Sizes of a run: the diagonal-network settings, the CNN tasks' sizes and schedules,
    the seeds and the curvature estimators' effort."""

    diagonal: DiagonalConfig
    regime: RegimeMapConfig
    patches: dict
    digits: dict
    patches_schedule: Schedule
    digits_schedule: Schedule
    seeds: tuple
    probes: int
    iterations: int
    flat_images: int
    patches_levels: tuple
    digits_levels: tuple
    # CNNs from a small start (the theory's regime): the schedules (init_scale 0.2), SGD and
    # ℓ2-SAM at the radii `small_radii` on full images; SGD and ℓ2-SAM at `small_judged` also
    # trained on the minor feature alone; seeds `small_seeds`
    patches_small: Schedule = None
    digits_small: Schedule = None
    small_seeds: tuple = (0, 1, 2, 3, 4, 5)
    small_radii: tuple = (0.01, 0.05)
    small_judged: float = 0.05
    # LE-SAM in its own regime: ρ_max = 1 and σ₀ from pilot runs (seed `pilot_seed`, not an
    # evaluation seed): the SGD rule (experiments._cnn.pilot_sigma: the cap would bind on a share
    # `pilot_quantile` of a pilot SGD run's steps) gives the upper end of a bisection on a pilot
    # LE-SAM run, for the largest σ₀ at which the cap binds on at most that share of its steps
    # (experiments._cnn.calibrate_sigma). "LE-SAM capped" keeps the earlier setting σ₀ = 0.35/3 (the
    # public ResNet σ = 0.35 scaled by 1/3), ρ_max = 0.1: the cap binds on most steps.
    rho_max: float = 1.0
    pilot_seed: int = 1000
    pilot_quantile: float = 0.1
    sigma_capped: float = 0.35 / 3
    rho_capped: float = 0.1
    sweep: tuple = (0.05, 0.1, 0.2)  # ℓ2-SAM radii (default start)


FULL = Plan(
    diagonal=DiagonalConfig(),
    regime=RegimeMapConfig(),
    patches={"n_train": 512, "n_test": 512, "n_attr": 64},
    digits={"n_attr": 64},
    patches_schedule=Schedule(steps=500, every=25, batch=64, lr=0.1),
    digits_schedule=Schedule(steps=600, every=30, batch=64, lr=0.1),
    seeds=(0, 1, 2, 3, 4),
    probes=16,
    iterations=15,
    flat_images=128,
    patches_levels=(0.1, 0.03),
    digits_levels=(0.3, 0.1),
    patches_small=Schedule(steps=500, every=25, batch=64, lr=0.1, init_scale=0.2),
    digits_small=Schedule(steps=450, every=30, batch=64, lr=0.1, init_scale=0.2),
)
QUICK = Plan(
    diagonal=DiagonalConfig(
        depths=(1, 2),
        alphas=(0.05, 0.05),
        steps=1000,
        every=50,
        seeds=(0, 1),
        long_steps=2000,
        long_every=100,
        long_depths=(2,),
    ),
    regime=RegimeMapConfig(
        pairs=((4, 9), (3, 8)),
        depths=(1, 2),
        alphas=(0.05, 0.05),
        ratios=(0.1, 0.5),
        steps=500,
        every=50,
    ),
    patches={"n_train": 64, "n_test": 32, "n_attr": 4},
    digits={"n_attr": 4, "n_train": 64, "test_fraction": 0.05},
    patches_schedule=Schedule(steps=20, every=10, batch=16, lr=0.1),
    digits_schedule=Schedule(steps=20, every=10, batch=16, lr=0.1),
    seeds=(0, 1),
    probes=4,
    iterations=4,
    flat_images=32,
    patches_levels=(0.7, 0.6),
    digits_levels=(2.2, 2.0),
    patches_small=Schedule(steps=20, every=10, batch=16, lr=0.1, init_scale=0.2),
    digits_small=Schedule(steps=20, every=10, batch=16, lr=0.1, init_scale=0.2),
    small_seeds=(0, 1),
    sweep=(0.1, 0.4),
)


LEVELS = (0.5, 0.1, 0.01)  # the diagonal networks' loss levels on the page


def diagonal_summary(diag, long) -> xr.Dataset:
    """The diagonal networks' numbers the page reports, per (method, depth, seed): the
    low-intensity share at the first saved step with loss at or below each of :data:`LEVELS`
    (:func:`experiments._report.at_loss`) and the final cosines; for the long runs (``long_``
    variables) the share and j†'s intensity quantile at loss 0.5 and at the end, and the final
    loss."""
    from ._report import at_loss

    out = xr.Dataset(
        {
            "low_share_at": (
                ("level", "method", "depth", "seed"),
                np.stack([at_loss(diag, "low_share", lv) for lv in LEVELS]),
            ),
            "cos_l1_end": (("method", "depth", "seed"), diag.cos_l1.values[..., -1]),
            "cos_l2_end": (("method", "depth", "seed"), diag.cos_l2.values[..., -1]),
        },
        coords={
            "level": list(LEVELS),
            "method": diag.method.values,
            "depth": diag.depth.values,
            "seed": diag.seed.values,
        },  # fmt: skip
    )
    dims = ("long_method", "long_depth", "seed")
    out = out.assign_coords(long_method=long.method.values, long_depth=long.depth.values)
    out["long_share_at"] = (dims, at_loss(long, "low_share", 0.5))
    out["long_share_end"] = (dims, long.low_share.values[..., -1])
    out["long_rank_at"] = (dims, at_loss(long, "dominant_rank", 0.5))
    out["long_rank_end"] = (dims, long.dominant_rank.values[..., -1])
    out["long_loss_end"] = (dims, long.loss.values[..., -1])
    out.attrs.update(diag.attrs)
    out.attrs.update(steps=int(diag.step.values[-1]), long_steps=int(long.step.values[-1]))
    return out


def save_published(docs, diag, long, rm, cnn, small):
    """Keep the small results beside the docs, for the tests of the page's numbers:
    ``docs``/figures/data/experiments_{diagonal,patches,digits,small_patches,small_digits,
    regime_map}.nc (the diagonal networks' reported numbers, :func:`diagonal_summary`; the CNN
    records without the attribution maps; the regime map's measured and theory columns)."""
    data = Path(docs) / "figures" / "data"
    data.mkdir(parents=True, exist_ok=True)
    diagonal_summary(diag, long).to_netcdf(data / "experiments_diagonal.nc")
    for name, ds in cnn.items():
        ds.drop_vars(["cam_maps", "sal_maps"]).to_netcdf(data / f"experiments_{name}.nc")
    for name, ds in small.items():
        ds.to_netcdf(data / f"experiments_small_{name}.nc")
    rm[["measured", "theory", "major", "pixels"]].to_netcdf(data / "experiments_regime_map.nc")


def run(out, quick: bool = False, docs=None, progress=print):
    """Run every experiment; write ``out``/{diagonal, diagonal_long, regime_map, cnn_patches,
    cnn_digits, cnn_small_patches, cnn_small_digits}.nc, the figures (``out``/figures) and
    ``out``/experiments.md. With ``docs``, the figures go to ``docs``/figures/experiments and
    the page to ``docs``/experiments.md instead (and the page reads the measured spread between
    two runs from ``docs``/figures/data/experiments_spread.json where it exists). Returns the
    claims with their outcomes (:class:`experiments._report.Claim`; a quick run
    judges none)."""
    start = time.perf_counter()
    plan = QUICK if quick else FULL
    out = check_folder("`out`", folder_path("`out`", out), create=True)
    if docs is not None:
        docs = check_folder("`docs`", folder_path("`docs`", docs), create=True)

    def say(message):
        progress(f"[{time.perf_counter() - start:6.1f} s] {message}")

    say("diagonal networks on digits (flows.iterate)")
    diag = run_diagonal(plan.diagonal, progress=say)
    diag.to_netcdf(out / "diagonal.nc")
    say("diagonal networks, GD and ℓ2-SAM over the long horizon")
    long = run_diagonal(long_config(plan.diagonal), progress=say, methods=("GD", "ℓ2-SAM"))
    long.to_netcdf(out / "diagonal_long.nc")
    say("regime map on digit pairs")
    rm = run_regime_map(plan.regime, progress=say)
    rm.to_netcdf(out / "regime_map.nc")
    cnn, small = {}, {}
    for name, make, sizes, schedule, small_schedule, levels in (
        ("patches", patches_task, plan.patches, plan.patches_schedule, plan.patches_small,
         plan.patches_levels),
        ("digits", digits_task, plan.digits, plan.digits_schedule, plan.digits_small,
         plan.digits_levels),
    ):  # fmt: skip
        task = make(**sizes)
        norms = sgd_grad_norms(plan.pilot_seed, task, schedule)
        sigma_sgd = pilot_sigma(norms, plan.rho_max, plan.pilot_quantile)
        sigma, pilot_share = calibrate_sigma(plan.pilot_seed, task, schedule, plan.rho_max,
                                             plan.pilot_quantile, upper=sigma_sgd)  # fmt: skip
        say(
            f"CNNs on {name}: LE-SAM's σ₀ = {sigma:.4g} from the pilot runs (SGD's rule: "
            f"{sigma_sgd:.4g}; the cap binds on {pilot_share:.3f} of the LE-SAM pilot's steps)"
        )
        cnn[name] = run_cnn(
            name,
            task,
            schedule,
            plan.seeds,
            rho_max=plan.rho_max,
            rho_capped=plan.rho_capped,
            sigma=sigma,
            sigma_capped=plan.sigma_capped,
            sweep=plan.sweep,
            levels=levels,
            probes=plan.probes,
            iterations=plan.iterations,
            flat_images=plan.flat_images,
            progress=say,
        )
        cnn[name].attrs.update(pilot_seed=plan.pilot_seed, pilot_quantile=plan.pilot_quantile,
                               sigma0_sgd_rule=sigma_sgd, pilot_share=pilot_share)  # fmt: skip
        cnn[name].to_netcdf(out / f"cnn_{name}.nc")
        say(f"CNNs on {name} from a small start (init scale {small_schedule.init_scale:g})")
        small[name] = run_small_start(
            name,
            task,
            make(**sizes, minor_only=True),
            small_schedule,
            plan.small_seeds,
            radii=plan.small_radii,
            judged=plan.small_judged,
            progress=say,
        )
        small[name].to_netcdf(out / f"cnn_small_{name}.nc")
    command = "python -m experiments" + (" --quick" if quick else "")
    command += f" --docs {docs}" if docs is not None else ""
    seconds = time.perf_counter() - start
    (out / "run.json").write_text(json.dumps({"seconds": seconds, "command": command}) + "\n")
    say("figures and the page")
    claims, written = publish(out, docs, quick=quick)
    say(f"wrote {written[0]} and {len(written) - 1} figure files")
    return claims


def publish(out, docs=None, quick: bool = False):
    """Draw the figures and write the page from a run's saved results in ``out`` (its netCDF
    files and ``run.json``: the run's seconds and command), as :func:`run` does; with ``docs``
    also the small published results (:func:`save_published`). Returns the claims and the
    paths written (the page first)."""
    out = check_folder("`out`", folder_path("`out`", out), create=False)
    load = lambda name: xr.load_dataset(out / f"{name}.nc")  # noqa: E731
    diag, long, rm = load("diagonal"), load("diagonal_long"), load("regime_map")
    cnn = {name: load(f"cnn_{name}") for name in ("patches", "digits")}
    small = {name: load(f"cnn_small_{name}") for name in ("patches", "digits")}
    meta = json.loads((out / "run.json").read_text())
    page_dir = Path(docs) if docs is not None else out
    fig_dir = page_dir / "figures" / "experiments" if docs is not None else out / "figures"
    figures = (
        diagonal_figure(diag, long, fig_dir)
        + regime_figure(rm, fig_dir)
        + shares_figure(cnn, fig_dir)
        + maps_figure(cnn, fig_dir)
        + flatness_figure(cnn, fig_dir)
        + small_figure(small, fig_dir)
    )
    spread = None
    if docs is not None:
        save_published(docs, diag, long, rm, cnn, small)
        saved = Path(docs) / "figures" / "data" / "experiments_spread.json"
        spread = json.loads(saved.read_text()) if saved.exists() else None
    page = page_dir / "experiments.md"
    claims = write_page(
        page,
        diag,
        long,
        rm,
        cnn,
        small,
        [p.relative_to(page_dir) for p in figures],
        meta["seconds"],
        meta["command"],
        quick=quick,
        spread=spread,
    )
    return claims, [page, *figures]
