r"""Regime maps and "minor first, major last" maps of ℓ2-SAM and LE-SAM (figures 1, 2, 6, 7).

All runs are the rescaled single-example flow (science.md §3) on
:math:`\mu=(1,2,3,4,5)` from the balanced uniform start :math:`w^{(l)}(0)=\alpha`. The
regime maps are :func:`analysis.phase_diagram` grids (the regimes, their codes and the rule that
decides them are defined once, in :mod:`analysis`); the α–τ maps read :math:`j^\dagger` on a
saving grid through :func:`flows.sweep`.

``collapse_tol`` is ``1e-3`` rather than flows' default ``1e-6``: a collapse to
:math:`10^{-3}\lVert\theta_0\rVert` is already certain for these runs at :math:`L=2` (every
coordinate shrinks once :math:`\lVert\mu\odot w\rVert<\rho\mu_1/\sqrt2`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import analysis
import flows

from ._common import (
    OKABE_ITO,
    REGIME_COLORS,
    REGIME_NAMES,
    Context,
    FigureSpec,
    index_cmap,
    new_figure,
    regime_cmap,
    sweep,
)

MU = np.arange(1.0, 6.0)
DATA = flows.single_example(MU)
COLLAPSE_TOL = 1e-3
RHO_MAX = 1.0  # LE-SAM's cap, equal to the ℓ2-SAM radius it is compared with
# α–τ maps: a linear τ grid, runs continued far past the usual escape so that the
# last switch is seen (L = 2 grows exponentially in τ; L ≥ 3 blows up in finite τ).
TAU_MIN = 1e-3
TAU_MAX = {2: 20.0, 3: 20.0, 4: 100.0}
ESCAPE_PATH = {2: 1e60, 3: 1e6, 4: 1e6}


def _method(kind, s):
    return flows.L2SAM(s) if kind == "l2" else flows.LESAM(s, RHO_MAX)


def _phase(ctx, method, **axes):
    """An :func:`analysis.phase_diagram` of the figures' μ, cached with the figures' sweeps."""
    return analysis.phase_diagram(
        method,
        MU,
        **axes,
        collapse_tol=COLLAPSE_TOL,
        cache_dir=ctx.sweeps,
        progress=ctx.progress,
        order=cost_order,
    )


def path_point(alpha, s, depth=2, kind="l2", n_tau=300):
    """One α–τ map row: j†(τ) on n_tau log-spaced τ in [TAU_MIN, TAU_MAX]; -2 after a collapse."""
    ts = jnp.asarray(tau_grid(depth, n_tau))
    traj = flows.solve(
        _method(kind, s),
        DATA,
        flows.balanced_init(alpha, depth, MU.size),
        t1=TAU_MAX[depth],
        ts=ts,
        rescaled=True,
        collapse_tol=COLLAPSE_TOL,
        escape_tol=ESCAPE_PATH[depth],
    )
    j = jnp.argmax(analysis.log_abs_beta(traj.thetas), axis=-1)
    stopped = jnp.where(traj.status == flows.Status.COLLAPSED, -2, -1)
    return {
        "status": traj.status.astype(jnp.int8),
        "t_end": traj.t_end,
        "jdag": jnp.where(traj.reached, j, stopped).astype(jnp.int8),
    }


def tau_grid(depth, n_tau):
    """The τ grid of :func:`path_point` (log-spaced: early switches are fast)."""
    return np.geomspace(TAU_MIN, TAU_MAX[depth], n_tau)


def cost_order(points):
    """Sweep order: by scale invariance the cost depends on α/ρ (or α/σ) only."""
    scale = next(points[k] for k in ("s", "rho", "sigma") if k in points)
    return np.log(points["alpha"] / scale)


def _boundaries(method_of, s_values, depth, quick):
    """critical_alpha and direct_alpha at each s (NaN where analysis raises; skipped if quick)."""
    if quick:  # each boundary compiles its own vmapped solver: too slow for a smoke run
        return np.full(len(s_values), np.nan), np.full(len(s_values), np.nan)
    kw = dict(rtol=1e-6, collapse_tol=COLLAPSE_TOL)
    crit, direct = [], []
    for s in s_values:
        for out, fn in ((crit, analysis.critical_alpha), (direct, analysis.direct_alpha)):
            try:
                out.append(fn(method_of(s), MU, depth, **kw))
            except RuntimeError:
                out.append(np.nan)
    return np.array(crit), np.array(direct)


# --- figure 1: the regime map over (α, ρ) ---------------------------------------------


def compute_regime_map(ctx: Context) -> dict:
    n = ctx.pick(128, 16)
    alphas, rhos = np.geomspace(1e-2, 1.0, n), np.geomspace(1e-2, 1.0, n)
    ds = _phase(ctx, flows.L2SAM(1.0), alpha=alphas, rho=rhos)
    rho_b = np.geomspace(0.04, 0.64, ctx.pick(3, 1))
    ctx.log("critical_alpha / direct_alpha")
    crit, direct = _boundaries(flows.L2SAM, rho_b, 2, ctx.quick)
    bounds = np.array([analysis.l2sam_thresholds(MU, float(r_)) for r_ in rhos])  # (n, 3)
    return dict(
        alpha=alphas,
        rho=rhos,
        regime=ds["code"].values,
        rho_b=rho_b,
        crit=crit,
        direct=direct,
        bounds=bounds,
    )


def _regime_legend(ax, present, extra=()):
    handles = [
        Patch(facecolor=REGIME_COLORS[k], edgecolor="0.3", label=REGIME_NAMES[k])
        for k in range(4)
        if k in present
    ]
    ax.legend(
        handles=[*handles, *extra], loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False
    )


def _pcolor_classes(ax, x, y, cls):
    cmap, norm = regime_cmap()
    return ax.pcolormesh(x, y, cls, cmap=cmap, norm=norm, shading="nearest", rasterized=True)


def draw_regime_map(data: dict):
    fig = new_figure(5.5, 3.2)
    ax = fig.add_subplot()
    rho, alpha = data["rho"], data["alpha"]
    _pcolor_classes(ax, rho, alpha, data["regime"])
    b = data["bounds"]
    ax.plot(rho, b[:, 0], "--", color="k", lw=1)
    ax.plot(rho, b[:, 1], ":", color="k", lw=1.2)
    ax.plot(rho, b[:, 2], "-", color=OKABE_ITO["vermillion"], lw=1)
    ok = np.isfinite(data["crit"])
    ax.plot(data["rho_b"][ok], data["crit"][ok], "o", mfc="w", mec="k", ms=5)
    ok = np.isfinite(data["direct"])
    ax.plot(data["rho_b"][ok], data["direct"][ok], "s", mfc="w", mec=OKABE_ITO["vermillion"], ms=5)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel=r"SAM radius $\rho$",
        ylabel=r"initialisation scale $\alpha$",
        xlim=(rho[0], rho[-1]),
        ylim=(alpha[0], alpha[-1]),
        title=r"$\ell_2$-SAM, $L=2$, $\mu=(1,\dots,5)$: regimes of the rescaled flow",
    )
    extra = [
        Line2D([], [], ls="--", color="k", label=r"sympy: all shrink ($\alpha\leq$, collapse)"),
        Line2D([], [], ls=":", color="k", label=r"sympy: all grow ($\alpha\geq$, escape)"),
        Line2D(
            [], [], color=OKABE_ITO["vermillion"], label=r"sympy: $\alpha_{\rm direct}$ (exact)"
        ),
        Line2D([], [], ls="", marker="o", mfc="w", mec="k", label=r"critical_alpha $\alpha_c$"),
        Line2D(
            [], [], ls="", marker="s", mfc="w", mec=OKABE_ITO["vermillion"], label="direct_alpha"
        ),
    ]
    _regime_legend(ax, set(np.unique(data["regime"]).tolist()), extra)
    return fig


# --- figures 2, 6, 7: α–τ maps coloured by j†(τ) ----------------------------------------


def _path_sweep(ctx, alphas, s, depths, kind):
    n_tau = ctx.pick(300, 60)
    fn = path_point if n_tau == 300 else _quick_path_point
    return sweep(
        ctx,
        fn,
        {"alpha": alphas, "s": [s]},
        static={"depth": list(depths), "kind": [kind]},
        order=cost_order,
    )


def _quick_path_point(alpha, s, depth=2, kind="l2"):
    """:func:`path_point` on a coarse τ grid (the quick figures)."""
    return path_point(alpha, s, depth, kind, n_tau=60)


def _switch_marks(method, alphas, depth):
    """Switch times of analysis.regime_path at a few α (NaN-padded rows) and their j† after."""
    alphas = np.asarray(alphas, dtype=float)
    times = np.full((alphas.size, 8), np.nan)
    after = np.full((alphas.size, 8), -1)
    for i, a in enumerate(alphas):
        try:
            p = analysis.regime_path(method, MU, float(a), depth, collapse_tol=COLLAPSE_TOL)
        except Exception:  # noqa: BLE001 - a failed reference run is left out of the overlay
            continue
        k = min(len(p.times), len(p.sequence) - 1, 8)
        times[i, :k] = p.times[:k]
        after[i, :k] = p.sequence[1 : k + 1]
    return times, after


def compute_minor_first(ctx: Context) -> dict:
    alphas = np.geomspace(0.2, 1.5, ctx.pick(256, 24))
    r = _path_sweep(ctx, alphas, 1.0, [2], "l2")
    marks = np.array(ctx.pick([0.36, 0.42, 0.5, 0.6, 0.7, 0.8, 0.85], []))
    ctx.log("switch times (analysis.regime_path) and boundaries")
    times, after = _switch_marks(flows.L2SAM(1.0), marks, 2)
    crit, direct = _boundaries(flows.L2SAM, [1.0], 2, ctx.quick)
    bounds = np.array(analysis.l2sam_thresholds(MU, 1.0))
    return dict(
        alpha=alphas,
        tau=tau_grid(2, r["jdag"].shape[-1]),
        jdag=r["jdag"][0, 0, :, 0],
        marks=marks,
        switch_times=times,
        switch_after=after,
        crit=crit[0],
        direct=direct[0],
        bounds=bounds,
    )


def _index_map(ax, tau, alpha, jdag, d=MU.size):
    cmap, norm = index_cmap(d)
    return ax.pcolormesh(tau, alpha, jdag, cmap=cmap, norm=norm, shading="nearest", rasterized=True)


def _index_legend(fig, d=MU.size, white="run ended (escape)", extra=()):
    """The j† colour legend (and ``extra`` handles), outside the axes at the figure's right."""
    cmap, _ = index_cmap(d)
    handles = [
        Patch(facecolor=cmap(k + 2), edgecolor="0.3", label=f"$j^\\dagger={k + 1}$")
        for k in range(d)
    ]
    handles += [
        Patch(facecolor=cmap(0), edgecolor="0.3", label="collapsed"),
        Patch(facecolor=cmap(1), edgecolor="0.3", label=white),
    ]
    fig.legend(handles=[*extra, *handles], loc="outside right center", frameon=False)


