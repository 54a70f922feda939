r"""The mechanism of minor first (claim C5) and the max-margin limit (claim C3), figures 8 and 9.

Both figures solve the rescaled single-example flow (docs/theory.md §4) on
:math:`\mu=(1,\dots,5)` (as the other figures) from a balanced uniform start.

* ``mechanism``: the log-growth rates :math:`d\log\lvert\beta_j\rvert/d\tau`
  (:meth:`analysis.Problem.rates`) of GD and ℓ2-SAM at :math:`L=2`, with the gradient norms the
  perturbation sees: :math:`\lVert\nabla\mathcal L\rVert` (:func:`analysis.sharpness`) and
  :math:`\lVert\nabla m\rVert=\lVert\nabla\mathcal L\rVert/\lvert\ell'(m)\rvert`
  (:func:`analysis.margin_gradient_norm`), the fastest-growing index
  (:func:`analysis.fastest_growing_index`) and :math:`j^\dagger` (:func:`analysis.dominant_index`,
  :func:`analysis.switch_times`).
* ``max_margin``: the cosine of :math:`\beta(\tau)` with the :math:`\ell_1` and :math:`\ell_2`
  max-margin directions (:func:`analysis.max_margin`, :func:`analysis.direction_cosine`) at
  :math:`L=2` and :math:`L=1`, and the fitted rates of :func:`analysis.convergence_rate`.

Indices are 0-based in the data and 1-based in the figures.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

import analysis
import flows

from ._catalog import SUMMARIES
from ._common import Context, FigureSpec, sequence_text
from ._maps import MU
from ._style import (
    FULL_WIDTH,
    METHOD_COLORS,
    METHOD_LABELS,
    REFERENCE,
    SMALL_SIZE,
    SWITCH,
    j_color,
    j_label,
    new_figure,
    panel_labels,
    plain_log_ticks,
)

DATA = flows.single_example(MU)
RHO = 1.0
TIGHT = dict(rtol=1e-10, atol=1e-30, collapse_tol=None, escape_tol=1e120)


def _methods():
    # GD is ℓ2-SAM with ρ = 0 (flows guarantees they agree exactly): one compiled solver
    # serves both.
    return {"GD": flows.L2SAM(0.0), "ℓ2-SAM": flows.L2SAM(RHO)}


# --- figure 8: the mechanism ------------------------------------------------------------------

# The start of the minor-first figure's non-monotone row (j†: 2 → 1 → 2 → 3 → 4 → 5), just
# above α_c ≈ 0.347: ‖∇m‖ first falls, and the minor coordinate 1 takes the lead.
ALPHA_MECH = 0.36
TAU_MECH = 11.0  # the last switch of j† is near τ = 8.9
GRAD_FLOOR = 1e-9  # ‖∇L‖ is below this once the fastest-growing index is the major one


def compute_mechanism(ctx: Context) -> dict:
    taus = np.linspace(0.0, TAU_MECH, ctx.pick(441, 111))
    data = {"taus": taus, "alpha": np.array(ALPHA_MECH), "rho": np.array(RHO), "mu": MU}
    theta0 = flows.balanced_init(ALPHA_MECH, 2, MU.size)
    for key, method in _methods().items():
        problem = analysis.Problem(
            method, DATA, theta0, TAU_MECH, rescaled=True, options=flows.SolverOptions(**TIGHT)
        )
        traj = problem.solve(ts=taus)
        reached = np.asarray(traj.reached)
        rates = np.array([problem.rates(th, t) for th, t in zip(traj.thetas, taus, strict=True)])
        sw = analysis.switch_times(traj)
        data[f"status/{key}"] = np.array(traj.status_name)
        data[f"rates/{key}"] = np.where(reached[:, None], rates, np.nan)
        data[f"margin_grad/{key}"] = analysis.margin_gradient_norm(traj, DATA)
        data[f"loss_grad/{key}"] = analysis.sharpness(traj, DATA).grad_norm
        data[f"loss/{key}"] = np.where(reached, traj.loss, np.nan)
        data[f"fastest/{key}"] = analysis.fastest_growing_index(traj, problem)
        data[f"dominant/{key}"] = analysis.dominant_index(traj)
        data[f"switch_t/{key}"], data[f"sequence/{key}"] = sw.times, np.array(sw.sequence)
    return data


def _index_strip(ax, taus, rows):
    """Rows of j-coloured bars over τ: each row's index (0-based) at every saved time."""
    d = MU.size
    for y, values in enumerate(rows):
        for j in range(d):
            on = values == j
            if not on.any():
                continue
            # the cells around the saved times where the index is j
            edges = np.concatenate([[taus[0]], (taus[1:] + taus[:-1]) / 2, [taus[-1]]])
            starts = np.flatnonzero(on & ~np.concatenate([[False], on[:-1]]))
            ends = np.flatnonzero(on & ~np.concatenate([on[1:], [False]]))
            ax.broken_barh(
                [(edges[a], edges[b + 1] - edges[a]) for a, b in zip(starts, ends, strict=True)],
                (y - 0.4, 0.8),
                color=j_color(j, d),
                lw=0,
            )
    ax.set(ylim=(len(rows) - 0.5, -0.5), xlim=(taus[0], taus[-1]))
    ax.set_yticks(range(len(rows)), labels=["fastest", r"$j^\dagger$"])
    ax.tick_params(axis="x", labelbottom=False)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)


