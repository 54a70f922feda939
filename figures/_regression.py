r"""Figure ``sparsity``: SAM's sparsity bias on sparse regression with a u⊙v network.

The setting of Andriushchenko & Flammarion (ICML 2022), ported from their reference code
(tml-epfl/understanding-sam, ``diagonal_linear_nets/diag_nets_sam.ipynb``): seed 0, n = 20 examples,
d = 30 features, X ~ N(0, I), a ground truth with 3 non-zero coordinates (unit norm), noiseless
targets, 1000 test examples; β = u⊙v from :math:`(u_0,v_0)=(\alpha\mathbf 1,0)`
(``flows.product_init``). GD, unnormalised SAM (``flows.USAM``) and per-example SAM
(``flows.OneSAM`` with the reference code's ``convention="reference"``, so that ρ is the one of its
``one_SAM_GD``) are run over a range of ρ at two α, as discrete updates (``flows.iterate``,
η = 5/d, the reference code's) and as flows (``flows.solve``, to the same time). Each end point
is measured by ‖β‖₁, the number of coordinates with :math:`|\beta_j|>10^{-3}`, the distance to the
ground truth and the test loss (docs/theory.md §18); the figure draws the test loss and ‖β‖₁ beside
the minimum-ℓ1 and minimum-ℓ2 interpolators and GD flow's limit predicted by
:func:`analysis.kernel_rich_limit`.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize
from matplotlib.lines import Line2D

import analysis
import flows

from ._catalog import SUMMARIES
from ._common import Context, FigureSpec
from ._style import FULL_WIDTH, METHOD_COLORS, OKABE_ITO, REFERENCE, new_figure, panel_labels

D, N, N_TEST, SPARSITY = 30, 20, 1000, 3
ALPHAS = (0.1, 0.02)
LR = 5 / D
#: The reference code's radii (its grid search) and its number of updates.
RHOS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
STEPS = 10**4 + 1
#: |β_j| above this counts as a non-zero coordinate.
SUPPORT_TOL = 1e-3
METHODS = {
    "USAM": (lambda rho: flows.USAM(rho), METHOD_COLORS["ℓ2-SAM"], "unnormalised SAM"),
    "1-SAM": (lambda rho: flows.OneSAM(rho, convention="reference"), OKABE_ITO["orange"],
              "1-SAM (reference convention)"),
}  # fmt: skip
MEASURES = ("l1", "support", "distance", "test_loss")


def reference_data():
    """The reference code's data: (train, test, ground truth), as in its notebook."""
    state = np.random.RandomState(0)  # np.random.seed(0) and the global calls of the notebook
    X = state.multivariate_normal(np.zeros(D), np.eye(D), N)
    X_test = state.multivariate_normal(np.zeros(D), np.eye(D), N_TEST)
    truth = state.randn(D)
    truth[SPARSITY:] = 0
    truth = np.abs(truth) / np.linalg.norm(truth)
    train = flows.Dataset(X, X @ truth, regression=True)
    return train, flows.Dataset(X_test, X_test @ truth, regression=True), truth


def _measures(beta, test, truth) -> list[float]:
    """‖β‖₁, #{j: |β_j| > 1e-3}, ‖β − β*‖₂, test loss (NaN for a run that did not finish)."""
    beta = np.asarray(beta, np.float64)
    if not np.all(np.isfinite(beta)):
        return [np.nan] * len(MEASURES)
    loss = float(flows.objective(beta[None], test, "squared"))  # β as a depth-1 network
    return [np.sum(np.abs(beta)), np.sum(np.abs(beta) > SUPPORT_TOL),
            np.linalg.norm(beta - truth), loss]  # fmt: skip


def _end(method, train, theta0, steps, flow: bool):
    """β at t = steps·η: the flow's (None if it did not reach it) or the discrete updates'."""
    if flow:
        traj = flows.solve(method, train, theta0, t1=steps * LR, ts=[steps * LR], loss="squared",
                           rtol=1e-10, atol=1e-12, max_steps=10**6)  # fmt: skip
        return traj.beta[-1] if traj.status_name == "ok" else np.full(D, np.nan)
    traj = flows.iterate(method, train, theta0, lr=LR, steps=steps, every=steps, loss="squared")
    return traj.beta[-1] if traj.status_name == "ok" else np.full(D, np.nan)


