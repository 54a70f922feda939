r"""Trajectories, ℓ∞-SAM limit maps and discrete-against-flow figures (figures 3, 4, 5).

Everything is on :math:`\mu=(1,2)`: figure 3 and 5 solve the plain flow
:math:`\dot\theta=-\nabla\mathcal L(\hat\theta)` (logistic loss) with :func:`flows.solve`
and :func:`flows.iterate`; figure 4 sweeps the rescaled flow over
:math:`(\alpha_1,\alpha_2)` with :func:`flows.sweep`. ℓ∞-SAM is the exact-sign
Filippov flow of :mod:`flows`.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import analysis
import flows

from ._common import GREY, METHOD_COLORS, OKABE_ITO, Context, FigureSpec, new_figure, sweep

MU2 = np.array([1.0, 2.0])
DATA2 = flows.single_example(MU2)
COORD_COLORS = (OKABE_ITO["orange"], OKABE_ITO["blue"])  # β_1 (minor), β_2 (major)


def _methods(rho):
    # GD is ℓ2-SAM with ρ = 0 (flows guarantees they agree exactly): one compiled solver
    # serves both, which halves the compilation time of these figures.
    return {"GD": flows.L2SAM(0.0), "ℓ2-SAM": flows.L2SAM(rho), "ℓ∞-SAM": flows.LinfSAM(rho)}


# --- figure 3: trajectories --------------------------------------------------------------

ALPHA_TRAJ, RHO_TRAJ = 0.07, 0.1  # α/ρ = 0.7: R2 for ℓ2-SAM at L = 2, below ρ for ℓ∞-SAM
T_PLATEAU = 30.0  # the loss of ℓ2-SAM at L = 2 has dropped by then


def compute_trajectories(ctx: Context) -> dict:
    t1 = ctx.pick(1e4, 1e3)
    ts = np.concatenate([[0.0], np.geomspace(1e-2, t1, ctx.pick(400, 80))])
    data = {"ts": ts}
    for L in (1, 2):
        for name, method in _methods(RHO_TRAJ).items():
            traj = flows.solve(
                method,
                DATA2,
                flows.balanced_init(ALPHA_TRAJ, L, 2),
                t1=t1,
                ts=ts,
                collapse_tol=1e-3,
            )
            key = f"{name}-L{L}"
            data[f"beta/{key}"] = np.where(np.asarray(traj.reached)[:, None], traj.beta, np.nan)
            data[f"loss/{key}"] = np.where(traj.reached, traj.loss, np.nan)
            data[f"status/{key}"] = np.array(traj.status_name)
            if name == "ℓ2-SAM" and L == 2:
                # loss_plateau takes the longest stretch in linear time; on [0, 1e4] that is
                # the slow 1/t tail of the logistic loss, so it reads an equispaced early run.
                early = flows.solve(
                    method,
                    DATA2,
                    flows.balanced_init(ALPHA_TRAJ, L, 2),
                    t1=T_PLATEAU,
                    ts=np.linspace(0.0, T_PLATEAU, 601),
                )
                data["plateau"] = np.array(analysis.loss_plateau(early))
            if L == 1:  # C1: the ℓ2 max-margin direction
                data[f"cos/{key}"] = analysis.direction_cosine(traj, analysis.max_margin(DATA2, 2))
    data["alpha"], data["rho"] = np.array(ALPHA_TRAJ), np.array(RHO_TRAJ)
    return data


def draw_trajectories(data: dict):
    fig = new_figure(5.5, 3.4)
    axes = fig.subplots(2, 4)
    ts = data["ts"]
    for row, L in enumerate((1, 2)):
        for col, name in enumerate(("GD", "ℓ2-SAM", "ℓ∞-SAM")):
            ax = axes[row, col]
            key = f"{name}-L{L}"
            beta = data[f"beta/{key}"]
            for j in range(2):
                b = np.where(beta[:, j] > 0, beta[:, j], np.nan)
                ax.plot(
                    ts,
                    b,
                    color=COORD_COLORS[j],
                    lw=1.5,
                    label=rf"$\beta_{j + 1}$ ($\mu_{j + 1}={j + 1:g}$)",
                )
            status = str(data[f"status/{key}"])
            ax.set(
                xscale="log",
                yscale="log",
                title=f"{name}, $L={L}$" + ("" if status in ("ok", "escaped") else f" ({status})"),
            )
            if row == 1:
                ax.set_xlabel("time $t$")
            ax.set_ylim(bottom=max(ax.get_ylim()[0], 1e-6))
            ax.set_xlim(ts[1], ts[-1])
            if col == 0:
                ax.set_ylabel(r"$\beta_j(t)$")
            if L == 1:
                cos = data[f"cos/{key}"]
                ax.text(
                    0.03,
                    0.95,
                    rf"cos to $\ell_2$ max-margin at $t_{{end}}$: {np.nanmax(cos[-1:]):.4f}",
                    transform=ax.transAxes,
                    fontsize=6.5,
                    va="top",
                )
        ax = axes[row, 3]
        for name in ("GD", "ℓ2-SAM", "ℓ∞-SAM"):
            ax.plot(ts, data[f"loss/{name}-L{L}"], color=METHOD_COLORS[name], lw=1.5, label=name)
        ax.set(
            xscale="log", yscale="log", title=f"loss, $L={L}$", xlabel="time $t$" if row else None
        )
        ax.set_ylabel(r"$\mathcal{L}(t)$")
        if L == 2:
            start, end, height = data["plateau"]
            ax.axvspan(
                max(start, ts[1]), end, color=GREY, alpha=0.5, lw=0, label="ℓ2-SAM plateau (R2)"
            )
        if L == 1:
            ax.legend(loc="upper right")
        else:  # the method colours are in the L = 1 legend
            ax.legend(handles=ax.get_legend_handles_labels()[0][-1:], loc="lower left")
    axes[0, 0].legend(loc="lower right")
    fig.suptitle(
        rf"Trajectories on $\mu=(1,2)$, $\alpha={float(data['alpha']):g}$, "
        rf"$\rho={float(data['rho']):g}$ (plain flow, logistic loss)",
        fontsize=9,
    )
    return fig


def _no_minor_labels(ax):
    from matplotlib.ticker import NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())


# --- figure 4: ℓ∞-SAM limit map over (α1, α2) ----------------------------------------------

RHO_LIMIT, T1_LIMIT = 1.0, 40.0


def limit_point(a1, a2, kind="linf"):
    """Rescaled flow from w(0) = (α1, α2), L = 2, to τ = T1_LIMIT: status and β at the end."""
    method = flows.LinfSAM(RHO_LIMIT) if kind == "linf" else flows.GD()
    traj = flows.solve(
        method,
        DATA2,
        flows.balanced_init(jnp.stack([a1, a2]), 2, 2),
        t1=T1_LIMIT,
        ts=jnp.array([0.0, T1_LIMIT]),
        rescaled=True,
        escape_tol=1e60,
    )
    return {"status": traj.status.astype(jnp.int8), "beta": flows.beta(traj.theta_end)}


def compute_linf_limits(ctx: Context) -> dict:
    alphas = np.geomspace(0.2, 5.0, ctx.pick(48, 10))  # even count: no point on α_j = ρ
    r = sweep(ctx, limit_point, {"a1": alphas, "a2": alphas}, static={"kind": ["linf", "gd"]})
    return dict(
        alpha=alphas,
        limit=analysis.limit_class(r["status"], r["beta"]),
        rho=np.array(RHO_LIMIT),
        status=r["status"],
    )


LIMIT_COLORS = ("#FFFFFF", GREY, OKABE_ITO["orange"], OKABE_ITO["blue"])
LIMIT_NAMES = ("solver failure", r"$\beta\to0$", r"$e_1$ (minor)", r"$e_2$ (major)")


def draw_linf_limits(data: dict):
    from matplotlib.colors import BoundaryNorm, ListedColormap

    fig = new_figure(5.5, 2.6)
    axes = fig.subplots(1, 2, sharey=True)
    cmap, norm = ListedColormap(LIMIT_COLORS), BoundaryNorm(np.arange(-1.5, 3.5), 4)
    a, rho = data["alpha"], float(data["rho"])
    for ax, k, title in ((axes[0], 0, r"$\ell_\infty$-SAM"), (axes[1], 1, "GD")):
        ax.pcolormesh(
            a, a, data["limit"][k].T, cmap=cmap, norm=norm, shading="nearest", rasterized=True
        )
        if k == 0:
            ax.axvline(rho, color="k", lw=1, ls="--")
            ax.axhline(rho, color="k", lw=1, ls="--")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=r"$\alpha_1$ (minor, $\mu_1=1$)",
            title=f"{title}: limit direction, $L=2$, $\\mu=(1,2)$"
            + (f", $\\rho={rho:g}$" if k == 0 else ""),
        )
    axes[0].set_ylabel(r"$\alpha_2$ (major, $\mu_2=2$)")
    present = set(np.unique(data["limit"]).tolist())
    handles = [
        Patch(facecolor=LIMIT_COLORS[c + 1], edgecolor="0.3", label=LIMIT_NAMES[c + 1])
        for c in (-1, 0, 1, 2)
        if c in present
    ]
    handles.append(Line2D([], [], color="k", ls="--", label=r"$\alpha_j=\rho$ (theory, C2)"))
    axes[0].legend(handles=handles, loc="lower left", framealpha=0.9)
    ticks = [0.2, 0.5, 1, 2, 5]
    for ax in axes:
        _no_minor_labels(ax)
        ax.set_xticks(ticks, labels=[f"{t:g}" for t in ticks])
        ax.set_yticks(ticks, labels=[f"{t:g}" for t in ticks])
    return fig


# --- figure 5: discrete against flow -------------------------------------------------------

ALPHA_DISC, RHO_DISC, T_DISC = 0.35, 0.5, 20.0
N_SAVED = 40  # iterates and flow compared at t = k T / N_SAVED: one flow solve per method
LRS_SHOWN = (0.5, 0.25, 0.0625)


def compute_discrete(ctx: Context) -> dict:
    theta0 = flows.balanced_init(ALPHA_DISC, 2, 2)
    # η = 2^-k, so that T / η is a multiple of N_SAVED and every run is saved at the same times.
    lrs = 2.0 ** -np.arange(1, ctx.pick(11, 5))
    data = {"lrs": lrs}
    tight = dict(rtol=1e-11, atol=1e-13, collapse_tol=None)
    ts = np.linspace(0.0, T_DISC, N_SAVED + 1)
    fine = np.linspace(0.0, T_DISC, 401)
    flow = flows.solve(flows.L2SAM(RHO_DISC), DATA2, theta0, t1=T_DISC, ts=fine, **tight)
    data["ts"], data["beta_flow"] = fine, np.asarray(flow.beta)
    for name, method in _methods(RHO_DISC).items():
        ref = flows.solve(method, DATA2, theta0, t1=T_DISC, ts=ts, **tight)
        errors = []
        for lr in lrs:
            steps = round(T_DISC / lr)
            it = flows.iterate(
                method, DATA2, theta0, lr=float(lr), steps=steps, every=steps // N_SAVED
            )
            errors.append(float(np.max(np.abs(np.asarray(it.thetas) - np.asarray(ref.thetas)))))
            if name == "ℓ2-SAM" and lr in LRS_SHOWN:
                data[f"iter_t/{lr}"], data[f"iter_beta/{lr}"] = (
                    np.asarray(it.ts),
                    np.asarray(it.beta),
                )
        data[f"error/{name}"] = np.array(errors)
    data["alpha"], data["rho"], data["T"] = (
        np.array(ALPHA_DISC),
        np.array(RHO_DISC),
        np.array(T_DISC),
    )
    return data


def draw_discrete(data: dict):
    fig = new_figure(5.5, 2.3)
    ax, bx = fig.subplots(1, 2, width_ratios=[1.3, 1])
    for j in range(2):
        ax.plot(
            data["ts"],
            data["beta_flow"][:, j],
            color=COORD_COLORS[j],
            lw=1.5,
            label=rf"flow $\beta_{j + 1}$",
        )
    markers = ("o", "s", "^")
    shown = [lr for lr in LRS_SHOWN if f"iter_t/{lr}" in data]
    for m, lr in zip(markers, shown, strict=False):
        t, b = data[f"iter_t/{lr}"], data[f"iter_beta/{lr}"]
        for j in range(2):
            ax.plot(
                t,
                b[:, j],
                m,
                ms=3.5,
                mfc="none",
                color=COORD_COLORS[j],
                label=rf"iterates, $\eta={lr:g}$" if j == 1 else None,
            )
    ax.set(
        xlabel=r"time $t=k\eta$",
        ylabel=r"$\beta_j$",
        yscale="log",
        title=rf"$\ell_2$-SAM, $L=2$, $\mu=(1,2)$, $\alpha={float(data['alpha']):g}$, "
        rf"$\rho={float(data['rho']):g}$",
    )
    ax.legend(loc="lower right")
    lrs = data["lrs"]
    for name in ("GD", "ℓ2-SAM", "ℓ∞-SAM"):
        err = data[f"error/{name}"]
        ok = np.isfinite(err) & (err > 0)
        slope = analysis.convergence_order(lrs, err)
        bx.plot(
            lrs[ok],
            err[ok],
            "o-",
            color=METHOD_COLORS[name],
            ms=4,
            label=f"{name}: slope {slope:.2f}",
        )
    ref = lrs / lrs[-1] * np.nanmax([data[f"error/{n}"][-1] for n in ("GD", "ℓ2-SAM")])
    bx.plot(lrs, ref, ":", color="0.4", label=r"order 1 ($\propto\eta$)")
    bx.set(
        xscale="log",
        yscale="log",
        xlabel=r"step size $\eta$",
        ylabel=rf"$\max_{{k\eta\leq {float(data['T']):g}}}\|\theta_k-\theta(k\eta)\|_\infty$",
        title="discrete against flow: error and fitted slope",
    )
    bx.legend(loc="lower right")
    _no_minor_labels(bx)
    return fig


TRAJECTORIES = FigureSpec(
    "trajectories",
    "β_j(t) of GD, ℓ2-SAM and ℓ∞-SAM at L = 1, 2 on μ = (1, 2), loss with the R2 plateau",
    compute_trajectories,
    draw_trajectories,
)
LINF_LIMITS = FigureSpec(
    "linf_limits",
    "ℓ∞-SAM limit direction over (α1, α2) at fixed ρ, lines α_j = ρ, GD beside",
    compute_linf_limits,
    draw_linf_limits,
)
DISCRETE = FigureSpec(
    "discrete",
    "discrete iterates at several η over the flow, and error against η with fitted slopes",
    compute_discrete,
    draw_discrete,
)