def _switch_lines(ax, times) -> None:
    for t in times:
        ax.axvline(t, **SWITCH, zorder=0)


def draw_mechanism(data: dict):
    """GD (left) and ℓ2-SAM (right), one column each: the index strips and the rates; under
    ℓ2-SAM's rates its ‖∇m‖ (linear, with the levels ρ(μ_j + μ_{j+1}) where the fastest index
    moves up) and its ‖∇L‖ (log, with the level 10⁻⁹), all on one τ axis."""
    fig = new_figure(FULL_WIDTH, 4.9)
    grid = fig.add_gridspec(4, 2, height_ratios=[1, 4.2, 2.6, 2.6], width_ratios=[1, 1.25])
    taus = data["taus"]
    d = MU.size
    rho = float(data["rho"])
    rate_axes = []
    for col, key in enumerate(("GD", "ℓ2-SAM")):
        strip = fig.add_subplot(grid[0, col])
        ax = fig.add_subplot(grid[1, col], sharex=strip)
        _index_strip(strip, taus, [data[f"fastest/{key}"], data[f"dominant/{key}"]])
        sequence = sequence_text(data[f"sequence/{key}"])
        strip.set_title(rf"{METHOD_LABELS[key]}: $j^\dagger$ {sequence}")
        _switch_lines(ax, data[f"switch_t/{key}"])
        ax.axhline(0.0, color="0.3", lw=0.5, zorder=0)
        rates = data[f"rates/{key}"]
        for j in range(d):
            ax.plot(taus, rates[:, j], color=j_color(j, d), lw=1.2)
        ax.set(xlim=(taus[0], taus[-1]))
        ax.set_xticks(np.arange(0.0, taus[-1] + 1e-9, 2.0))
        rate_axes.append(ax)
    low, high = np.nanmin(data["rates/ℓ2-SAM"]), np.nanmax(data["rates/GD"])
    for ax in rate_axes:
        ax.set_ylim(low - 0.5, high + 1.5)
    rate_axes[0].set(ylabel=r"rate $d\log|\beta_j|/d\tau$", xlabel=r"rescaled time $\tau$")
    rate_axes[1].tick_params(axis="x", labelbottom=False)
    # ℓ2-SAM's gradient norms, each in a panel of its own under its rates
    color = METHOD_COLORS["ℓ2-SAM"]
    gm_ax = fig.add_subplot(grid[2, 1], sharex=rate_axes[1])
    gl_ax = fig.add_subplot(grid[3, 1], sharex=rate_axes[1])
    levels = rho * (MU[:-1] + MU[1:])
    for level in levels:
        gm_ax.axhline(level, **REFERENCE, zorder=1)
        gm_ax.text(taus[-1], level, f" {level:g}", ha="left", va="center", fontsize=SMALL_SIZE,
                   color=REFERENCE["color"], clip_on=False)  # fmt: skip
    _switch_lines(gm_ax, data["switch_t/ℓ2-SAM"])
    gm_ax.plot(taus, data["margin_grad/ℓ2-SAM"], color=color)
    gm_ax.set(ylim=(0, levels[-1] + 2), ylabel=r"$\|\nabla m\|$")
    gm_ax.tick_params(axis="x", labelbottom=False)
    grad = data["loss_grad/ℓ2-SAM"]
    gl_ax.axhline(GRAD_FLOOR, **REFERENCE, zorder=1)
    _switch_lines(gl_ax, data["switch_t/ℓ2-SAM"])
    gl_ax.plot(taus, np.where(grad > 0, grad, np.nan), color=color)
    gl_ax.set(yscale="log", ylim=(1e-12, 3.0), ylabel=r"$\|\nabla\mathcal{L}\|$",
              xlabel=r"rescaled time $\tau$")  # fmt: skip
    gl_ax.set_yticks([1e-12, 1e-9, 1e-6, 1e-3, 1])
    plain_log_ticks(gl_ax, "y")
    rate_axes[1].tick_params(axis="y", labelleft=False)
    panel_labels([*rate_axes, gm_ax, gl_ax])
    # the legend, in the free cell under GD's rates
    key_ax = fig.add_subplot(grid[2:, 0])
    key_ax.axis("off")
    handles = [Line2D([], [], color=j_color(j, d), lw=1.5, label=j_label(j)) for j in range(d)]
    handles += [
        Line2D([], [], color=color, label=rf"{METHOD_LABELS['ℓ2-SAM']}: gradient norm"),
        Line2D([], [], **REFERENCE, label=r"level: $\rho(\mu_j+\mu_{j+1})$; $10^{-9}$"),
        Line2D([], [], **SWITCH, label=r"switch of $j^\dagger$"),
    ]
    key_ax.legend(handles=handles, loc="center", handlelength=1.6)
    return fig


