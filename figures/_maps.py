r"""Regime maps and "minor first, major last" maps of ℓ2-SAM and LE-SAM (figures 1, 2, 6, 7).

All runs are the rescaled single-example flow (docs/theory.md §4) on :math:`\mu=(1,2,3,4,5)` from
the balanced uniform start :math:`w^{(l)}(0)=\alpha`. The regime maps are
:func:`analysis.phase_diagram` grids and their boundaries :math:`k=\alpha/\rho` are
:func:`analysis.critical_alpha` / :func:`analysis.direct_alpha` (the regimes, the rule that
decides them and the boundary search are defined once, in :mod:`analysis`); by the scale
invariance :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)` of ℓ2-SAM (docs/theory.md §6)
they depend on :math:`\alpha/\rho` only, so they are computed at :math:`\rho=1`. The
:math:`j^\dagger` maps read :math:`\arg\max_j|\beta_j|` along each run on the norm clock
:math:`s` of :func:`analysis.norm_clock` (:math:`s=\tau` at :math:`L=2`; at :math:`L\ge3` it
sends the finite-τ blow-up to :math:`s=\infty`), and mark every switch of
:func:`analysis.regime_path`; the minor-first map draws GD's from the same starts beside
ℓ2-SAM's. Indices are 0-based here and drawn 1-based.

``collapse_tol`` is ``1e-3`` rather than flows' default ``1e-6``: a collapse to
:math:`10^{-3}\lVert\theta_0\rVert` is already certain for these runs at :math:`L=2` (every
coordinate shrinks once :math:`\lVert\mu\odot w\rVert<\rho\mu_1/\sqrt2`).
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.lines import Line2D

import analysis
import flows

from ._catalog import SUMMARIES
from ._common import (
    COLLAPSE,
    Context,
    FigureSpec,
    draw_regimes,
    regime_handles,
    sweep,
)
from ._style import (
    ALPHA_C_LINE,
    ALPHA_DIRECT_LINE,
    FULL_WIDTH,
    REFERENCE,
    cell_edges,
    draw_classes,
    fill_handle,
    hatch_handle,
    index_cmap,
    new_figure,
    panel_labels,
    plain_log_ticks,
)

MU = np.arange(1.0, 6.0)
DATA = flows.single_example(MU)
COLLAPSE_TOL = 1e-3
# j† maps: the clock axis (s = τ at L = 2) from TAU_MIN to TAU_MAX[L], each run solved for at
# most T1[L] in τ and stopped at ESCAPE_PATH[L] times its starting norm. At L = 2 the growth is
# exponential and the last switch is long past at τ = 20. At L ≥ 3 the stop is in the blow-up,
# where τ* − τ ∝ ‖θ‖^-(L-2): at 10⁴ it stays far above the float64 resolution of τ (a run just
# above α_c at L = 4 blows up near τ = 650; at 10⁶ its solver stalled there, 1e-14 short of τ*).
TAU_MIN = 1e-3
TAU_MAX = {2: 20.0, 3: 50.0, 4: 1e3}
T1 = {2: 20.0, 3: 60.0, 4: 1e4}
ESCAPE_PATH = {2: 1e60, 3: 1e4, 4: 1e4}
MAX_STEPS = 4096  # dense output: a few hundred steps per run
LATE_STEP = 1.15  # a switch after a run stopped is drawn past its end, at s_end · LATE_STEP^k
# The regimes over (L, α/ρ) at ρ = 1 (figure 1), whose cells bracket the boundary searches.
# L = 1 is the depth-free reference: dβ/dτ = μ whatever the perturbation (docs/theory.md §15).
DEPTHS = (list(range(1, 9)), [1, 2, 3])  # full, quick
K_RANGE = (0.05, 3.0)  # α/ρ: below every k_c, above every k_direct of L = 2..8
N_K = (96, 10)
# Boundary searches inside one cell of that grid (ratio 1.044; quick 1.57): a scan of K_POINTS
# values of analysis.boundary resolves it to 0.54% (quick 5.8%), within K_RTOL: one vmapped batch,
# and k to 0.27%, a quarter of the row spacing of the j† maps. Most of a search's cost is its
# compilation; runs closer to k_c linger longer at L ≥ 4.
K_POINTS = 9
K_RTOL = (6e-3, 0.06)
# The j† maps of figures 2 and 6 (shared): ℓ2-SAM at ρ = 1 over α in [0.1, 3].
PATH_DEPTHS = ([2, 3, 4], [2, 3])
N_PATH = (320, 25)  # quick: a row at α = 0.358, just above α_c


def _phase(ctx, method, **axes):
    """An :func:`analysis.phase_diagram` of the figures' μ, cached with the figures' sweeps."""
    return analysis.phase_diagram(
        method,
        MU,
        **axes,
        collapse_tol=COLLAPSE_TOL,
        cache_dir=ctx.sweeps,
        progress=ctx.sweep_bars,
        executor=ctx.executor,
        order=cost_order,
    )


def depth_phase(ctx: Context):
    r"""``(depths, k, code)``: :func:`analysis.phase_diagram` of ℓ2-SAM at :math:`\rho=1` over
    the depths and :math:`k=\alpha/\rho`; ``code[i, m]`` is the regime at depth ``depths[i]``
    and ``k[m]`` (cached on disk with the sweeps: figures 1, 2 and 6 share it)."""
    depths, k = ctx.pick(*DEPTHS), np.geomspace(*K_RANGE, ctx.pick(*N_K))
    ctx.log("regimes over (L, α/ρ)")
    code = _phase(ctx, flows.L2SAM(1.0), alpha=k, rho=1.0, depth=depths)["code"].values
    undetermined = code == analysis.REGIMES.index("undetermined")
    if np.any(undetermined):
        i, m = (int(v[0]) for v in np.nonzero(undetermined))
        raise RuntimeError(f"regime map: undetermined at L = {depths[i]}, α/ρ = {k[m]:.6g}.")
    return depths, k, code


_BOUNDARIES: dict = {}  # (quick, sweeps folder, L, kind) -> k


def boundaries(ctx: Context, depths=None) -> dict:
    r"""Depth -> ``(k_c, k_direct)``, :math:`k=\alpha/\rho` of ℓ2-SAM's collapse and direct
    boundaries at ``depths`` (default: all of :func:`depth_phase`):
    :func:`analysis.critical_alpha` / :func:`analysis.direct_alpha` at :math:`\rho=1`, each
    searched inside the cell pair of :func:`depth_phase` where the regime changes (rtol
    ``K_RTOL``), two searches at a time. A boundary is NaN where the column has no cell below
    it: ``k_c`` at odd :math:`L` (the weights never decrease), both at :math:`L=1` (every start
    is direct). Memoised: the figures share each search."""
    all_depths, k, code = depth_phase(ctx)
    depths = list(all_depths) if depths is None else list(depths)
    below = {"collapse": code == COLLAPSE, "direct": code != analysis.REGIMES.index("direct")}
    search = {"collapse": analysis.critical_alpha, "direct": analysis.direct_alpha}
    key = (ctx.quick, str(ctx.sweeps))
    jobs = {}
    for L in depths:
        i = all_depths.index(L)
        for kind, flags in below.items():
            if (*key, L, kind) in _BOUNDARIES:
                continue
            change = np.flatnonzero(flags[i, :-1] != flags[i, 1:])
            if change.size == 0 and not flags[i, 0]:
                _BOUNDARIES[(*key, L, kind)] = np.nan  # no cell below it in the column: none
                continue
            if change.size != 1 or not flags[i, 0]:
                raise RuntimeError(f"regime map: no single {kind} boundary at L = {L}.")
            jobs[L, kind] = functools.partial(
                search[kind],
                flows.L2SAM(1.0),
                MU,
                L,
                bracket=(k[change[0]], k[change[0] + 1]),
                bracket_rtol=ctx.pick(*K_RTOL),
                points=K_POINTS,
                collapse_tol=COLLAPSE_TOL,
            )
    if jobs:
        ctx.log(f"{len(jobs)} boundary searches (critical_alpha, direct_alpha)")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            # deepest first: the slowest searches (runs that linger near α_c) start early
            order = sorted(jobs, key=lambda job: -job[0])
            for job, value in zip(order, pool.map(lambda j: float(jobs[j]()), order), strict=True):
                _BOUNDARIES[(*key, *job)] = value
    return {L: tuple(_BOUNDARIES[(*key, L, kind)] for kind in below) for L in depths}


def path_point(alpha, s, depth=2, n_tau=300, method=None):
    r"""One :math:`j^\dagger` map row, ℓ2-SAM at :math:`\rho=s` (or ``method``) from :math:`\alpha`:
    :math:`j^\dagger` at the clock values ``tau_grid(depth, n_tau)`` (:func:`analysis.norm_clock`;
    :math:`s=\tau` at :math:`L=2`), -2 after a collapse and -1 after the run stopped (escape,
    blow-up); ``tau`` is τ at those clock values (NaN after the end), ``s_end`` / ``t_end`` the
    clock and τ at the end."""
    traj = flows.solve(
        flows.L2SAM(s) if method is None else method,
        DATA,
        flows.balanced_init(alpha, depth, MU.size),
        t1=T1[depth],
        ts=jnp.zeros(1),
        rescaled=True,
        dense=True,
        max_steps=MAX_STEPS,
        collapse_tol=COLLAPSE_TOL,
        escape_tol=ESCAPE_PATH[depth],
    )
    clock = analysis.norm_clock(traj)
    grid = jnp.asarray(tau_grid(depth, n_tau))
    reached = grid <= clock.s[-1]
    tau = clock.tau_at(grid)
    j = analysis.dominant_at(jax.vmap(traj.evaluate)(tau))
    stopped = jnp.where(traj.status == flows.Status.COLLAPSED, -2, -1)
    return {
        "status": traj.status.astype(jnp.int8),
        "t_end": traj.t_end,
        "s_end": clock.s[-1],
        "jdag": jnp.where(reached, j, stopped).astype(jnp.int8),
        "tau": jnp.where(reached, tau, jnp.nan),
    }


def tau_grid(depth, n_tau):
    """The clock grid of :func:`path_point` (log-spaced: early switches are fast)."""
    return np.geomspace(TAU_MIN, TAU_MAX[depth], n_tau)


def cost_order(points):
    """Sweep order: by scale invariance the cost depends on α/ρ (or α/σ) only (ρ = 1 if fixed)."""
    scale = next((points[k] for k in ("s", "rho", "sigma") if k in points), 1.0)
    return np.log(points["alpha"] / scale)


def _log_cells(ax, x, y, **labels):
    """Log axes spanning the cells around the grid values ``x`` and ``y``, and ``labels``."""
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(cell_edges(x)[0], cell_edges(x)[-1]),
        ylim=(cell_edges(y)[0], cell_edges(y)[-1]),
        **labels,
    )


def _pcolor_classes(ax, x, y, cls):
    """The regime codes ``cls`` (rows y, columns x) on log axes, cells around the grid values."""
    return draw_regimes(ax, cell_edges(x), cell_edges(y), cls)


# --- figure 1: the regimes against depth, and the rays of the (ρ, α) plane --------------

K_TICKS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
K_STYLE = {  # the boundary segments and rays: α_c solid, α_direct dashed (figures._style)
    "collapse": dict(marker="o", **ALPHA_C_LINE, mfc="w", mec="k", ms=3.5),
    "direct": dict(marker="s", **ALPHA_DIRECT_LINE, mfc="w", mec="k", ms=3.2),
}
SYMPY_STYLE = {
    "all_shrink": dict(marker=">", ls="", mfc="w", mec="k", ms=4, mew=0.7),
    "all_grow": dict(marker=">", ls="", mfc="k", mec="k", ms=4, mew=0.7),
    "direct": dict(marker="D", ls="", mfc="w", mec="k", ms=3.2, mew=0.7),
}
K_LABELS = {
    "collapse": r"$k_c=\alpha_c/\rho$: collapse below",
    "direct": r"$k_{\rm direct}=\alpha_{\rm direct}/\rho$: direct above",
}
SYMPY_LABELS = {
    "all_shrink": r"$L=2$ bound: all shrink below",
    "all_grow": r"$L=2$ bound: all grow above",
    "direct": r"$L=2$ closed form of $k_{\rm direct}$",
}


def compute_regime_map(ctx: Context) -> dict:
    depths, k, code = depth_phase(ctx)
    n = ctx.pick(24, 6)
    alpha, rho = np.geomspace(1e-2, 1.0, n), np.geomspace(1e-2, 1.0, n)
    ctx.log("regimes over (ρ, α) at L = 2, beside the boundary searches")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        plane = pool.submit(_phase, ctx, flows.L2SAM(1.0), alpha=alpha, rho=rho)
        ks = boundaries(ctx)
        plane = plane.result()["code"].values
    return dict(
        depths=np.array(depths),
        k=k,
        code=code,  # (depth, k)
        k_c=np.array([ks[L][0] for L in depths]),
        k_direct=np.array([ks[L][1] for L in depths]),
        bounds=np.array(analysis.l2sam_thresholds(MU, 1.0)),  # at ρ = 1: k's of L = 2
        alpha=alpha,
        rho=rho,
        plane=plane,  # (alpha, rho)
    )


def _k_mark(ax, x, k, kind, half=0.42):
    """A boundary k at depth column x: a segment across the column, a marker at its centre."""
    style = K_STYLE[kind]
    line = {key: style[key] for key in ("color", "ls", "lw", "gid")}
    ax.plot([x - half, x + half], [k, k], **line, zorder=3)
    ax.plot([x], [k], **{**style, "ls": ""}, zorder=4)


def draw_regime_map(data: dict):
    fig = new_figure(FULL_WIDTH, 3.4)
    ax, bx = fig.subplots(1, 2, width_ratios=[2.3, 1])
    depths, k = data["depths"], data["k"]
    edges = cell_edges(k)
    for i, L in enumerate(depths):
        draw_regimes(ax, [L - 0.34, L + 0.34], edges, data["code"][i][:, None])
        for kind, values in (("collapse", data["k_c"]), ("direct", data["k_direct"])):
            if np.isfinite(values[i]):
                _k_mark(ax, L, values[i], kind)
    if 2 in depths:
        for name, value in zip(("all_shrink", "all_grow", "direct"), data["bounds"], strict=True):
            ax.plot([1.5], [value], **SYMPY_STYLE[name], zorder=4)
    ax.set(
        yscale="log",
        xlim=(depths[0] - 0.5, depths[-1] + 0.5),
        ylim=(edges[0], edges[-1]),
        xticks=depths,
        xlabel=r"depth $L$ (odd $L$: no collapse, no $k_c$; $L=1$: no boundary)",
        ylabel=r"$\alpha/\rho$",
    )
    ax.tick_params(axis="x", length=0)
    plain_log_ticks(ax, "y")
    ax.set_yticks(K_TICKS, [f"{t:g}" for t in K_TICKS])

    alpha, rho = data["alpha"], data["rho"]
    _pcolor_classes(bx, rho, alpha, data["plane"])
    line = np.array([rho[0] / 2, rho[-1] * 2])
    two = int(np.flatnonzero(depths == 2)[0])
    k_l2 = {"collapse": data["k_c"][two], "direct": data["k_direct"][two]}
    for kind, kv in k_l2.items():
        bx.plot(line, kv * line, **{**K_STYLE[kind], "marker": None})
        bx.plot(
            rho[[len(rho) // 6, len(rho) // 2]],
            kv * rho[[len(rho) // 6, len(rho) // 2]],
            **{**K_STYLE[kind], "ls": ""},
        )
    _log_cells(
        bx,
        rho,
        alpha,
        xlabel=r"$\rho$",
        ylabel=r"$\alpha$",
        title=r"$L=2$: rays $\alpha=k\rho$",
        aspect="equal",
    )
    plain_log_ticks(bx)
    panel_labels([ax, bx])
    present = set(np.unique(data["code"]).tolist()) | set(np.unique(data["plane"]).tolist())
    handles = [
        *regime_handles(present),
        *(Line2D([], [], **K_STYLE[kind], label=K_LABELS[kind]) for kind in K_STYLE),
        *(Line2D([], [], **SYMPY_STYLE[n], label=SYMPY_LABELS[n]) for n in SYMPY_STYLE),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, handlelength=2.2)
    return fig


# --- figures 2 and 6: α against the clock, coloured by j† -------------------------------


def _path_sweep(ctx, alphas, s, depths, gd=False):
    n_tau = ctx.pick(300, 60)
    fn = {
        (300, False): path_point,
        (60, False): _quick_path_point,
        (300, True): _gd_path_point,
        (60, True): _quick_gd_path_point,
    }[n_tau, gd]
    return sweep(
        ctx,
        fn,
        {"alpha": alphas, "s": [s]},
        static={"depth": list(depths)},
        order=cost_order,
    )


def _quick_path_point(alpha, s, depth=2):
    """:func:`path_point` on a coarse clock grid (the quick figures)."""
    return path_point(alpha, s, depth, n_tau=60)


def _gd_path_point(alpha, s, depth=2):
    """:func:`path_point` of GD (``s`` is not used: GD has no radius)."""
    return path_point(alpha, s, depth, method=flows.GD())


def _quick_gd_path_point(alpha, s, depth=2):
    """:func:`_gd_path_point` on the coarse clock grid of the quick figures."""
    return path_point(alpha, s, depth, n_tau=60, method=flows.GD())


def _check_rows(r, alphas, depths):
    """Every row is drawn as far as its run went: it ends by collapse or escape inside the axis,
    or it runs past the axis' end (at the τ budget or the step budget); a row cut short by
    anything else (a solver failure, the step budget inside the axis) is an error, not white."""
    status, s_end = r["status"], r["s_end"]
    axis_end = np.array([TAU_MAX[L] for L in depths]).reshape(-1, 1, 1)
    ok = np.isin(status, [flows.Status.COLLAPSED, flows.Status.ESCAPED]) | (
        np.isin(status, [flows.Status.OK, flows.Status.MAX_STEPS])
        & (s_end >= axis_end * (1 - 1e-12))
    )
    if not np.all(ok):
        d, i, _ = (int(v[0]) for v in np.nonzero(~ok))
        raise RuntimeError(
            f"j† map: the run at L = {depths[d]}, α = {alphas[i]:.6g} ended with status "
            f"{flows.Status.name(int(status[d, i, 0]))!r} at s = {float(s_end[d, i, 0]):.4g}"
            f", before the axis' end {TAU_MAX[depths[d]]:g}; raise MAX_STEPS or T1."
        )


def _switch_marks(alphas, targets, depth, row_tau, row_end, grid):
    r"""Every switch of :func:`analysis.regime_path` at the map rows nearest to ``targets``.

    Returns the rows' indices and ``(rows, switches)`` arrays, padded with NaN / -1 / False: the
    switch times τ, their clock values (interpolated on the row's own τ(s), which ends at
    ``row_end`` = (s_end, t_end)), :math:`j^\dagger` after each switch, and ``late``: the switch
    comes after the row's run stopped in the blow-up (a time past t_end, or NaN: decided by the
    q-order theorem below the resolution of float64): placed just past the row's end, in order,
    a factor ``LATE_STEP`` apart.
    """
    rows = np.unique([int(np.argmin(np.abs(np.log(alphas / t)))) for t in targets])
    paths = [
        analysis.regime_path(
            flows.L2SAM(1.0), MU, float(alphas[i]), depth, collapse_tol=COLLAPSE_TOL
        )
        for i in rows
    ]
    width = max([len(p.times) for p in paths] + [1])
    times = np.full((rows.size, width), np.nan)
    clock = np.full((rows.size, width), np.nan)
    after = np.full((rows.size, width), -1)
    late = np.zeros((rows.size, width), dtype=bool)
    for m, (i, p) in enumerate(zip(rows, paths, strict=True)):
        ok = np.isfinite(row_tau[i])
        s_end, t_end = row_end[0][i], row_end[1][i]
        n = len(p.times)
        times[m, :n] = p.times
        late[m, :n] = ~(p.times <= t_end)
        row_clock = analysis.Clock(np.r_[row_tau[i][ok], t_end], np.r_[grid[ok], s_end], None)
        inside = np.asarray(row_clock.s_at(p.times))
        # after the end, in their order: they happen at some s > s_end that was not computed
        clock[m, :n] = np.where(late[m, :n], s_end * LATE_STEP ** np.cumsum(late[m, :n]), inside)
        after[m, :n] = p.sequence[1:]
        if n and not clock[m, n - 1] < grid[-1]:
            raise RuntimeError(
                f"j† map, L = {depth}: the last switch at α = {alphas[i]:.6g} is at clock "
                f"{clock[m, n - 1]:.4g}, past the axis' end {grid[-1]:g}; mark another α."
            )
    return rows, times, clock, after, late


def _marks_of(r, d, alphas, targets, depth, grid):
    """:func:`_switch_marks` of the ``d``-th depth of a :func:`_path_sweep` result."""
    return _switch_marks(
        alphas,
        targets,
        depth,
        r["tau"][d, :, 0],
        (r["s_end"][d, :, 0], r["t_end"][d, :, 0]),
        grid,
    )


MINOR_MARKS = (0.36, 0.42, 0.5, 0.6, 0.7, 0.85)


def depth_paths(ctx: Context):
    """``(alphas, depths, r)``: the :func:`path_point` sweep of ℓ2-SAM at ρ = 1 over α and the
    depths, every row checked by :func:`_check_rows` (figures 2 and 6 share it)."""
    alphas, depths = np.geomspace(0.1, 3.0, ctx.pick(*N_PATH)), ctx.pick(*PATH_DEPTHS)
    r = _path_sweep(ctx, alphas, 1.0, depths)
    _check_rows(r, alphas, depths)
    return alphas, depths, r


MINOR_RANGE = (0.25, 1.2)  # α of figure 2: collapse, sequential and direct rows


def compute_minor_first(ctx: Context) -> dict:
    alphas, _, r = depth_paths(ctx)
    shown = (alphas >= MINOR_RANGE[0]) & (alphas <= MINOR_RANGE[1])
    alphas, r = alphas[shown], {key: v[:1, shown] for key, v in r.out.items()}
    grid = tau_grid(2, r["jdag"].shape[-1])
    ctx.log("switch times (analysis.regime_path) and boundaries")
    rows, times, clock, after, late = _marks_of(
        r, 0, alphas, ctx.pick(MINOR_MARKS, (0.36, 0.6)), 2, grid
    )
    k_c, k_direct = boundaries(ctx, [2])[2]
    ctx.log("GD from the same starts")
    gd = _path_sweep(ctx, alphas, 1.0, [2], gd=True)
    _check_rows(gd, alphas, [2])
    return dict(
        alpha=alphas,
        tau=grid,
        jdag=r["jdag"][0, :, 0],
        jdag_gd=gd["jdag"][0, :, 0],
        mark_rows=rows,
        switch_times=times,
        switch_clock=clock,
        switch_after=after,
        switch_late=late,
        k_c=np.array(k_c),
        k_direct=np.array(k_direct),
        bounds=np.array(analysis.l2sam_thresholds(MU, 1.0)),
    )


def _index_map(ax, tau, alpha, jdag, d=MU.size):
    """j† over (clock, α): the j colour map, collapsed grey, "run stopped" (-1) hatched."""
    cmap, norm = index_cmap(d)
    return draw_classes(ax, cell_edges(tau), cell_edges(alpha), jdag, cmap, norm, hatched=(-1,))


def _index_handles(d=MU.size, stopped="run stopped", present=None):
    """Legend entries of j† (1-based), collapsed and ``stopped`` (hatched).

    ``present``: the codes drawn (-2 collapsed, -1 run stopped, 0..d-1); default all.
    """
    cmap, _ = index_cmap(d)
    names = {0: " (minor)", d - 1: " (major)"}
    labels = {k: f"$j^\\dagger={k + 1}$" + names.get(k, "") for k in range(d)}
    labels.update({-2: "collapsed", -1: stopped})
    return [
        hatch_handle(labels[k]) if k == -1 else fill_handle(cmap(k + 2), labels[k])
        for k in [*range(d), -2, -1]
        if present is None or k in present
    ]


RING = 1.5  # points: the width of each ring of nested switch marks


def _ring_ranks(x, diameter):
    """For switches at display positions ``x`` (in order along one row): how many later
    switches each one's mark would hide under, following a chain of marks closer than
    ``diameter`` to the next; 0 for a mark not overlapped by the next one."""
    ranks = np.zeros(len(x), dtype=int)
    for k in range(len(x) - 2, -1, -1):
        if x[k + 1] - x[k] < diameter:
            ranks[k] = ranks[k + 1] + 1
    return ranks


def _draw_marks(ax, alphas, rows, clock, after, late):
    """One marker per switch, filled with the colour of j† after it: a dot at its time, a
    diamond past the row's end for a switch after the run stopped in the blow-up. A switch
    whose mark the next switch's would cover is drawn larger, beneath it, as a ring around it
    (a chain of such switches as nested rings, the earliest outermost): every switch stays
    visible. Call it once the axes' limits are set; returns whether any ring was drawn."""
    cmap, _ = index_cmap(MU.size)
    fig = ax.get_figure()
    fig.draw_without_rendering()  # the layout: positions on the page, in points
    to_points = 72.0 / fig.dpi
    ringed = False
    for i, ss, js, lt in zip(rows, clock, after, late, strict=True):
        shown = js >= 0
        ss, js, lt = ss[shown], js[shown], lt[shown]
        x = ax.transData.transform(np.c_[ss, np.full(ss.size, alphas[i])])[:, 0] * to_points
        ranks = _ring_ranks(x, 4.0)
        ringed = ringed or bool(np.any(ranks > 0))
        for marker, size, keep in (("o", 4.0, ~lt), ("D", 3.6, lt)):
            for rank in np.unique(ranks[keep]):
                part = keep & (ranks == rank)
                ax.scatter(
                    ss[part],
                    np.full(part.sum(), alphas[i]),
                    c=[cmap(j + 2) for j in js[part]],
                    marker=marker,
                    s=(size + 2 * RING * rank) ** 2,
                    edgecolors="k",
                    linewidths=0.6,
                    zorder=5 - 0.01 * rank,
                    clip_on=False,
                )
    return ringed


