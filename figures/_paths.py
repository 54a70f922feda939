r"""Trajectories, ℓ∞-SAM limit maps and discrete-against-flow figures (figures 3, 4, 5).

Figure 3 solves the plain flow :math:`\dot\theta=-\nabla\mathcal L(\hat\theta)` (logistic
loss) of ℓ2-SAM on :math:`\mu=(1,\dots,5)` from :math:`\alpha` approaching
:math:`\alpha_c` (:func:`analysis.critical_alpha`), with :func:`analysis.switch_times` for
:math:`j^\dagger`. Figure 4 is :func:`analysis.limit_map` of exact ℓ∞-SAM over
:math:`(\alpha_1,\alpha_2)` on :math:`\mu=(1,2)` at :math:`L=2,3,4`, against claim C2's
:func:`analysis.limit_leader`, with the tie curve :func:`analysis.linf_tie` (and GD's, the same
at :math:`\rho=0`). Figure 5 compares :func:`flows.iterate` with :func:`flows.solve` on
:math:`\mu=(1,2)`. ℓ∞-SAM is the exact-sign Filippov flow of :mod:`flows` throughout.
Indices are 0-based in the data and 1-based in the figures.
"""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

import analysis
import flows

from ._catalog import SUMMARIES
from ._common import Context, FigureSpec, sequence_text
from ._style import (
    ALPHA_C_LINE,
    ALPHA_MARKERS,
    FONT_SIZE,
    FULL_WIDTH,
    METHOD_COLORS,
    METHOD_LABELS,
    REFERENCE,
    REGIME_FILLS,
    SMALL_SIZE,
    SWITCH,
    VARIANT,
    cell_edges,
    class_cmap,
    draw_classes,
    fill_handle,
    j_color,
    j_label,
    new_figure,
    panel_labels,
    plain_log_ticks,
)

MU2 = np.array([1.0, 2.0])
DATA2 = flows.single_example(MU2)


def _methods(rho):
    # GD is ℓ2-SAM with ρ = 0 (flows guarantees they agree exactly): one compiled solver
    # serves both, which halves the compilation time of these figures.
    return {"GD": flows.L2SAM(0.0), "ℓ2-SAM": flows.L2SAM(rho), "ℓ∞-SAM": flows.LinfSAM(rho)}


# --- figure 3: trajectories --------------------------------------------------------------

MU5 = np.arange(1.0, 6.0)
DATA5 = flows.single_example(MU5)
RHO_TRAJ = 1.0
# α / α_c of the ℓ2-SAM runs: approaching the collapse boundary from above (all sequential).
ALPHA_RATIOS = (2.0, 1.1, 1.01, 1.001)
SOLVE_TIGHT = dict(rtol=1e-10, atol=1e-30)  # atol far below every weight: see regime_path
TAU_TRAJ = 80.0  # rescaled τ of the runs (the last switch at 1.001 α_c is near τ = 46)
LOSS_LOW = 1e-3  # panel (f): the time at which the loss falls to this level
LOSS_FALL = 1e-1  # panel (d): the margin while the loss falls from this to LOSS_LOW
GAP_FIT = 1e-2  # panel (f): the logarithmic laws are fitted to α/α_c − 1 up to this


def _solve_rescaled(method, alpha, taus, **options):
    """The rescaled flow of figure 3 from w^(l)(0) = α (balanced), to τ = TAU_TRAJ."""
    return flows.solve(
        method,
        DATA5,
        flows.balanced_init(alpha, 2, MU5.size),
        t1=TAU_TRAJ,
        ts=taus,
        rescaled=True,
        collapse_tol=None,
        **SOLVE_TIGHT,
        **options,
    )


def _loss_low_time(method, alpha) -> float:
    """The τ at which the loss falls to LOSS_LOW (an event of the solve), NaN if not by TAU_TRAJ;
    0 if it starts there."""
    drop = _solve_rescaled(method, alpha, np.array([0.0, TAU_TRAJ]), loss_tol=LOSS_LOW)
    return float(drop.t_end) if drop.status_name == "converged" else np.nan


def _alpha_c(ctx: Context) -> float:
    """α_c of ℓ2-SAM (ρ = RHO_TRAJ, L = 2, μ = MU5) by :func:`analysis.critical_alpha`."""
    k = analysis.l2sam_thresholds(MU5, RHO_TRAJ)  # α_c lies strictly between k[0] and k[1]
    ctx.log("critical_alpha")
    return analysis.critical_alpha(
        flows.L2SAM(RHO_TRAJ),
        MU5,
        2,
        bracket=(k[0], k[1]),
        bracket_rtol=ctx.pick(1e-8, 1e-4),
        points=ctx.pick(9, 5),
    )


