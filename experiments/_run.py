"""One run of every experiment: train, save netCDF, draw the figures, write the results page."""

import time
from pathlib import Path
from typing import NamedTuple

from figures.internal import check_folder, folder_path

from ._cnn import Schedule
from ._cnnrun import run_cnn
from ._diagonal import DiagonalConfig, long_config, run_diagonal
from ._figures import (
    diagonal_figure,
    flatness_figure,
    maps_figure,
    regime_figure,
    shares_figure,
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
    # LE-SAM: σ₀ = 0.35/3 (the public ResNet σ = 0.35 scaled by 1/3 for these small networks).
    # In its own regime the cap ρ_max = 1 binds only where ‖g‖ > σ_t (rarely: the logged
    # `capped` share); "LE-SAM capped" keeps the earlier cap 0.1, which binds whenever
    # ‖g‖ < 1.17 σ_t/σ₀, i.e. on most steps.
    sigma: float = 0.35 / 3
    rho_max: float = 1.0
    rho_capped: float = 0.1
    rho_linf: float = 0.1  # ℓ∞-SAM at the ℓ2 length of ℓ2-SAM(0.1)
    sweep: tuple = (0.05, 0.1, 0.2, 0.4)  # ℓ2-SAM radii


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
    sweep=(0.1, 0.4),
)


def save_published(docs, rm, cnn):
    """Keep the small results beside the docs, for the tests of the page's numbers:
    ``docs``/figures/data/experiments_{patches,digits,regime_map}.nc (the CNN records without
    the attribution maps; the regime map's measured and theory columns)."""
    data = Path(docs) / "figures" / "data"
    data.mkdir(parents=True, exist_ok=True)
    for name, ds in cnn.items():
        ds.drop_vars(["cam_maps", "sal_maps"]).to_netcdf(data / f"experiments_{name}.nc")
    rm[["measured", "theory", "major", "pixels"]].to_netcdf(data / "experiments_regime_map.nc")


def run(out, quick: bool = False, docs=None, progress=print):
    """Run every experiment; write ``out``/{diagonal, diagonal_long, regime_map, cnn_patches,
    cnn_digits}.nc, the figures (``out``/figures) and ``out``/experiments.md. With ``docs``,
    the figures go to
    ``docs``/figures/experiments and the page to ``docs``/experiments.md instead.
    Returns the claims with their outcomes (:class:`experiments._report.Claim`; a quick run
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
    cnn = {}
    for name, task, schedule, levels in (
        ("patches", patches_task(**plan.patches), plan.patches_schedule, plan.patches_levels),
        ("digits", digits_task(**plan.digits), plan.digits_schedule, plan.digits_levels),
    ):
        say(f"CNNs on {name}")
        cnn[name] = run_cnn(
            name,
            task,
            schedule,
            plan.seeds,
            rho_max=plan.rho_max,
            rho_capped=plan.rho_capped,
            rho_linf=plan.rho_linf,
            sigma=plan.sigma,
            sweep=plan.sweep,
            levels=levels,
            probes=plan.probes,
            iterations=plan.iterations,
            flat_images=plan.flat_images,
            progress=say,
        )
        cnn[name].to_netcdf(out / f"cnn_{name}.nc")
    page_dir = Path(docs) if docs is not None else out
    fig_dir = page_dir / "figures" / "experiments" if docs is not None else out / "figures"
    say("figures")
    figures = (
        diagonal_figure(diag, long, fig_dir)
        + regime_figure(rm, fig_dir)
        + shares_figure(cnn, fig_dir)
        + maps_figure(cnn, fig_dir)
        + flatness_figure(cnn, fig_dir)
    )
    if docs is not None:
        save_published(docs, rm, cnn)
    page = page_dir / "experiments.md"
    command = "python -m experiments" + (" --quick" if quick else "")
    command += f" --docs {docs}" if docs is not None else ""
    claims = write_page(
        page,
        diag,
        long,
        rm,
        cnn,
        [p.relative_to(page_dir) for p in figures],
        time.perf_counter() - start,
        command,
        quick=quick,
    )
    say(f"wrote {page} and {len(figures)} figure files")
    return claims