def _boundary_lines(ax, k_c, k_direct):
    if np.isfinite(k_c):
        ax.axhline(k_c, **ALPHA_C_LINE)
    ax.axhline(k_direct, **ALPHA_DIRECT_LINE)


def _line_handles(with_grow=False, late=False, ringed=False):
    handles = [
        Line2D([], [], **ALPHA_C_LINE, label=r"$\alpha_c$"),
        Line2D([], [], **ALPHA_DIRECT_LINE, label=r"$\alpha_{\rm direct}$"),
    ]
    if with_grow:
        handles.append(Line2D([], [], **REFERENCE, label=r"all grow ($L=2$ bound)"))
    switches = [("o", 4, "switch of $j^\\dagger$")]
    if late:
        switches.append(("D", 3.5, "switch after the stop"))
    for marker, size, label in switches:
        handles.append(
            Line2D([], [], ls="", marker=marker, mfc="0.8", mec="k", mew=0.6, ms=size, label=label)
        )
    if ringed:
        handles.append(RingHandle())
    return handles


class RingHandle(Line2D):
    """Legend entry of nested switch marks: a ring (the earlier switch) around a dot."""

    def __init__(self):
        super().__init__([], [], ls="", label="ring: an earlier switch\nhidden under the dot")


class _RingHandler:
    """Draws :class:`RingHandle`: a large dark disc with a small light one on top."""

    def legend_artist(self, legend, handle, fontsize, box):
        x, y = box.xdescent + box.width / 2, box.ydescent + box.height / 2
        artists = [
            Line2D([x], [y], ls="", marker="o", ms=ms, mfc=fc, mec="k", mew=0.6)
            for ms, fc in ((4.0 + 2 * RING, "0.45"), (4.0, "0.85"))
        ]
        for a in artists:
            a.set_transform(box.get_transform())
            box.add_artist(a)
        return artists[0]