def compute_trajectories(ctx: Context) -> dict:
    taus = np.concatenate([[0.0], np.geomspace(1e-2, TAU_TRAJ, ctx.pick(600, 150))])
    data = {"taus": taus, "rho": np.array(RHO_TRAJ), "ratios": np.array(ALPHA_RATIOS)}
    data["alpha_c"] = np.array(alpha_c := _alpha_c(ctx))
    # The rescaled clock τ = ∫ -ℓ' dt: the same path as the plain flow, whose later switches
    # come only after the loss has fallen, at t ~ e^τ (out of reach of a plain solve).
    runs = [(f"l2/{i}", flows.L2SAM(RHO_TRAJ), r * alpha_c) for i, r in enumerate(ALPHA_RATIOS)]
    runs.append(("gd", flows.L2SAM(0.0), ALPHA_RATIOS[-1] * alpha_c))  # GD from the smallest α
    for key, method, alpha in runs:
        traj = _solve_rescaled(method, alpha, taus, dense=True, escape_tol=1e120)
        sw = analysis.switch_times(traj)
        data[f"alpha/{key}"] = np.array(alpha)
        data[f"beta/{key}"] = np.where(np.asarray(traj.reached)[:, None], traj.beta, np.nan)
        data[f"loss/{key}"] = np.where(traj.reached, traj.loss, np.nan)
        data[f"status/{key}"] = np.array(traj.status_name)
        data[f"switch_t/{key}"], data[f"sequence/{key}"] = sw.times, np.array(sw.sequence)
        data[f"tau_low/{key}"] = np.array(_loss_low_time(method, alpha))
    # (f): over α / α_c - 1, the τ at which the loss falls to LOSS_LOW (an event of the solve)
    # and the τ of the last switch of j† (to the major coordinate).
    gaps = np.geomspace(1e-4, 0.3, ctx.pick(9, 3))  # at 2 α_c the loss starts below 1e-3
    data["gaps"], low, last = gaps, [], []
    for gap in gaps:
        alpha = (1 + gap) * alpha_c
        low.append(_loss_low_time(flows.L2SAM(RHO_TRAJ), alpha))
        traj = _solve_rescaled(flows.L2SAM(RHO_TRAJ), alpha, taus, dense=True, escape_tol=1e120)
        sw = analysis.switch_times(traj)
        last.append(float(sw.times[-1]) if sw.final == MU5.size - 1 and sw.times.size else np.nan)
    data["tau_low"], data["tau_last"] = np.array(low), np.array(last)
    near = gaps <= GAP_FIT
    for key in ("tau_low", "tau_last"):  # τ ≈ offset + per_decade · log10(α/α_c − 1)
        data[f"law/{key}"] = np.array(analysis.log_law(gaps[near], data[key][near]))
    return data


def _ratio_styles(ratios) -> dict:
    """Open markers of each α/α_c (figures._style.ALPHA_MARKERS) on a solid line: nearest α_c
    first."""
    order = np.argsort(ratios)
    return {int(i): dict(VARIANT, marker=ALPHA_MARKERS[k]) for k, i in enumerate(order)}


def margin_while_falling(data: dict, i: int):
    """Run ``l2/i`` at the saved τ where its loss falls from :data:`LOSS_FALL` to
    :data:`LOSS_LOW`: (loss, μ_1β_1/m, (d log m/dτ)/(d log β_1/dτ)), m = Σ_j μ_jβ_j the margin
    and the rates by central differences on the saved τ (docs/theory.md §16: d log m/dτ is the
    coordinates' rates weighted by their shares of m)."""
    taus, beta, loss = data["taus"], data[f"beta/l2/{i}"], data[f"loss/l2/{i}"]
    margin = beta @ MU5
    rate = np.gradient(np.log(margin), taus) / np.gradient(np.log(beta[:, 0]), taus)
    fall = (loss <= LOSS_FALL) & (loss >= LOSS_LOW)
    return loss[fall], (MU5[0] * beta[:, 0] / margin)[fall], rate[fall]