def draw_minor_first(data: dict):
    fig = new_figure(5.5, 3.2)
    ax = fig.add_subplot()
    _index_map(ax, data["tau"], data["alpha"], data["jdag"])
    cmap, _ = index_cmap(MU.size)
    for a, ts, js in zip(data["marks"], data["switch_times"], data["switch_after"], strict=True):
        ok = np.isfinite(ts)
        ax.scatter(
            ts[ok],
            np.full(ok.sum(), a),
            c=[cmap(j + 2) for j in js[ok]],
            marker="o",
            s=28,
            edgecolors="k",
            linewidths=0.8,
            zorder=3,
        )
    b = data["bounds"]
    for y, style, label in (
        (float(data["crit"]), "-", r"$\alpha_c$ (critical_alpha)"),
        (b[2], "--", r"$\alpha_{\rm direct}$ (sympy, exact)"),
        (b[1], ":", r"all grow (sympy bound)"),
    ):
        if np.isfinite(y):
            ax.axhline(y, color="k", ls=style, lw=1, label=label)
    ax.set(
        yscale="log",
        xlabel=r"rescaled time $\tau$",
        ylabel=r"initialisation scale $\alpha$ ($\rho=1$)",
        xscale="log",
        xlim=(data["tau"][0], data["tau"][-1]),
        ylim=(data["alpha"][0], data["alpha"][-1]),
        title=r"Minor first, major last: $j^\dagger(\tau)$ of $\ell_2$-SAM, $L=2$, "
        r"$\mu=(1,\dots,5)$",
    )
    lines, _ = ax.get_legend_handles_labels()
    dot = Line2D(
        [], [], ls="", marker="o", mfc="w", mec="k", label="switch times\n(analysis.regime_path)"
    )
    _index_legend(fig, extra=[*lines, dot])
    return fig