LEGEND_HANDLERS = {RingHandle: _RingHandler()}


def draw_minor_first(data: dict):
    fig = new_figure(FULL_WIDTH, 2.7)
    ax = fig.subplots()
    tau, alpha = data["tau"], data["alpha"]
    _index_map(ax, tau, alpha, data["jdag"])
    _log_cells(ax, tau, alpha, xlabel=r"rescaled time $\tau$", title=r"$\ell_2$-SAM ($\rho=1$)")
    plain_log_ticks(ax)
    # GD from the same starts leads on one index in every cell: written, not drawn as a map
    gd = np.unique(data["jdag_gd"])
    if gd.size == 1 and gd[0] >= 0:
        ax.text(0.985, 0.985, rf"GD, same starts: $j^\dagger={int(gd[0]) + 1}$ in every cell",
                transform=ax.transAxes, ha="right", va="top")  # fmt: skip
    _boundary_lines(ax, float(data["k_c"]), float(data["k_direct"]))  # ℓ2-SAM's, not GD's
    ax.axhline(data["bounds"][1], **REFERENCE)
    ax.set_ylabel(r"$\alpha$ ($\rho=1$)")
    _alpha_ticks(ax, alpha)
    present = set(np.unique(data["jdag"]).tolist()) | set(range(5))

    def legend(ringed):
        lines = _line_handles(with_grow=True, ringed=ringed)
        return fig.legend(
            handles=[*lines, *_index_handles(present=present)],
            loc="outside right center",
            handler_map=LEGEND_HANDLERS,
        )

    marks = [data[key] for key in MARK_KEYS]
    _with_marks(legend, lambda: _draw_marks(ax, alpha, *marks))
    return fig