def compute_sparsity(ctx: Context) -> dict:
    train, test, truth = reference_data()
    rhos = np.array(ctx.pick(RHOS, RHOS[2::3]))
    steps = ctx.pick(STEPS, 10**3)
    out = {"rho": rhos, "alpha": np.array(ALPHAS), "steps": np.array(steps), "lr": np.array(LR),
           "truth": truth}  # fmt: skip
    l2 = np.linalg.pinv(np.asarray(train.X)) @ np.asarray(train.y)
    X = np.asarray(train.X)
    lp = scipy.optimize.linprog(np.ones(2 * D), A_eq=np.hstack([X, -X]), b_eq=train.y,
                                bounds=(0, None))  # fmt: skip
    out["min_l2"] = np.array(_measures(l2, test, truth))
    out["min_l1"] = np.array(_measures(lp.x[:D] - lp.x[D:], test, truth))
    for alpha in ALPHAS:
        theta0 = flows.product_init(alpha, 0.0, d=D)
        ctx.log(f"GD, USAM and 1-SAM at alpha = {alpha:g} over {len(rhos)} radii")
        out[f"gd_limit/{alpha:g}"] = np.array(
            _measures(analysis.kernel_rich_limit(train, alpha), test, truth)
        )
        for kind, flow in (("discrete", False), ("flow", True)):
            out[f"GD/{kind}/{alpha:g}"] = np.array(
                _measures(_end(flows.GD(), train, theta0, steps, flow), test, truth)
            )
            for name, (make, _, _) in METHODS.items():
                out[f"{name}/{kind}/{alpha:g}"] = np.array(
                    [_measures(_end(make(r), train, theta0, steps, flow), test, truth)
                     for r in rhos]  # fmt: skip
                )
    return out


def draw_sparsity(data: dict):
    fig = new_figure(FULL_WIDTH, 4.8)
    alphas = [float(a) for a in data["alpha"]]
    axes = fig.subplots(2, len(alphas), sharex=True, sharey="row")
    rho = data["rho"]
    for col, alpha in enumerate(alphas):
        for row, (k, label) in enumerate(((3, "test loss"), (0, r"$\Vert\beta\Vert_1$"))):
            ax = axes[row, col]
            for name, (_, color, _) in METHODS.items():
                ax.plot(rho, data[f"{name}/flow/{alpha:g}"][:, k], color=color, lw=1.2)
                ax.plot(rho, data[f"{name}/discrete/{alpha:g}"][:, k], ls="none", marker="o",
                        ms=3, mfc="w", mec=color)  # fmt: skip
            ax.axhline(data[f"GD/flow/{alpha:g}"][k], color=METHOD_COLORS["GD"], lw=1.0)
            gd_limit = {**REFERENCE, "color": METHOD_COLORS["GD"]}
            ax.axhline(data[f"gd_limit/{alpha:g}"][k], **gd_limit)
            ax.axhline(data["min_l1"][k], **{**REFERENCE, "color": OKABE_ITO["green"]})
            ax.axhline(data["min_l2"][k], **REFERENCE)
            ax.set(xscale="log", yscale="log" if row == 0 else "linear")
            if row == 0:  # the methods' range: the min-ℓ1 interpolator may be exact (~1e-30)
                shown = [data[f"{m}/{kind}/{a:g}"][..., k] for m in (*METHODS, "GD")
                         for kind in ("flow", "discrete") for a in alphas]  # fmt: skip
                shown = np.concatenate([np.ravel(v) for v in shown] + [data["min_l2"][k:k + 1]])
                shown = shown[np.isfinite(shown) & (shown > 0)]
                ax.set_ylim(shown.min() / 3, shown.max() * 3)
            if col == 0:
                ax.set_ylabel(label)
            if row == 0:
                ax.set_title(rf"$u\odot v$ from $(\alpha,0)$, $\alpha={alpha:g}$")
            else:
                ax.set_xlabel(r"radius $\rho$")
    handles = [Line2D([], [], color=c, lw=1.2, label=lab) for _, c, lab in METHODS.values()]
    handles += [
        Line2D([], [], ls="none", marker="o", ms=3, mfc="w", mec="0.3",
               label=rf"discrete, $\eta={float(data['lr']):.3g}$, {int(data['steps'])} steps"),
        Line2D([], [], color="0.3", lw=1.2, label=r"flow to the same time $t$"),
        Line2D([], [], color=METHOD_COLORS["GD"], lw=1.0, label="GD flow"),
        Line2D([], [], **{**REFERENCE, "color": METHOD_COLORS["GD"]},
               label=r"GD limit, $\arg\min Q_{\alpha/2}$"),
        Line2D([], [], **{**REFERENCE, "color": OKABE_ITO["green"]},
               label=r"min-$\ell_1$ interpolator" + _below(data)),
        Line2D([], [], **REFERENCE, label=r"min-$\ell_2$ interpolator"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncols=2)
    panel_labels(list(axes.ravel()))
    return fig


def _below(data) -> str:
    """A note for the legend when the min-ℓ1 interpolator's test loss is off the scale."""
    loss = float(data["min_l1"][3])
    return rf" (test loss {loss:.0e})" if loss < 1e-20 else ""


SPARSITY_FIGURE = FigureSpec("sparsity", SUMMARIES["sparsity"], compute_sparsity, draw_sparsity)