# --- figure 9: the max-margin limit ----------------------------------------------------------

ALPHA_MARGIN = 0.5  # sequential (α_c ≈ 0.347 < α < α_direct ≈ 0.858): j† 3 → 4 → 5
TAU_LONG = 20.0  # L = 2: searched for the first saved τ where 1 − cos falls below GAP_FLOOR
GAP_FLOOR = 1e-11  # 1 − cos is computed to about 1e-16: the fit stops well above that
TAU_L1 = (1e-2, 1e4)  # L = 1: the power law needs decades of τ


def _margin_run(method, depth, t1, taus):
    return flows.solve(
        method,
        DATA,
        flows.balanced_init(ALPHA_MARGIN, depth, MU.size),
        t1=t1,
        ts=taus,
        rescaled=True,
        **TIGHT,
    )


def compute_max_margin(ctx: Context) -> dict:
    l1, l2 = analysis.max_margin(DATA, 1), analysis.max_margin(DATA, 2)
    n = ctx.pick(401, 101)
    data = {"alpha": np.array(ALPHA_MARGIN), "rho": np.array(RHO), "mu": MU, "l1": l1, "l2": l2}
    data["gap_floor"] = np.array(GAP_FLOOR)
    for key, method in _methods().items():
        # L = 2 → the ℓ1 direction (C3), exponentially in τ: fitted down to GAP_FLOOR.
        first = _margin_run(method, 2, TAU_LONG, np.linspace(0.0, TAU_LONG, n))
        gap = 1.0 - analysis.direction_cosine(first, l1)
        below = np.flatnonzero(gap < GAP_FLOOR)
        t_end = float(first.ts[below[0]]) if below.size else TAU_LONG
        traj = _margin_run(method, 2, t_end, np.linspace(0.0, t_end, n))
        rate = analysis.convergence_rate(traj, l1, model="exp")
        data[f"taus/2/{key}"] = np.asarray(traj.ts)
        data[f"cos_l1/2/{key}"] = analysis.direction_cosine(traj, l1)
        data[f"rate/2/{key}"], data[f"prefactor/2/{key}"] = (
            np.array(rate.rate),
            np.array(rate.prefactor),
        )
        data[f"status/2/{key}"] = np.array(traj.status_name)
        # L = 1 → the ℓ2 direction (C1), as a power of τ.
        taus = np.concatenate([[0.0], np.geomspace(*TAU_L1, n - 1)])
        traj = _margin_run(method, 1, TAU_L1[1], taus)
        rate = analysis.convergence_rate(traj, l2, model="power")
        data[f"taus/1/{key}"] = taus
        data[f"cos_l1/1/{key}"] = analysis.direction_cosine(traj, l1)
        data[f"cos_l2/1/{key}"] = analysis.direction_cosine(traj, l2)
        data[f"rate/1/{key}"], data[f"prefactor/1/{key}"] = (
            np.array(rate.rate),
            np.array(rate.prefactor),
        )
        data[f"status/1/{key}"] = np.array(traj.status_name)
    return data