MARK_KEYS = ("mark_rows", "switch_clock", "switch_after", "switch_late")


def _with_marks(legend, draw_marks):
    """The legend, then the switch marks (placed on the final layout), then the legend again
    with the ring entry if any ring was drawn."""
    first = legend(False)
    if draw_marks():
        first.remove()
        legend(True)


def _alpha_ticks(ax, alpha):
    """Plain decimal ticks on a log α axis that spans less than two decades."""
    ticks = [t for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 2.0, 3.0) if alpha[0] <= t <= alpha[-1]]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])


# Not nearer α_c at L = 4: there the last switches come within 1e-8 of the blow-up τ*, where two
# solves of one run (the map's, analysis.regime_path's) disagree on which side of the map's stop
# they fall.
DEPTH_MARKS = {2: (0.36, 0.5, 0.7), 3: (0.1, 0.2, 0.35, 0.5), 4: (0.25, 0.3, 0.5)}
DEPTH_MARKS_QUICK = {2: (0.5,), 3: (0.1,), 4: (0.3,)}


def compute_depth(ctx: Context) -> dict:
    alphas, depths, r = depth_paths(ctx)
    n = r["jdag"].shape[-1]
    ctx.log("switch times (analysis.regime_path) and boundaries per depth")
    marks = [
        _marks_of(r, d, alphas, ctx.pick(DEPTH_MARKS, DEPTH_MARKS_QUICK)[L], L, tau_grid(L, n))
        for d, L in enumerate(depths)
    ]
    height, width = max(m[0].size for m in marks), max(m[1].shape[1] for m in marks)

    def stack(k, fill):  # NaN- / -1-padded to (depth, rows, switches)
        return np.stack(
            [
                np.pad(
                    m[k],
                    ((0, height - m[k].shape[0]), (0, width - m[k].shape[1])),
                    constant_values=fill,
                )
                for m in marks
            ]
        )

    ks = boundaries(ctx, depths)
    return dict(
        alpha=alphas,
        depths=np.array(depths),
        tau_max=np.array([TAU_MAX[L] for L in depths]),
        jdag=r["jdag"][:, :, 0],  # (depth, alpha, clock)
        status=r["status"][:, :, 0],
        mark_rows=np.stack(
            [np.pad(m[0], (0, height - m[0].size), constant_values=-1) for m in marks]
        ),
        switch_times=stack(1, np.nan),
        switch_clock=stack(2, np.nan),
        switch_after=stack(3, -1),
        switch_late=stack(4, False),
        k_c=np.array([ks[L][0] for L in depths]),
        k_direct=np.array([ks[L][1] for L in depths]),
    )