def draw_trajectories(data: dict):
    fig = new_figure(FULL_WIDTH, 4.3)
    axes = fig.subplots(2, 3)
    flat = axes.ravel()
    taus = data["taus"]
    xlim = (5e-2, taus[-1])
    d = MU5.size
    order = (3, 1, 0)  # panels (a)–(c): α closest to α_c first (1.01 α_c is drawn in (d), (e))
    for ax, i in zip(flat[:3], order, strict=True):
        key = f"l2/{i}"
        beta = data[f"beta/{key}"]
        beta = beta / np.max(np.abs(beta), axis=1, keepdims=True)  # no overflow in the norm
        share = beta / np.linalg.norm(beta, axis=1, keepdims=True)
        for t in data[f"switch_t/{key}"]:
            ax.axvline(t, **SWITCH, zorder=0)
        for j in range(d):
            ax.plot(taus, share[:, j], color=j_color(j, d), lw=1.2)
        ratio = float(data["ratios"][i])
        sequence = sequence_text(data[f"sequence/{key}"])
        ax.set_title(rf"$\alpha={ratio:g}\,\alpha_c$" + "\n" + rf"$j^\dagger$: {sequence}")
        ax.set(xscale="log", xlim=xlim, ylim=(0, 1.05), xlabel=r"rescaled time $\tau$")
        plain_log_ticks(ax, "x")
    axes[0, 0].set_ylabel(r"$\beta_j/\|\beta\|_2$")
    styles = _ratio_styles(data["ratios"])
    l2, gd = METHOD_COLORS["ℓ2-SAM"], METHOD_COLORS["GD"]
    # (d): while the loss falls from LOSS_FALL to LOSS_LOW, near α_c: coordinate 1's share of
    # the margin (top) and the margin's rate over β_1's (bottom), against the loss.
    spec = flat[3].get_subplotspec()
    flat[3].remove()
    share_ax, rate_ax = (fig.add_subplot(s) for s in spec.subgridspec(2, 1, hspace=0.15))
    near = [i for i in np.argsort(data["ratios"])[:2]]  # 1.001 and 1.01 α_c
    for i in near:
        loss, share, rate = margin_while_falling(data, int(i))
        share_ax.plot(loss, share, color=l2, **styles[int(i)])
        rate_ax.plot(loss, rate, color=l2, **styles[int(i)])
    share_ax.axhline(0.99, **REFERENCE)
    for level in (0.99, 1.01):
        rate_ax.axhline(level, **REFERENCE)
    share_ax.set(ylim=(0.98, 1.002), ylabel=r"share $\mu_1\beta_1/m$")
    rate_ax.set(ylim=(0.98, 1.02), xlabel=r"loss $\mathcal{L}$",
                ylabel=r"rate: $m$ / $\beta_1$")  # fmt: skip
    share_ax.set_title(r"margin $m$ and $j=1$", pad=2)
    for ax in (share_ax, rate_ax):
        ax.set(xscale="log", xlim=(LOSS_FALL, LOSS_LOW))
        plain_log_ticks(ax, "x")
    share_ax.tick_params(labelbottom=False)
    # (e): the losses, ℓ2-SAM in its colour with one marker per α, GD in its colour.
    ax = flat[4]
    for i in sorted(styles, key=lambda i: data["ratios"][i]):
        ratio = float(data["ratios"][i])
        ax.plot(taus, data[f"loss/l2/{i}"], color=l2, **styles[i], label=rf"${ratio:g}\,\alpha_c$")
    nearest = int(np.argmin(data["ratios"]))
    ratio = float(data["ratios"][nearest])
    label = rf"GD, ${ratio:g}\,\alpha_c$"
    ax.plot(taus, data["loss/gd"], color=gd, **styles[nearest], label=label)
    ax.set(xscale="log", yscale="log", xlim=xlim, ylabel=r"loss $\mathcal{L}$")
    ax.set(xlabel=r"rescaled time $\tau$")
    ax.set_ylim(1e-6, 1.0)
    plain_log_ticks(ax, "x")
    ax.set_title(rf"loss, {METHOD_LABELS['ℓ2-SAM']} and GD")
    # (f): over α/α_c − 1 (log), when j† reaches the major (top) and when the loss falls to
    # LOSS_LOW (bottom), each on a linear τ axis with its fitted logarithmic law.
    spec = flat[5].get_subplotspec()
    flat[5].remove()
    top, bottom = (fig.add_subplot(s) for s in spec.subgridspec(2, 1, hspace=0.15))
    gaps = data["gaps"]
    low = f"loss falls to {LOSS_LOW:g}"  # plain text: 7 pt (no scripts)
    for ax, key, text in ((top, "tau_last", "j† reaches 5"), (bottom, "tau_low", low)):
        ax.plot(gaps, data[key], "o", color="k", ms=2.5, zorder=3)
        per_decade, offset = (float(v) for v in data[f"law/{key}"])
        fit = gaps[gaps <= GAP_FIT]
        ax.plot(fit, offset + per_decade * np.log10(fit), color="k", lw=0.9)
        ax.set_title(f"{text}:\n{-per_decade:#.3g} per decade", fontsize=SMALL_SIZE, pad=2)
        ax.set(xscale="log", ylim=(0, 1.45 * np.nanmax(data[key])), ylabel=r"$\tau$")
        for ratio in data["ratios"]:
            if gaps[0] <= ratio - 1 <= gaps[-1]:  # the runs of (a), (b) and of 1.01 α_c
                ax.axvline(ratio - 1, **SWITCH, zorder=0)
    for ratio in data["ratios"]:  # each dotted line's α/α_c, atop (f)
        if gaps[0] <= ratio - 1 <= gaps[-1]:
            top.text(
                ratio - 1, 0.97, f"{ratio:g}", transform=top.get_xaxis_transform(),
                ha="center", va="top", fontsize=SMALL_SIZE, color="0.4",
            )  # fmt: skip
    top.tick_params(labelbottom=False)
    top.sharex(bottom)
    bottom.set_xlabel(r"$\alpha/\alpha_c-1$")
    panel_labels([*flat[:3], share_ax, flat[4], top], y=1.2)
    coords = [Line2D([], [], color=j_color(j, d), lw=1.5, label=j_label(j)) for j in range(d)]
    coords.append(Line2D([], [], **SWITCH, label=r"switch of $j^\dagger$"))
    fig.legend(handles=coords, loc="outside upper center", ncols=6)
    fig.legend(
        *flat[4].get_legend_handles_labels(),
        loc="outside lower center",
        ncols=5,
        handlelength=2.4,
        title=rf"(d), (e): {METHOD_LABELS['ℓ2-SAM']} and GD from $\alpha=$",
    )
    return fig