def compute_depth(ctx: Context) -> dict:
    alphas = np.geomspace(0.1, 3.0, ctx.pick(192, 20))
    depths = [2, 3, 4]
    r = _path_sweep(ctx, alphas, 1.0, depths, "l2")
    ctx.log("critical_alpha per depth")
    crit = [_boundaries(flows.L2SAM, [1.0], L, ctx.quick)[0][0] for L in depths]
    jd = r["jdag"][:, 0, :, 0]  # (depth, alpha, tau)
    return dict(
        alpha=alphas,
        depths=np.array(depths),
        jdag=jd,
        crit=np.array(crit),
        status=r["status"][:, 0, :, 0],
        tau_max=np.array([TAU_MAX[L] for L in depths]),
    )


def draw_depth(data: dict):
    depths = data["depths"]
    fig = new_figure(5.5, 2.2)
    axes = fig.subplots(1, len(depths), sharey=True)
    for k, (ax, L) in enumerate(zip(axes, depths, strict=True)):
        jd = data["jdag"][k]
        tau = np.geomspace(TAU_MIN, data["tau_max"][k], jd.shape[-1])
        _index_map(ax, tau, data["alpha"], jd)
        if np.isfinite(data["crit"][k]):
            ax.axhline(data["crit"][k], color="k", lw=1, label=r"$\alpha_c$ (critical_alpha)")
            ax.legend(loc="upper right", framealpha=0.9)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=r"rescaled time $\tau$",
            title=f"$L={L}$",
            xlim=(tau[0], tau[-1]),
        )
    axes[0].set_ylabel(r"initialisation scale $\alpha$ ($\rho=1$)")
    _index_legend(fig, white="run ended (escape / blow-up)")
    fig.suptitle(
        r"Depth: $j^\dagger(\tau)$ of $\ell_2$-SAM, $\mu=(1,\dots,5)$, $\rho=1$", fontsize=9
    )
    return fig


FIGURES = [
    FigureSpec(
        "regime_map",
        "ℓ2-SAM regime map over (α, ρ), L = 2, μ = (1..5), with critical_alpha and sympy bounds",
        compute_regime_map,
        draw_regime_map,
    ),
    FigureSpec(
        "minor_first",
        "α against rescaled time τ coloured by j†(τ) at ρ = 1 (minor first, major last)",
        compute_minor_first,
        draw_minor_first,
    ),
]
DEPTH = FigureSpec(
    "depth", "j†(τ) maps of ℓ2-SAM for L = 2, 3, 4 with α_c per depth", compute_depth, draw_depth
)
