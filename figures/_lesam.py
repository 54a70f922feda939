r"""LE-SAM at the public reference defaults and beyond (figure 7).

LE-SAM (flows.LESAM) perturbs by :math:`\rho_t\,g/\lVert g\rVert` with
:math:`\rho_t=\min(\sigma/(\lVert g\rVert+\varrho),\rho_{\max})`, :math:`g=\nabla\mathcal L`;
the public reference implementation uses :math:`\sigma=0.35`, :math:`\rho_{\max}=0.3`. The loss is
the logistic loss throughout: LE-SAM's rescaled flow depends on it (docs/theory.md §5).

* Regimes over :math:`(\sigma,\alpha)` at :math:`\rho_{\max}=0.3`: :func:`analysis.phase_diagram`
  of the rescaled single-example flow on :math:`\mu=(1,\dots,5)` (as the other regime maps), the
  ℓ2-SAM(:math:`\rho=\rho_{\max}`) boundaries (its rays :math:`\alpha=k\rho` read at
  :math:`\rho=\rho_{\max}`: :func:`analysis.critical_alpha` and the exact
  :func:`analysis.l2sam_thresholds`), and LE-SAM's own boundaries found along σ at fixed α by
  :func:`analysis.boundary`.
* Sharpness against the loss (the LE-SAM paper's flatness claim): :func:`analysis.sharpness`
  (trace and top eigenvalue of the θ-Hessian, and :math:`\lVert\nabla\mathcal L\rVert`) along the
  plain flows of GD, ℓ2-SAM(:math:`\rho_{\max}`), LE-SAM(σ, ρ_max), LE-SAM with σ annealed to 0
  by a cosine over a training horizon T (:func:`cosine_budget`) and ℓ2-SAM at LE-SAM's
  time-averaged radius :math:`\bar\rho=\frac1T\int_0^T\rho_t\,dt` on the real clock
  (:func:`analysis.lesam_radius`) on a small multi-example dataset (:func:`sharp_data`), drawn
  as ratios to GD's at equal loss (:func:`analysis.at_loss`), with the saved points where
  LE-SAM's radius leaves (and, annealed, returns to) the loss-equated branch.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from matplotlib.lines import Line2D

import analysis
import flows

from ._catalog import SUMMARIES
from ._common import UNDETERMINED, Context, FigureSpec, regime_handles, sequence_text
from ._maps import COLLAPSE_TOL, MU, _pcolor_classes, _phase
from ._style import (
    ALPHA_C_LINE,
    ALPHA_DIRECT_LINE,
    FULL_WIDTH,
    METHOD_COLORS,
    METHOD_LABELS,
    REFERENCE,
    SWITCH,
    VARIANT,
    j_color,
    new_figure,
    panel_labels,
    plain_log_ticks,
)

SIGMA, RHO_MAX = 0.35, 0.3  # the public reference defaults
LOSS = "logistic"

# --- the regime map ------------------------------------------------------------------------

ALPHA_RANGE, SIGMA_RANGE = (5e-3, 0.5), (1e-3, 10.0)
# α at which the boundaries are searched along σ (analysis.boundary over SIGMA_RANGE): below
# ℓ2-SAM(ρ_max)'s α_c (0.104) a large σ collapses; below its α_direct (0.257) it is sequential.
ALPHA_COLLAPSE = np.geomspace(0.01, 0.1, 7)
ALPHA_DIRECT = np.geomspace(0.015, 0.25, 7)


def _l2_critical_alpha() -> float:
    """α_c of ℓ2-SAM(ρ_max) at L = 2 (:func:`analysis.critical_alpha`)."""
    return float(
        analysis.critical_alpha(
            flows.L2SAM(RHO_MAX), MU, 2, bracket_rtol=1e-6, collapse_tol=COLLAPSE_TOL
        )
    )


def _sigma_boundary(alpha: float, kind: str) -> float:
    """σ at which LE-SAM(σ, ρ_max) from α changes regime (``kind`` of analysis.boundary).

    Large σ is the "below" side (collapse, or not direct); NaN where the regime does not
    change over SIGMA_RANGE.
    """
    try:
        b = analysis.boundary(
            lambda s: (flows.LESAM(s, RHO_MAX), alpha),
            MU,
            bracket=SIGMA_RANGE[::-1],
            kind=kind,
            bracket_rtol=1e-4,
            collapse_tol=COLLAPSE_TOL,
            loss=LOSS,
        )
    except ValueError as err:
        if "no change of regime" in str(err):  # none over SIGMA_RANGE at this α
            return float("nan")
        raise
    return b.value


# --- the sharpness panels ------------------------------------------------------------------

SHARP_SCALE, SHARP_N = 4.0, 8
ALPHA_SHARP = 0.12
T_SHARP = 1e4  # every run's loss is below LOSS_MIN by then
T_ANNEAL = 10.0  # the training horizon: the cosine anneals σ to 0 over it, ρ̄ averages over it
LOSS_MIN = 1e-6


def sharp_data() -> flows.Dataset:
    r"""The multi-example dataset of the sharpness panels (a small synthetic one).

    :math:`n=8` examples, labels alternating :math:`+1,-1`, :math:`x_i=y_i\,s\,\mu\odot u_i` with
    :math:`\mu=(1,\dots,5)`, :math:`s=4` and :math:`u_i\sim U(0.5,1.5)^5` (numpy seed 0): separable
    by any β > 0 (:math:`y_ix_i>0` elementwise), minor to major features as in the single
    example. At :math:`s=4` the gradient norm starts above :math:`\sigma/\rho_{\max}\approx1.17`,
    so LE-SAM's loss-equated branch is active early; with :math:`s=1` and the same α,
    :math:`\lVert\nabla\mathcal L\rVert<0.67` throughout and LE-SAM would be ℓ2-SAM(ρ_max) exactly.
    """
    rng = np.random.default_rng(0)
    y = np.where(np.arange(SHARP_N) % 2 == 0, 1.0, -1.0)
    u = rng.uniform(0.5, 1.5, size=(SHARP_N, MU.size))
    return flows.Dataset(SHARP_SCALE * y[:, None] * MU * u, y)


def cosine_budget(t):
    r"""The annealed loss budget :math:`\sigma(t)=\sigma_0\,(1+\cos(\pi t/T))/2` for
    :math:`t\le T`, 0 after (:math:`\sigma_0=0.35`, :math:`T=10`): the LE-SAM paper's cosine
    schedule over a training horizon T, on the real clock (JAX-traceable)."""
    return SIGMA * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(t / T_ANNEAL, 1.0)))


SHARP_DATA = sharp_data()
#: The runs of the sharpness panels; "ℓ2-SAM ρ̄" takes LE-SAM's time-averaged radius, found
#: along the LE-SAM run (:func:`_sharpness`). GD is ℓ2-SAM with ρ = 0 (flows guarantees that
#: they agree exactly): one compiled solver.
SHARP_METHODS = {
    "GD": flows.L2SAM(0.0),
    "ℓ2-SAM": flows.L2SAM(RHO_MAX),
    "LE-SAM": flows.LESAM(SIGMA, RHO_MAX),
    "LE-SAM cos": flows.LESAM(cosine_budget, RHO_MAX),
    "ℓ2-SAM ρ̄": None,
}
SHARP_STYLES = {  # a method's colour; its variant (another radius, σ annealed) open markers
    "GD": dict(color=METHOD_COLORS["GD"], lw=0.8),
    "ℓ2-SAM": dict(color=METHOD_COLORS["ℓ2-SAM"]),
    "ℓ2-SAM ρ̄": dict(color=METHOD_COLORS["ℓ2-SAM"], **VARIANT, marker="o"),
    "LE-SAM": dict(color=METHOD_COLORS["LE-SAM"]),
    "LE-SAM cos": dict(color=METHOD_COLORS["LE-SAM"], **VARIANT, marker="s"),
}
LOSS_READ = 1e-3  # the caption reads the ratios here (dotted) and at LOSS_MIN (the right edge)
BRANCH_ENDS = dict(marker="D", ms=3.5, mfc="w", mew=0.9, ls="none", zorder=4)
BRANCH_RESUMES = dict(marker="^", ms=4.0, mfc="w", mew=0.9, ls="none", zorder=4)


def _sharp_times(ctx: Context) -> np.ndarray:
    """Saving times: geometric over [1e-3, T_SHARP] (the loss falls over decades) and uniform on
    [0, T_ANNEAL] (the trapezoidal average of ρ_t), merged."""
    geo = np.geomspace(1e-3, T_SHARP, ctx.pick(300, 120))
    return np.unique(np.concatenate([np.linspace(0.0, T_ANNEAL, ctx.pick(801, 201)), geo]))


def _sharpness(ctx: Context) -> dict:
    """Trace, λ_max, ‖∇L‖ and the loss along each method's plain flow on SHARP_DATA, the ratios
    of trace and λ_max to GD's at equal loss, and LE-SAM's radius ρ_t with its branch."""
    ts = _sharp_times(ctx)
    theta0 = flows.balanced_init(ALPHA_SHARP, 2, MU.size)
    out = {"ts": ts, "t_anneal": np.array(T_ANNEAL)}
    for name, method in SHARP_METHODS.items():
        if method is None:  # ℓ2-SAM at LE-SAM's mean radius over [0, T_ANNEAL]
            method = flows.L2SAM(float(out["rho_bar"]))
        traj = flows.solve(method, SHARP_DATA, theta0, t1=ts[-1], ts=ts, loss=LOSS)
        if traj.status_name != "ok":
            raise RuntimeError(f"sharpness panels: the {name} run ended {traj.status_name}.")
        s = analysis.sharpness(traj, SHARP_DATA, loss=LOSS)
        out.update(
            {
                f"loss/{name}": np.asarray(traj.loss),
                f"trace/{name}": s.trace,
                f"top/{name}": s.top,
                f"grad_norm/{name}": s.grad_norm,
            }
        )
        if isinstance(method, flows.LESAM):
            r = analysis.lesam_radius(traj, SHARP_DATA, method, loss=LOSS, until=T_ANNEAL)
            out.update({f"rho/{name}": r.rho, f"budget/{name}": r.budget})
            if name == "LE-SAM":
                out["rho_bar"] = np.array(r.mean)
    for name in SHARP_METHODS:
        for key in ("trace", "top"):
            gd = analysis.at_loss(out["loss/GD"], out[f"{key}/GD"], out[f"loss/{name}"])
            out[f"{key}_ratio/{name}"] = out[f"{key}/{name}"] / gd
    return out


# --- compute and draw ----------------------------------------------------------------------


def compute_lesam(ctx: Context) -> dict:
    n = ctx.pick(56, 10)
    alphas, sigmas = np.geomspace(*ALPHA_RANGE, n), np.geomspace(*SIGMA_RANGE, n)
    ds = _phase(ctx, flows.LESAM(SIGMA, RHO_MAX), alpha=alphas, sigma=sigmas)
    if np.any(ds["code"].values == UNDETERMINED):  # the legend would not explain them
        raise RuntimeError("lesam: undetermined runs on the regime grid; raise max_passes.")
    ctx.log("ℓ2-SAM(ρ_max) boundaries; LE-SAM boundaries along σ (analysis.boundary)")
    # Each boundary search compiles its own vmapped solver: too slow for a smoke run.
    l2_crit = np.nan if ctx.quick else _l2_critical_alpha()
    search = lambda alphas, kind: np.array(  # noqa: E731
        [np.nan if ctx.quick else _sigma_boundary(float(a), kind) for a in alphas]
    )
    sigma_c, sigma_d = search(ALPHA_COLLAPSE, "collapse"), search(ALPHA_DIRECT, "direct")
    return dict(
        alpha=alphas,
        sigma=sigmas,
        regime=ds["code"].values,
        l2_crit=np.array(l2_crit),
        l2_direct=np.array(analysis.l2sam_thresholds(MU, RHO_MAX).direct),
        alpha_collapse=ALPHA_COLLAPSE,
        sigma_collapse=sigma_c,
        alpha_direct=ALPHA_DIRECT,
        sigma_direct=sigma_d,
        sigma_default=np.array(SIGMA),
        rho_max=np.array(RHO_MAX),
    )


def compute_flatness(ctx: Context) -> dict:
    ctx.log("sharpness along GD, ℓ2-SAM and LE-SAM (analysis.sharpness, analysis.lesam_radius)")
    return dict(
        sigma_default=np.array(SIGMA),
        rho_max=np.array(RHO_MAX),
        alpha_sharp=np.array(ALPHA_SHARP),
        **_sharpness(ctx),
    )


def _draw_regimes(ax, data):
    """(a): the regimes over (σ, α); ℓ2-SAM(ρ_max)'s boundaries in its colour, LE-SAM's own in
    its colour with markers; α_c solid and α_direct dashed (figures._style)."""
    l2, le = METHOD_COLORS["ℓ2-SAM"], METHOD_COLORS["LE-SAM"]
    _pcolor_classes(ax, data["sigma"], data["alpha"], data["regime"])
    if np.isfinite(data["l2_crit"]):  # NaN in the quick version
        ax.axhline(data["l2_crit"], **{**ALPHA_C_LINE, "color": l2})
    ax.axhline(data["l2_direct"], **{**ALPHA_DIRECT_LINE, "color": l2})
    ax.axvline(data["sigma_default"], **REFERENCE)
    marked = {"o": dict(ALPHA_C_LINE, color=le), "s": dict(ALPHA_DIRECT_LINE, color=le)}
    for s, a, marker in (
        (data["sigma_collapse"], data["alpha_collapse"], "o"),
        (data["sigma_direct"], data["alpha_direct"], "s"),
    ):
        ok = np.isfinite(s)
        ax.plot(s[ok], a[ok], marker=marker, **marked[marker], mfc="w", mec=le, ms=3.5, zorder=3)
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(data["sigma"][0], data["sigma"][-1]),
        ylim=(data["alpha"][0], data["alpha"][-1]),
        xlabel=r"LE-SAM loss budget $\sigma$",
        ylabel=r"initialisation scale $\alpha$ ($L=2$)",
    )
    plain_log_ticks(ax)
    rho = float(data["rho_max"])
    l2_name = rf"{METHOD_LABELS['ℓ2-SAM']}($\rho={rho:g}$)"
    drawn = [  # (shown, handle): the quick version computes no boundary searches
        (np.isfinite(data["sigma_collapse"]).any(),
         Line2D([], [], marker="o", **marked["o"], mfc="w", mec=le, ms=3.5,
                label=r"LE-SAM $\alpha_c(\sigma)$")),
        (np.isfinite(data["sigma_direct"]).any(),
         Line2D([], [], marker="s", **marked["s"], mfc="w", mec=le, ms=3.5,
                label=r"LE-SAM $\alpha_{\rm direct}(\sigma)$")),
        (np.isfinite(data["l2_crit"]),
         Line2D([], [], **{**ALPHA_C_LINE, "color": l2}, label=l2_name + r": $\alpha_c$")),
        (True,
         Line2D([], [], **{**ALPHA_DIRECT_LINE, "color": l2},
                label=l2_name + r": $\alpha_{\rm direct}$")),
        (True,
         Line2D([], [], **REFERENCE,
                label=rf"public default $\sigma={float(data['sigma_default']):g}$")),
    ]  # fmt: skip
    extra = [handle for shown, handle in drawn if shown]
    handles = regime_handles(set(np.unique(data["regime"]).tolist()))
    ax.legend(handles=[*handles, *extra], loc="upper left", bbox_to_anchor=(1.02, 1.0))


def _sharp_labels(data) -> dict:
    rho_bar = float(data["rho_bar"])
    return {
        "GD": "GD",
        "ℓ2-SAM": rf"$\ell_2$-SAM, $\rho=\rho_{{\max}}={RHO_MAX:g}$",
        "ℓ2-SAM ρ̄": rf"$\ell_2$-SAM, $\rho=\bar\rho={rho_bar:.4f}$",
        "LE-SAM": rf"LE-SAM, $\sigma={SIGMA:g}$, $\rho_{{\max}}={RHO_MAX:g}$",
        "LE-SAM cos": rf"LE-SAM, $\sigma(t)$ cosine to 0 at $t={float(data['t_anneal']):g}$",
    }


def _draw_ratio(ax, data, key, ylabel):
    """``key``'s ratio to GD's at equal loss against the loss, for every method; on the LE-SAM
    runs, the first saved point with the cap binding (the loss-equated branch ended) and, once
    σ(t) is annealed away, the first one back on the branch."""
    shown = []
    for name, style in SHARP_STYLES.items():
        loss, ratio = data[f"loss/{name}"], data[f"{key}_ratio/{name}"]
        ax.plot(loss, ratio, **style)
        shown.append(ratio[loss >= LOSS_MIN])
        if f"budget/{name}" in data:
            budget = data[f"budget/{name}"]
            end = int(np.argmin(budget))  # the first capped point
            ax.plot(loss[end], ratio[end], **BRANCH_ENDS, mec=style["color"])
            back = np.flatnonzero(budget[end:])
            if back.size:
                k = end + back[0]
                ax.plot(loss[k], ratio[k], **BRANCH_RESUMES, mec=style["color"])
    shown = np.concatenate(shown)
    ax.axvline(LOSS_READ, **REFERENCE, zorder=0)  # where the caption reads the ratios
    ax.set(
        xscale="log",
        xlim=(float(data["loss/GD"][0]), LOSS_MIN),  # reversed: training runs left to right
        ylim=(0.9 * np.nanmin(shown), 1.05),
        xlabel=r"training loss $\mathcal{L}(\theta)$",
        ylabel=ylabel,
    )
    plain_log_ticks(ax, "x")


def _sharp_legend(fig, data):
    labels = _sharp_labels(data)
    green = METHOD_COLORS["LE-SAM"]
    handles = [Line2D([], [], **SHARP_STYLES[n], label=labels[n]) for n in SHARP_STYLES]
    handles += [
        Line2D([], [], **BRANCH_ENDS, mec=green, label="cap binds: loss-equated branch ended"),
        Line2D([], [], **BRANCH_RESUMES, mec=green,
               label=r"$\sigma(t)<\rho_{\max}\Vert\nabla\mathcal{L}\Vert$: back on the branch"),
    ]  # fmt: skip
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=2,
        title=rf"{SHARP_N} examples, $\alpha={float(data['alpha_sharp']):g}$, "
        r"ratios to GD at equal loss (logistic)",
    )


def draw_lesam(data: dict):
    fig = new_figure(FULL_WIDTH, 2.9)
    _draw_regimes(fig.subplots(), data)
    return fig


def _draw_radius(ax, bx, data):
    """(a) LE-SAM's radius ρ_t on the real clock, with ρ_max and ρ̄ dotted; (b) ‖∇L‖ of the LE-SAM
    runs, with the level σ/ρ_max above which the loss-equated branch acts (dotted)."""
    ts = data["ts"]
    shown = (ts > 0) & (ts <= float(data["t_anneal"]))
    for name in ("LE-SAM", "LE-SAM cos"):
        style = SHARP_STYLES[name]
        ax.plot(ts[shown], data[f"rho/{name}"][shown], **style)
        bx.plot(ts[shown], data[f"grad_norm/{name}"][shown], **style)
    rho_max, rho_bar = float(data["rho_max"]), float(data["rho_bar"])
    for level in (rho_max, rho_bar):  # 0.3 % apart: one line at this scale
        ax.axhline(level, **REFERENCE, zorder=0)
    ax.text(0.02, rho_max, r"$\rho_{\max}$, $\bar\rho$", transform=ax.get_yaxis_transform(),
            ha="left", va="bottom")  # fmt: skip
    # the levels of the branch: σ/ρ_max, and σ(t)/ρ_max annealed
    bx.axhline(float(data["sigma_default"]) / rho_max, **REFERENCE, zorder=0)
    budget = np.asarray(cosine_budget(jnp.asarray(ts[shown])))
    bx.plot(ts[shown], budget / rho_max, **REFERENCE, zorder=0)
    bx.text(0.03, float(data["sigma_default"]) / rho_max, r"$\sigma/\rho_{\max}$",
            transform=bx.get_yaxis_transform(), ha="left", va="top")  # fmt: skip
    bx.text(ts[shown][-1] * 0.93, 0.08, r"$\sigma(t)/\rho_{\max}$", ha="right", va="center")
    ax.set(xscale="log", xlabel=r"time $t$", ylabel=r"LE-SAM radius $\rho_t$", ylim=(0, 0.33))
    bx.set(xscale="log", yscale="log", xlabel=r"time $t$", ylim=(1e-4, 5.0),
           ylabel=r"$\Vert\nabla\mathcal{L}\Vert$")  # fmt: skip
    for axis in (ax, bx):
        axis.set_xlim(ts[shown][0], float(data["t_anneal"]))
        plain_log_ticks(axis)


def draw_flatness(data: dict):
    fig = new_figure(FULL_WIDTH, 4.6)
    axes = fig.subplot_mosaic([["rho", "grad"], ["trace", "top"]])
    _draw_radius(axes["rho"], axes["grad"], data)
    _draw_ratio(axes["trace"], data, "trace", r"$\mathrm{tr}\,H\ /\ \mathrm{tr}\,H_{\rm GD}$")
    _draw_ratio(axes["top"], data, "top", r"$\lambda_{\max}(H)\ /\ \lambda_{\max}(H_{\rm GD})$")
    _sharp_legend(fig, data)
    panel_labels([axes[k] for k in ("rho", "grad", "trace", "top")])
    return fig


LESAM = FigureSpec(
    "lesam",
    SUMMARIES["lesam"],
    compute_lesam,
    draw_lesam,
)
FLATNESS = FigureSpec(
    "lesam_flatness",
    SUMMARIES["lesam_flatness"],
    compute_flatness,
    draw_flatness,
)


# --- LE-SAM in time (the single example, beside ℓ2-SAM) -----------------------------------

ALPHA_TIME = 0.11  # between ℓ2-SAM(ρ_max)'s α_c (0.104) and the start on coordinate 3
TAU_TIME = 7.0  # past every run's last switch
#: The runs in time: ℓ2-SAM(ρ_max) and LE-SAM at the default σ (the cap binds from the start:
#: the same flow), at two smaller σ (the loss-equated branch acts at the start) and annealed.
TIME_METHODS = {
    "ℓ2-SAM": flows.L2SAM(RHO_MAX),
    "LE-SAM": flows.LESAM(SIGMA, RHO_MAX),
    "LE-SAM 0.1": flows.LESAM(0.1, RHO_MAX),
    "LE-SAM 0.05": flows.LESAM(0.05, RHO_MAX),
    "LE-SAM cos": flows.LESAM(cosine_budget, RHO_MAX),
}
TIME_STYLES = {  # a method's colour; its variants (another σ, σ annealed) open markers
    "ℓ2-SAM": dict(color=METHOD_COLORS["ℓ2-SAM"]),
    "LE-SAM": dict(color=METHOD_COLORS["LE-SAM"]),
    "LE-SAM 0.1": dict(color=METHOD_COLORS["LE-SAM"], **VARIANT, marker="o"),
    "LE-SAM 0.05": dict(color=METHOD_COLORS["LE-SAM"], **VARIANT, marker="^"),
    "LE-SAM cos": dict(color=METHOD_COLORS["LE-SAM"], **VARIANT, marker="s"),
}
TIME_LABELS = {
    "ℓ2-SAM": rf"$\ell_2$-SAM, $\rho=\rho_{{\max}}={RHO_MAX:g}$",
    "LE-SAM": rf"LE-SAM, $\sigma={SIGMA:g}$ (default)",
    "LE-SAM 0.1": r"LE-SAM, $\sigma=0.1$",
    "LE-SAM 0.05": r"LE-SAM, $\sigma=0.05$",
    "LE-SAM cos": rf"LE-SAM, $\sigma(t)$ cosine to 0 at $t={T_ANNEAL:g}$",
}
#: Where a run's real clock ends (flows reports t = inf past dt/dτ = e^30): the last saved τ with
#: a finite t, on its strip.
CLOCK_END = dict(marker="|", ms=9, mew=1.4, color="k", ls="none", zorder=4)
#: The strips' row names (the legend gives each run in full).
TIME_ROWS = {
    "ℓ2-SAM": r"$\ell_2$-SAM",
    "LE-SAM": r"$\sigma=0.35$",
    "LE-SAM 0.1": r"$\sigma=0.1$",
    "LE-SAM 0.05": r"$\sigma=0.05$",
    "LE-SAM cos": r"$\sigma(t)$",
}


def _time_run(method, taus):
    r"""The rescaled single-example run from α = ALPHA_TIME saved at ``taus``, with the real time
    carried (``real_time=True``), cut to the saved points where the real time is finite.

    The clock is :math:`t=\int d\tau/|\ell'(\hat m)|`; flows reports it as inf once
    :math:`dt/d\tau>e^{30}` (a margin above about 30), long before the later switches, whose real
    times (about :math:`e^{m}` for margins m in the hundreds) no float64 holds. So the run is
    solved twice: to find the last saved τ with a finite t, then up to it, so that every saved
    point has its real time (:func:`analysis.lesam_radius` needs them).
    """
    data = flows.single_example(MU)
    theta0 = flows.balanced_init(ALPHA_TIME, 2, MU.size)

    def run(ts):  # rtol 1e-11: the clock grows as e^m, and its relative error with it
        return flows.solve(
            method, data, theta0, t1=ts[-1], ts=ts, rescaled=True, loss=LOSS, real_time=True,
            rtol=1e-11,
        )

    t = np.asarray(run(taus).t_real)
    finite = taus[: int(np.argmin(np.isfinite(t)))]  # t is finite up to the clock's cap
    return run(finite), data


def compute_time(ctx: Context) -> dict:
    """j†(τ) of each run (:func:`analysis.regime_path`), and along the saved τ where the real
    time is finite, t, ρ_t (:func:`analysis.lesam_radius`), σ(t) and ‖∇L‖."""
    ctx.log("LE-SAM and ℓ2-SAM in time (analysis.regime_path, analysis.lesam_radius)")
    taus = np.unique(np.concatenate([
        [0.0], np.geomspace(1e-4, TAU_TIME, ctx.pick(1200, 300)),
        np.linspace(0.0, TAU_TIME, ctx.pick(701, 141)),
    ]))  # fmt: skip
    out = dict(
        alpha=np.array(ALPHA_TIME), rho_max=np.array(RHO_MAX), t_anneal=np.array(T_ANNEAL),
        tau_max=np.array(TAU_TIME),
    )  # fmt: skip
    for name, method in TIME_METHODS.items():
        path = analysis.regime_path(method, MU, ALPHA_TIME, 2, loss=LOSS)
        out[f"regime/{name}"] = np.array(path.regime)
        out[f"sequence/{name}"] = np.array(path.sequence)
        out[f"switch_tau/{name}"] = np.asarray(path.times)
        traj, data = _time_run(method, taus)
        reached = np.isfinite(np.asarray(traj.loss))
        out[f"tau/{name}"] = np.asarray(traj.ts)[reached]
        out[f"t/{name}"] = np.asarray(traj.t_real)[reached]
        out[f"grad_norm/{name}"] = analysis.sharpness(traj, data, loss=LOSS).grad_norm[reached]
        if isinstance(method, flows.LESAM):
            r = analysis.lesam_radius(traj, data, method, loss=LOSS)
            out[f"rho/{name}"] = r.rho[reached]
            out[f"budget/{name}"] = r.budget[reached]
            sigma = method.sigma
            out[f"sigma/{name}"] = (
                np.asarray(sigma(jnp.asarray(out[f"t/{name}"])))
                if callable(sigma)
                else np.full(reached.sum(), float(sigma))
            )
    return out


def _switch_strips(ax, data) -> None:
    """One row per run: j† over τ as j-coloured bars, from its switches (analysis.regime_path),
    the switch times dotted."""
    d, tau_max = MU.size, float(data["tau_max"])
    for y, name in enumerate(TIME_METHODS):
        seq, times = data[f"sequence/{name}"], data[f"switch_tau/{name}"]
        edges = np.concatenate([[0.0], times, [tau_max]])
        for j, a, b in zip(seq, edges[:-1], edges[1:], strict=True):
            ax.broken_barh([(a, b - a)], (y - 0.38, 0.76), color=j_color(int(j), d), lw=0)
        for t in times:
            ax.plot([t, t], [y - 0.5, y + 0.5], **SWITCH, zorder=3)
        ax.plot(data[f"tau/{name}"][-1], y, **CLOCK_END)
        ax.text(tau_max * 1.005, y, sequence_text(seq), va="center", ha="left")
    ax.set(ylim=(len(TIME_METHODS) - 0.5, -0.5), xlim=(0.0, tau_max),
           xlabel=r"rescaled time $\tau$")  # fmt: skip
    ax.set_yticks(range(len(TIME_METHODS)), labels=[TIME_ROWS[n] for n in TIME_METHODS])
    for label, name in zip(ax.get_yticklabels(), TIME_METHODS, strict=True):
        label.set_color(TIME_STYLES[name]["color"])
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def _draw_in_time(ax, bx, data) -> None:
    """(b) ρ_t (ℓ2-SAM's: ρ_max) and (c) σ(t) of the runs on the real clock t, up to the
    clock's cap."""
    lo = np.inf
    for name in TIME_METHODS:
        t = data[f"t/{name}"]
        on = t > 0
        lo = min(lo, t[on][0])
        if f"rho/{name}" not in data:  # ℓ2-SAM: ρ = ρ_max throughout, and no σ
            ax.plot(t[on], np.full(on.sum(), float(data["rho_max"])), **TIME_STYLES[name],
                    lw=3.0, zorder=1)  # wide: the LE-SAM lines on the cap lie on it
            continue
        ax.plot(t[on], data[f"rho/{name}"][on], **TIME_STYLES[name])
        bx.plot(t[on], data[f"sigma/{name}"][on], **TIME_STYLES[name])
    ax.set(xscale="log", xlabel=r"real time $t$", ylabel=r"LE-SAM radius $\rho_t$",
           ylim=(0, 0.36))  # fmt: skip
    bx.set(xscale="log", xlabel=r"real time $t$", ylabel=r"loss budget $\sigma(t)$",
           ylim=(0, 0.38))  # fmt: skip
    hi = max(float(data[f"t/{n}"][-1]) for n in TIME_METHODS)
    for axis in (ax, bx):
        axis.set_xlim(lo, hi)


def draw_time(data: dict):
    fig = new_figure(FULL_WIDTH, 3.9)
    grid = fig.add_gridspec(2, 2, height_ratios=[1.0, 1.25])
    strips = fig.add_subplot(grid[0, :])
    ax, bx = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    _switch_strips(strips, data)
    _draw_in_time(ax, bx, data)
    handles = [Line2D([], [], **TIME_STYLES[n], label=TIME_LABELS[n]) for n in TIME_METHODS]
    handles.append(Line2D([], [], **SWITCH, label=r"switch of $j^\dagger$"))
    handles.append(Line2D([], [], **CLOCK_END, label=r"last $\tau$ with $t$ finite"))
    d = MU.size
    shown = np.unique(np.concatenate([data[f"sequence/{n}"] for n in TIME_METHODS]))
    handles += [Line2D([], [], ls="none", marker="s", ms=5, color=j_color(int(j), d),
                       label=rf"$j^\dagger={int(j) + 1}$") for j in shown]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    panel_labels([strips, ax, bx])
    return fig


TIME = FigureSpec("lesam_time", SUMMARIES["lesam_time"], compute_time, draw_time)