# --- figure 4: ℓ∞-SAM limit map over (α1, α2) ----------------------------------------------

RHO_LIMIT = 1.0
DEPTHS_LIMIT = (2, 3, 4)
# Classes drawn (display order): the run's end as analysis decides it.
LIMIT_CODES = ("collapse", "stalled", "minor", "major", "undetermined")
LIMIT_COLORS = {  # the fills of the regimes of these names (undetermined: hatched)
    "collapse": REGIME_FILLS["collapse"],
    "stalled": REGIME_FILLS["stalled"],
    "minor": REGIME_FILLS["minor"],
    "major": REGIME_FILLS["direct"],
    "undetermined": REGIME_FILLS["undetermined"],
}
LIMIT_NAMES = {
    "collapse": r"$\beta\to0$ (collapse)",
    "stalled": r"stalled ($w_j\uparrow\rho$)",
    "minor": r"$\beta/\|\beta\|\to e_1$ (minor wins)",
    "major": r"$\beta/\|\beta\|\to e_2$ (major)",
    "undetermined": "undetermined",
}


def limit_classes(code, leader) -> np.ndarray:
    """Index into LIMIT_CODES of each run: its regime, or the coordinate it escapes along."""
    out = np.full(np.shape(code), LIMIT_CODES.index("undetermined"))
    out[code == analysis.REGIMES.index("collapse")] = LIMIT_CODES.index("collapse")
    out[code == analysis.REGIMES.index("stalled")] = LIMIT_CODES.index("stalled")
    out[leader == 0] = LIMIT_CODES.index("minor")
    out[leader == 1] = LIMIT_CODES.index("major")
    return out


def _dying_first(points):
    """Sweep order: the runs with a coordinate below ρ (a Filippov sliding) cost the most."""
    return -np.sum(points["alpha"] < RHO_LIMIT, axis=1)


def compute_linf_limits(ctx: Context) -> dict:
    # A step that puts no grid point on α_j = ρ or on the tie lines of slope 1/2 and 1/√2.
    alphas = np.linspace(0.05, 3.0, ctx.pick(30, 6))
    data = {"alpha": alphas, "rho": np.array(RHO_LIMIT), "depths": np.array(DEPTHS_LIMIT)}
    for L in DEPTHS_LIMIT:
        ctx.log(f"limit map, L = {L}")
        m = analysis.limit_map(
            flows.LinfSAM(RHO_LIMIT),
            MU2,
            (alphas, alphas),
            depth=L,
            cache_dir=ctx.sweeps,
            progress=ctx.sweep_bars,
            executor=ctx.executor,
            order=_dying_first,
        )
        data[f"code/{L}"], data[f"leader/{L}"] = m.code, m.leader
        data[f"class/{L}"] = limit_classes(m.code, m.leader)
        # claim C2's limit at every start (analysis.limit_leader; -1: no coordinate escapes)
        predicted = [
            [analysis.limit_leader(flows.LinfSAM(RHO_LIMIT), MU2, [a1, a2], L) for a2 in alphas]
            for a1 in alphas
        ]
        data[f"c2_leader/{L}"] = np.array(
            [[-1 if k is None else k for k in row] for row in predicted]
        )
        if L >= 3:  # the tie curve of ℓ∞-SAM, and GD's: ℓ∞-SAM at ρ = 0 is GD exactly
            above = np.linspace(RHO_LIMIT, alphas[-1], 50)[1:]
            data[f"tie_a1/{L}"] = above
            data[f"tie_a2/{L}"] = analysis.linf_tie(flows.LinfSAM(RHO_LIMIT), MU2, above, L)
            data[f"gd_a2/{L}"] = analysis.linf_tie(flows.LinfSAM(0.0), MU2, alphas, L)
    return data