def draw_depth(data: dict):
    # L = 2 (where s = τ) is the minor-first figure: only the deeper maps are drawn here
    shown = [i for i, L in enumerate(data["depths"]) if L != 2]
    fig = new_figure(FULL_WIDTH, 3.0)
    axes = np.atleast_1d(fig.subplots(1, len(shown), sharey=True))
    alpha = data["alpha"]
    for ax, i in zip(axes, shown, strict=True):
        L = data["depths"][i]
        jd = data["jdag"][i]
        clock = np.geomspace(TAU_MIN, data["tau_max"][i], jd.shape[-1])
        _index_map(ax, clock, alpha, jd)
        _boundary_lines(ax, data["k_c"][i], data["k_direct"][i])
        _log_cells(
            ax,
            clock,
            alpha,
            title=f"$L={L}$" + ("" if np.isfinite(data["k_c"][i]) else r" (no $\alpha_c$)"),
            xlabel=r"clock $s$",
        )
        plain_log_ticks(ax)
    _alpha_ticks(axes[0], alpha)
    axes[0].set_ylabel(r"$\alpha$ ($\rho=1$)")
    panel_labels(axes)

    def marks():
        ringed = False
        for ax, i in zip(axes, shown, strict=True):
            keep = data["mark_rows"][i] >= 0
            ringed |= _draw_marks(ax, alpha, *(data[key][i][keep] for key in MARK_KEYS))
        return ringed

    present = set(np.unique(data["jdag"][shown]).tolist()) | set(range(MU.size))
    late = bool(np.any(data["switch_late"][shown]))
    handles = [*_index_handles(stopped="run stopped (blow-up)", present=present)]

    def legend(ringed):
        entries = handles + _line_handles(late=late, ringed=ringed)
        return fig.legend(
            handles=entries,
            loc="outside lower center",
            ncols=5 if len(entries) <= 10 else 4,
            handler_map=LEGEND_HANDLERS,
        )

    _with_marks(legend, marks)
    return fig


FIGURES = [
    FigureSpec(
        "regime_map",
        SUMMARIES["regime_map"],
        compute_regime_map,
        draw_regime_map,
    ),
    FigureSpec(
        "minor_first",
        SUMMARIES["minor_first"],
        compute_minor_first,
        draw_minor_first,
    ),
]
DEPTH = FigureSpec(
    "depth",
    SUMMARIES["depth"],
    compute_depth,
    draw_depth,
)