_DEPTH_MARKS = {2: dict(), 1: dict(marker="o", ms=2.5, mfc="none", mew=0.6)}


def draw_max_margin(data: dict):
    fig = new_figure(FULL_WIDTH, 2.5)
    ax, bx, cx = fig.subplots(1, 3)
    between = float(data["l1"] @ data["l2"])
    for key in ("GD", "ℓ2-SAM"):
        color = METHOD_COLORS[key]
        for depth in (2, 1):
            taus, cos = data[f"taus/{depth}/{key}"], data[f"cos_l1/{depth}/{key}"]
            keep = taus > 0
            every = max(1, keep.sum() // 12)
            ax.plot(taus[keep], cos[keep], color=color, markevery=every, **_DEPTH_MARKS[depth])
        taus = data[f"taus/2/{key}"]
        rate, c = float(data[f"rate/2/{key}"]), float(data[f"prefactor/2/{key}"])
        label = rf"{METHOD_LABELS[key]}: $\kappa={rate:.2f}$" + "\n" + rf"$C={c:.3g}$"
        bx.plot(taus, 1.0 - data[f"cos_l1/2/{key}"], color=color, label=label)
        # the fit (over the second half, analysis.convergence_rate's tail) drawn back to τ = 0,
        # where it meets the axis at its prefactor C
        bx.plot(taus, c * np.exp(-rate * taus), **{**REFERENCE, "color": color, "lw": 1.4})
        taus = data[f"taus/1/{key}"]
        rate = float(data[f"rate/1/{key}"])
        style = _DEPTH_MARKS[1] if key == "ℓ2-SAM" else dict()
        label = rf"{METHOD_LABELS[key]}: $\kappa={rate:.2f}$"
        every = max(1, taus.size // 12)
        cx.plot(taus[1:], 1.0 - data[f"cos_l2/1/{key}"][1:], color=color, markevery=every,
                label=label, **style)  # fmt: skip
        c = float(data[f"prefactor/1/{key}"])
        cx.plot(taus[1:], c * taus[1:] ** -rate, **{**REFERENCE, "color": color, "lw": 1.4})
    ax.axhline(between, **REFERENCE)
    ax.text(3e2, between + 0.02, r"$\langle\hat\beta_1,\hat\beta_2\rangle$", ha="center",
            va="bottom")  # fmt: skip
    ax.set(xscale="log", ylim=(0, 1.04), xlabel=r"rescaled time $\tau$",
           ylabel=r"$\cos\angle(\beta,\hat\beta_1)$")  # fmt: skip
    ax.set_title(r"to the $\ell_1$ max margin")
    plain_log_ticks(ax, "x")
    bx.set(yscale="log", xlabel=r"rescaled time $\tau$",
           ylabel=r"$1-\cos\angle(\beta,\hat\beta_1)$")  # fmt: skip
    bx.set_title(r"$L=2$: $\propto e^{-\kappa\tau}$")
    cx.set(xscale="log", yscale="log", xlabel=r"rescaled time $\tau$",
           ylabel=r"$1-\cos\angle(\beta,\hat\beta_2)$")  # fmt: skip
    cx.set_title(r"$L=1$: $\propto\tau^{-\kappa}$")
    bx.set_ylim(top=60.0)  # room for ℓ2-SAM's C = 16.6 at τ = 0
    bx.set_ylim(bottom=1e-19)  # room for the legend under the curves
    bx.legend(loc="lower left", handlelength=1.2, labelspacing=0.5)
    cx.set_ylim(1e-15, 1.0)  # room for the legend under the curve
    cx.legend(loc="lower left", handlelength=1.4)
    panel_labels([ax, bx, cx])
    handles = [
        Line2D([], [], color=METHOD_COLORS[k], lw=1.1, label=METHOD_LABELS[k])
        for k in ("GD", "ℓ2-SAM")
    ]
    handles += [
        Line2D([], [], color="0.3", label="$L=2$"),
        Line2D([], [], color="0.3", **_DEPTH_MARKS[1], label="$L=1$"),
        Line2D([], [], **{**REFERENCE, "lw": 1.4}, label="fit, (b) and (c)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=5)
    return fig


MECHANISM = FigureSpec("mechanism", SUMMARIES["mechanism"], compute_mechanism, draw_mechanism)
MAX_MARGIN = FigureSpec("max_margin", SUMMARIES["max_margin"], compute_max_margin, draw_max_margin)