def draw_linf_limits(data: dict):
    fig = new_figure(FULL_WIDTH, 2.75)
    depths = [int(L) for L in data["depths"]]
    axes = fig.subplots(1, len(depths), sharey=True)
    fills = [LIMIT_COLORS[c] for c in LIMIT_CODES]
    cmap, norm = class_cmap(fills)
    undetermined = LIMIT_CODES.index("undetermined")
    a, rho = data["alpha"], float(data["rho"])
    edges = cell_edges(a, log=False)  # the cells of "nearest" shading
    # the tie lines: solid (computed curves), in the colour of their method
    present = set()
    linf = dict(color=METHOD_COLORS["ℓ∞-SAM"], lw=1.3)
    gd = dict(color=METHOD_COLORS["GD"], lw=1.0)
    for ax, L in zip(axes, depths, strict=True):
        cls = data[f"class/{L}"]
        present |= set(np.unique(cls).tolist())
        draw_classes(ax, edges, edges, cls.T, cmap, norm, hatched=(undetermined,))
        ax.axvline(rho, **{**REFERENCE, "color": "k"})
        ax.axhline(rho, **{**REFERENCE, "color": "k"})
        # a start whose end differs from claim C2's (analysis.limit_leader) would be crossed
        off = np.argwhere(data[f"leader/{L}"] != data[f"c2_leader/{L}"])
        ax.plot(a[off[:, 0]], a[off[:, 1]], "x", color="k", ms=3, mew=0.8)
        if f"tie_a1/{L}" in data:
            ax.plot(data[f"tie_a1/{L}"], data[f"tie_a2/{L}"], **linf)
            ax.plot(a, data[f"gd_a2/{L}"], **gd)
        else:  # L = 2: GD's weights are α_j e^{μ_j t}, so the major coordinate always wins
            note = "GD: " + r"$\to e_2$" + "\nfrom every start"
            ax.text(0.96, 0.75, note, transform=ax.transAxes, ha="right", va="top")
        ax.set(
            xlim=(a[0], a[-1]),
            ylim=(a[0], a[-1]),
            aspect="equal",
            xlabel=r"$\alpha_1$ (minor, $\mu_1=1$)",
            title=f"$L={L}$",
        )
    axes[0].set_ylabel(r"$\alpha_2$ (major, $\mu_2=2$)")
    ticks = [0.5, 1, 1.5, 2, 2.5, 3]
    for ax in axes:
        ax.set_xticks(ticks, labels=[f"{t:g}" for t in ticks])
        ax.set_yticks(ticks, labels=[f"{t:g}" for t in ticks])
    panel_labels(axes)
    handles = [
        fill_handle(fills[k], LIMIT_NAMES[c]) for k, c in enumerate(LIMIT_CODES) if k in present
    ]
    handles += [
        Line2D([], [], **{**REFERENCE, "color": "k"}, label=r"$\alpha_j=\rho$"),
        Line2D(
            [],
            [],
            **linf,
            label=METHOD_LABELS["ℓ∞-SAM"]
            + r": $\mu_1(\alpha_1-\rho)^{L-2}=\mu_2(\alpha_2-\rho)^{L-2}$",
        ),
        Line2D([], [], **gd, label=r"GD: $\mu_1\alpha_1^{L-2}=\mu_2\alpha_2^{L-2}$"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return fig


# --- figure 5: discrete against flow -------------------------------------------------------

ALPHA_DISC, RHO_DISC, T_DISC = 0.35, 0.5, 20.0
ALPHA_SLIDE = (0.35, 0.6)  # ℓ∞-SAM: α_1 < ρ < α_2, coordinate 1 dies and is held at 0 by sliding
N_SAVED = 40  # iterates and flow compared at t = k T / N_SAVED
LRS_SHOWN = (0.5, 0.125, 0.03125)
# (key, label, method name, α): the cases of the error panel
DISC_CASES = (
    ("GD", "GD", "GD", ALPHA_DISC),
    ("ℓ2-SAM", r"$\ell_2$-SAM", "ℓ2-SAM", ALPHA_DISC),
    ("ℓ∞-SAM", r"$\ell_\infty$ both die", "ℓ∞-SAM", ALPHA_DISC),
    ("ℓ∞-SAM-slide", r"$\ell_\infty$ $w_1$ slides", "ℓ∞-SAM", ALPHA_SLIDE),
)
CASE_STYLE = {  # the method's colour; the two ℓ∞-SAM starts by marker
    "GD": dict(color=METHOD_COLORS["GD"], marker="o", ls="-"),
    "ℓ2-SAM": dict(color=METHOD_COLORS["ℓ2-SAM"], marker="s", ls="-"),
    "ℓ∞-SAM": dict(color=METHOD_COLORS["ℓ∞-SAM"], marker="^", ls="-"),
    "ℓ∞-SAM-slide": dict(color=METHOD_COLORS["ℓ∞-SAM"], marker="v", ls="-"),
}
ETA_MARKERS = ("o", "s", "^")  # the iterates of (a), (b), one marker per η of LRS_SHOWN
TIGHT = dict(rtol=1e-11, atol=1e-13, collapse_tol=None)
FINE = 10  # flow points per comparison interval


def compute_discrete(ctx: Context) -> dict:
    # η = 2^-k, so that T / η is a multiple of N_SAVED and every run is saved at the same times;
    # the quick run keeps every other k, down to 2^-9 (where an ℓ∞ iterate has landed exactly
    # on w_1 = 0: docs/theory.md §3).
    lrs = 2.0 ** -np.arange(1, 11, ctx.pick(1, 2))
    data = {"lrs": lrs, "alpha": np.array(ALPHA_DISC), "rho": np.array(RHO_DISC)}
    data["alpha_slide"], data["T"] = np.array(ALPHA_SLIDE), np.array(T_DISC)
    # One flow solve per case, on the fine grid drawn in (a), (b); the iterates are compared at
    # every FINE-th point of it (t = k T / N_SAVED).
    fine = np.linspace(0.0, T_DISC, N_SAVED * FINE + 1)
    methods = _methods(RHO_DISC)
    for key, _, name, alpha in DISC_CASES:
        theta0 = flows.balanced_init(np.asarray(alpha), 2, 2)
        flow = flows.solve(methods[name], DATA2, theta0, t1=T_DISC, ts=fine, **TIGHT)
        ref = np.asarray(flow.thetas)[::FINE]
        data[f"flow_t/{key}"], data[f"flow_w/{key}"] = fine, np.asarray(flow.thetas[:, 0])
        errors = []
        for lr in lrs:
            steps = round(T_DISC / lr)
            it = flows.iterate(
                methods[name], DATA2, theta0, lr=float(lr), steps=steps, every=steps // N_SAVED
            )
            errors.append(float(np.max(np.abs(np.asarray(it.thetas) - ref))))
            if lr in LRS_SHOWN:
                data[f"iter_t/{key}/{lr}"] = np.asarray(it.ts)
                data[f"iter_w/{key}/{lr}"] = np.asarray(it.thetas[:, 0])
        data[f"error/{key}"] = errors = np.array(errors)
        data[f"slope/{key}"] = np.array(analysis.convergence_order(lrs, errors))
        data[f"status/{key}"] = np.array(flow.status_name)
    return data


CHATTER_FROM, CHATTER_SCALE = 4.5, 0.02  # the inset of (b): w_1 from t = 4.5 on, on ±0.02


def _chatter_inset(ax, data, key):
    """An inset of ``ax``: the iterates of w_1 from t = CHATTER_FROM on, on a ±CHATTER_SCALE
    scale, over the flow's w_1 (held at 0 by sliding)."""
    inset = ax.inset_axes([0.36, 0.37, 0.42, 0.27])
    t, w = data[f"flow_t/{key}"], data[f"flow_w/{key}"][:, 0]
    late = t >= CHATTER_FROM
    inset.plot(t[late], w[late], color=j_color(0, 2), lw=1.0)
    for m, lr in zip(ETA_MARKERS, LRS_SHOWN, strict=True):
        if f"iter_t/{key}/{lr}" not in data:
            continue
        ti, wi = data[f"iter_t/{key}/{lr}"], data[f"iter_w/{key}/{lr}"][:, 0]
        on = ti >= CHATTER_FROM
        inset.plot(ti[on], wi[on], m, ms=2.2, mfc="none", mew=0.5, color=j_color(0, 2))
    inset.set_ylim(-CHATTER_SCALE, CHATTER_SCALE)
    inset.set_yticks([-CHATTER_SCALE, 0, CHATTER_SCALE])
    inset.tick_params(labelsize=SMALL_SIZE, labelbottom=False, labelleft=False, labelright=True)
    inset.set_title(r"$w_1$, $t\geq$" + f"{CHATTER_FROM:g}", fontsize=FONT_SIZE, pad=1)


def _iterates_panel(ax, data, key, title, note, y=0.3):
    """Flow w_j^{(1)}(t) (lines) and the iterates at LRS_SHOWN (markers), in the j colours."""
    for j in range(2):
        ax.plot(data[f"flow_t/{key}"], data[f"flow_w/{key}"][:, j], color=j_color(j, 2), lw=1.2)
    for m, lr in zip(ETA_MARKERS, LRS_SHOWN, strict=True):
        if f"iter_t/{key}/{lr}" not in data:
            continue
        t, w = data[f"iter_t/{key}/{lr}"], data[f"iter_w/{key}/{lr}"]
        for j in range(2):
            ax.plot(t, w[:, j], m, ms=2.6, mfc="none", mew=0.6, color=j_color(j, 2))
    ax.set(xlabel=r"time $t=k\eta$", title=title)
    ax.text(0.97, y, note, transform=ax.transAxes, ha="right", va="center")


def _iterates_handles(data):
    """Legend of (a), (b): the coordinates' colours, and the markers of the iterates per η."""
    handles = [
        Line2D([], [], color=j_color(j, 2), lw=1.2, label=f"flow, {j_label(j)}") for j in range(2)
    ]
    handles += [
        Line2D(
            [], [], ls="", marker=m, ms=3, mfc="none", mew=0.7, color="0.3", label=rf"$\eta={lr:g}$"
        )
        for m, lr in zip(ETA_MARKERS, LRS_SHOWN, strict=True)
        if f"iter_t/ℓ2-SAM/{lr}" in data
    ]
    return handles


def draw_discrete(data: dict):
    fig = new_figure(FULL_WIDTH, 2.6)
    left, right = fig.subfigures(1, 2, width_ratios=[1.6, 1.4])
    ax, bx = left.subplots(1, 2)
    cx = right.subplots()
    a = float(data["alpha"])
    a1, a2 = (float(x) for x in data["alpha_slide"])
    _iterates_panel(ax, data, "ℓ2-SAM", METHOD_LABELS["ℓ2-SAM"], rf"$\alpha={a:g}$")
    ax.set(ylabel=r"weight $w_j^{(1)}$")
    note = rf"$\alpha=({a1:g},\,{a2:g})$" + "\n" + r"$w_1$ slides at 0"
    _iterates_panel(bx, data, "ℓ∞-SAM-slide", METHOD_LABELS["ℓ∞-SAM"], note, y=0.2)
    _chatter_inset(bx, data, "ℓ∞-SAM-slide")
    left.legend(handles=_iterates_handles(data), loc="outside lower center", ncols=3)
    lrs = data["lrs"]
    lowest = np.inf
    for key, label, _, _ in DISC_CASES:
        err = data[f"error/{key}"]
        ok = np.isfinite(err) & (err > 0)
        lowest = min(lowest, np.min(err[ok] / lrs[ok]))
        slope = f"{float(data[f'slope/{key}']):.2f}"
        cx.plot(lrs[ok], err[ok], ms=3, lw=0.9, **CASE_STYLE[key], label=f"{label} {slope}")
    guide = 0.25 * lowest * lrs  # order 1, a factor 4 below every data point
    T = float(data["T"])
    step = T / N_SAVED  # the comparison times
    cx.plot(lrs, guide, **REFERENCE, label=r"$\propto\eta$")
    cx.set(
        xscale="log",
        yscale="log",
        xlabel=r"step size $\eta$",
        ylabel=r"error $\max_k\|\theta_k-\theta(k\eta)\|_\infty$",
        title=rf"at $k\eta=0,{step:g},\dots,{T:g}$",
    )
    plain_log_ticks(cx, "x")
    handles, labels = cx.get_legend_handles_labels()
    first = [0, 1, 4, 2, 3]  # two columns: GD, ℓ2-SAM, the guide; then the two ℓ∞-SAM starts
    right.legend(
        [handles[k] for k in first],
        [labels[k] for k in first],
        loc="outside lower center",
        ncols=2,
        handlelength=1.6,
        handletextpad=0.3,
        columnspacing=0.6,
        title="fitted slope",
    )
    panel_labels([ax, bx, cx])
    return fig


TRAJECTORIES = FigureSpec(
    "trajectories",
    SUMMARIES["trajectories"],
    compute_trajectories,
    draw_trajectories,
)
LINF_LIMITS = FigureSpec(
    "linf_limits",
    SUMMARIES["linf_limits"],
    compute_linf_limits,
    draw_linf_limits,
)
# --- figure: minor first under finite steps -------------------------------------------------

T_STEPS = 60.0  # the real time t = kη at which j† of the iterates is read
# α/α_c: both sides of the flow's boundary, no grid point on it; the quick grid (every 5th) is
# part of the full one
STEP_RATIOS = (0.905, 1.305)
N_STEP_SAVED = 120  # iterates saved per run: every 0.5 in t, every step at η = 0.5


def steps_collapsed(loss) -> np.ndarray:
    """A run (last axis: saved times) collapsed by t = T: its loss ended above its start (ℓ2-SAM
    collapses to β = 0, where the loss is ℓ(0) = log 2; an escape drives it to 0)."""
    loss = np.asarray(loss)
    return loss[..., -1] > loss[..., 0]


def compute_steps(ctx: Context) -> dict:
    alpha_c = _alpha_c(ctx)
    ratios = np.linspace(*STEP_RATIOS, ctx.pick(41, 9))
    lrs = 2.0 ** -np.arange(1, ctx.pick(9, 5))  # T / η saves every N_STEP_SAVED-th iterate
    method = flows.L2SAM(RHO_TRAJ)
    jdag = np.full((lrs.size + 1, ratios.size), -1)
    loss = np.full((lrs.size + 1, ratios.size, N_STEP_SAVED + 1), np.nan)
    first = np.full((lrs.size + 1, ratios.size), -1)
    ts = np.linspace(0.0, T_STEPS, N_STEP_SAVED + 1)
    for i, r in enumerate(ratios):
        theta0 = flows.balanced_init(r * alpha_c, 2, MU5.size)
        ctx.log(f"α/α_c = {r:.3f}: the flow and {lrs.size} step sizes")
        # row 0: the plain flow (η → 0), saved at the iterates' times
        flow = flows.solve(method, DATA5, theta0, t1=T_STEPS, ts=ts, **SOLVE_TIGHT)
        runs = [flow] + [
            flows.iterate(method, DATA5, theta0, lr=float(lr), steps=round(T_STEPS / lr),
                          every=round(T_STEPS / lr) // N_STEP_SAVED)
            for lr in lrs
        ]  # fmt: skip
        for k, run in enumerate(runs):
            reached = np.asarray(run.reached)
            j = analysis.dominant_index(run)
            loss[k, i, reached] = np.asarray(run.loss)[reached]
            # the flow may stop early by collapsing: its last reached state stands for t = T
            jdag[k, i] = -2 if run.status_name == "collapsed" else j[reached][-1]
            first[k, i] = j[1]  # j† after the first saved step: where the run starts
    collapsed = steps_collapsed(np.where(np.isnan(loss), np.log(2.0), loss))
    jdag = np.where(collapsed, -2, jdag)
    return {
        "alpha_c": np.array(alpha_c),
        "ratios": ratios,
        "lrs": lrs,
        "t": np.array(T_STEPS),
        "ts": ts,
        "jdag": jdag,  # (flow + lrs, ratios): j† at t = T (0-based), -2 collapsed
        "first": first,
        "loss": loss,
    }


def draw_steps(data: dict):
    from ._style import index_cmap

    fig = new_figure(FULL_WIDTH, 2.6)
    ax = fig.subplots()
    lrs, ratios = data["lrs"], data["ratios"]
    d = MU5.size
    cmap, norm = index_cmap(d)
    columns = np.arange(lrs.size + 2) - 0.5  # column 0: the flow; then η from small to large
    order = [0, *range(lrs.size, 0, -1)]
    draw_classes(ax, columns, cell_edges(ratios, log=False), data["jdag"][order].T, cmap, norm)
    ax.axvline(0.5, color="w", lw=2.0, gid=None)  # the flow column apart from the iterates
    ax.axhline(1.0, **ALPHA_C_LINE)
    labels = ["flow"] + [rf"$2^{{-{int(round(-np.log2(x)))}}}$" for x in lrs[::-1]]
    ax.set_xticks(range(lrs.size + 1), labels)
    ax.set(xlabel=r"step size $\eta$ (the flow: $\eta\to0$)", ylabel=r"$\alpha/\alpha_c$",
           title=rf"{METHOD_LABELS['ℓ2-SAM']} ($\rho=1$, $L=2$): $j^\dagger$ at $t=k\eta="
           rf"{float(data['t']):g}$")  # fmt: skip
    present = set(np.unique(data["jdag"]).tolist())
    names = {0: " (minor)", d - 1: " (major)"}
    handles = [
        fill_handle(cmap(k + 2), f"$j^\\dagger={k + 1}$" + names.get(k, ""))
        for k in range(d) if k in present
    ]  # fmt: skip
    if -2 in present:
        handles.append(fill_handle(cmap(0), "collapsed (loss above its start)"))
    handles.append(Line2D([], [], **ALPHA_C_LINE, label=r"$\alpha_c$ of the flow"))
    fig.legend(handles=handles, loc="outside right center")
    return fig


STEPS = FigureSpec("steps", SUMMARIES["steps"], compute_steps, draw_steps)
DISCRETE = FigureSpec(
    "discrete",
    SUMMARIES["discrete"],
    compute_discrete,
    draw_discrete,
)
