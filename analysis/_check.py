r"""The theorem-check report: claims C1–C4 (docs/theory.md §17), the depth results of
docs/theory.md §8, §10 and §11 and the kernel-to-rich limit of regression (docs/theory.md §18) run
as numerical experiments.

Each check is one row: claim, setting, prediction, measurement, tolerance and a result,
``PASS`` or ``FAIL``. Every prediction comes from an independent source (a closed form, sympy,
an LP, scipy on a reduced ODE written apart in :mod:`analysis._reference`), never from the code
under test, so every row can fail. A solve that stalls (status ``max_steps`` / ``nonfinite``) or
an exception inside a check is a FAIL whose measurement says why, never a silent skip.
"""

import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import flows
from flows.internal import check_jobs, default_jobs, side_by_side

from . import _reference
from ._boundary import critical_alpha, direct_alpha
from ._bounds import l2sam_thresholds
from ._dominant import dominant_at
from ._margin import convergence_rate, direction_cosine, limit_direction, max_margin
from ._path import regime_path
from ._plateau import loss_plateau
from ._regression import kernel_rich_limit

# One saving grid and escape_tol for the rescaled ℓ2-SAM solves of C3 and C4 (one compilation).
PLATEAU_GRID = jnp.linspace(0.0, 40.0, 4001)


@dataclasses.dataclass
class Row:
    """One line of the report."""

    claim: str
    setting: str
    prediction: str
    measurement: str
    tolerance: str
    result: str  # "PASS" or "FAIL"


def _finished(traj):
    """Raise when a solve stalled (status max_steps / nonfinite): the row is then a FAIL."""
    if int(traj.status) in (flows.Status.MAX_STEPS, flows.Status.NONFINITE):
        raise RuntimeError(f"solve ended with status {traj.status_name}")
    return traj


def _row(claim, setting, prediction, tolerance, measure):
    """Run ``measure() -> (measurement, ok)`` and build the row (FAIL on any exception)."""
    try:
        measurement, ok = measure()
        result = "PASS" if ok else "FAIL"
    except Exception as err:  # a broken check must show up as FAIL, with its reason
        measurement, result = f"error: {type(err).__name__}: {err}", "FAIL"
    return Row(claim, setting, prediction, measurement, tolerance, result)


def _fmt(x):
    return np.format_float_scientific(x, precision=2) if x != 0 else "0"


def _vec(v):
    return "(" + ", ".join(f"{x:g}" for x in np.asarray(v)) + ")"


def _separable_data(n=8, d=5, seed=0):
    """Random labels, x_i = y_i u_i with u_i > 0: separable, max-margin solutions ≥ 0."""
    rng = np.random.default_rng(seed)
    y = rng.choice([-1.0, 1.0], n)
    return flows.Dataset(y[:, None] * rng.uniform(0.2, 1.0, (n, d)), y)


# --- C1: L = 1 -> ℓ2 max margin ------------------------------------------------------


def _direction_rows(claim, method, name, data, depth, alpha, ref, other, t1, tol):
    """Plain flow to t1 on a log grid: 1 - cos to ``ref`` must fall below ``tol``, still falling."""
    ts = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1.0, t1, 21)])
    setting = f"{name}, L={depth}, n={data.n}, d={data.d}, alpha={alpha}, logistic, t1={t1:.0e}"

    def measure():
        traj = _finished(
            flows.solve(method, data, flows.balanced_init(alpha, depth, data.d), t1=t1, ts=ts)
        )
        gap = 1 - direction_cosine(traj, ref)
        rate = convergence_rate(traj, ref, model="log", tail=0.5)
        text = (
            f"1-cos at t=1e2,1e{int(np.log10(t1)) // 2},{t1:.0e}: "
            f"{_fmt(gap[3])}, {_fmt(gap[11])}, {_fmt(gap[-1])}; "
            f"(log t)^-k fit k={rate.rate:.2f}"
        )
        ok = gap[-1] <= tol and np.all(np.diff(gap[-5:]) < 0)
        if other is not None:
            gap_other = 1 - direction_cosine(traj, other)[-1]
            text += f"; 1-cos to the other max-margin {_fmt(gap_other)}"
            ok = ok and gap_other > 5 * gap[-1]
        return text + f"; {int(traj.n_steps)} steps", bool(ok)

    return _row(
        claim,
        setting,
        "beta/|beta| -> " + ("l2" if claim == "C1" else "l1") + " max-margin (scipy)",
        f"1-cos <= {tol:g} and decreasing"
        + ("; 5x closer than to l2" if other is not None else ""),
        measure,
    )


def check_c1(quick=False):
    data = _separable_data()
    w2 = max_margin(data, 2)
    t1 = 1e100 if quick else 1e200
    tol = 1e-3 if quick else 1e-4
    methods = [("GD", flows.GD())]
    if not quick:
        methods += [("l2-SAM rho=0.1", flows.L2SAM(0.1)), ("linf-SAM rho=0.1", flows.LinfSAM(0.1))]
    return [_direction_rows("C1", m, name, data, 1, 0.1, w2, None, t1, tol) for name, m in methods]


# --- C2: ℓ∞-SAM, L >= 2: limits chosen by alpha and rho -------------------------------


def _first_blowup(mu, alpha, depth, shift):
    r"""The first coordinate to blow up when each obeys :math:`\dot z_j=\mu_jz_j^{L-1}`,
    :math:`z_j=w_j-s` (GD: s = 0; exact ℓ∞-SAM: s = ρ), from :math:`z_j(0)=\alpha_j-s>0`: at
    :math:`L\ge3` the smallest :math:`\tau_j=z_j(0)^{-(L-2)}/((L-2)\mu_j)`, at :math:`L=2` (no
    blow-up, :math:`z_j=z_j(0)e^{\mu_j\tau}`) the largest rate :math:`\mu_j`, then the largest
    :math:`z_j(0)`. Written out here, apart from analysis.limit_leader, as the row's prediction."""
    mu, z0 = np.asarray(mu, dtype=float), np.asarray(alpha, dtype=float) - shift
    up = z0 > 0
    if depth == 2:
        return int(np.lexsort((np.where(up, z0, -np.inf), np.where(up, mu, -np.inf)))[-1])
    p = depth - 2
    return int(np.argmin(np.where(up, np.abs(z0) ** -p / (p * mu), np.inf)))


def _linf_limit_row(mu, alpha, depth, rho, escape_tol, j_star=None):
    """Rescaled ℓ∞-SAM: limit e_{j*}, j* = argmax_{alpha_j > rho} mu_j (alpha_j - rho)^(L-2)
    (``j_star``: the prediction, by default :func:`_first_blowup`)."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    method = flows.LinfSAM(rho)
    j_star = _first_blowup(mu, alpha, depth, rho) if j_star is None else j_star
    setting = f"linf-SAM, L={depth}, mu={_vec(mu)}, alpha={_vec(alpha)}, rho={rho}"
    minor = " (a minor feature)" if j_star != int(np.argmax(mu)) else " (the major feature)"

    def measure():
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(alpha, depth),
                t1=1e3,
                rescaled=True,
                escape_tol=escape_tol,
            )
        )
        gap = 1 - limit_direction(traj)[j_star]
        text = f"status {traj.status_name} at tau={float(traj.t_end):.4g}; "
        text += f"1-cos(beta, e_{j_star + 1}) = {_fmt(gap)}"
        return text, traj.status_name == "escaped" and gap <= 1e-9

    return _row("C2", setting, f"limit e_{j_star + 1}{minor}", "escaped, 1-cos <= 1e-9", measure)


def _linf_fate_row(mu, alpha, rho, dies=None, stays=None):
    """L = 2: beta_j -> 0 if alpha_j < rho, stays rho^2 if alpha_j = rho (even L); ``dies``,
    ``stays``: the prediction as boolean masks, by default these."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    method = flows.LinfSAM(rho)
    dies = alpha < rho if dies is None else np.asarray(dies)
    stays = alpha == rho if stays is None else np.asarray(stays)
    setting = f"linf-SAM, L=2, mu={_vec(mu)}, alpha={_vec(alpha)}, rho={rho}"

    def measure():
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(alpha, 2),
                t1=1e3,
                rescaled=True,
                escape_tol=1e12,
            )
        )
        b = np.asarray(flows.beta(traj.theta_end))
        dead = float(np.max(np.abs(b[dies])) / rho**2)
        held = float(np.max(np.abs(b[stays] - rho**2)) / rho**2)
        text = f"max|beta_dying|/rho^2 = {_fmt(dead)}, max|beta_held - rho^2|/rho^2 = {_fmt(held)}"
        return text + f" (tau_end={float(traj.t_end):.4g})", dead <= 1e-10 and held <= 1e-8

    pred = f"beta_j -> 0 for j in {(np.flatnonzero(dies) + 1).tolist()}, = rho^2 for j in "
    pred += f"{(np.flatnonzero(stays) + 1).tolist()}"
    return _row("C2", setting, pred, "dying <= 1e-10, held <= 1e-8 (relative)", measure)


def _gd_row(mu, alpha, j=None):
    """GD, L = 2: limit e_j, j = argmax mu (``j``: the prediction) from any start."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    j = int(np.argmax(mu)) if j is None else j
    setting = f"GD, L=2, mu={_vec(mu)}, alpha={_vec(alpha)}"

    def measure():
        traj = _finished(
            flows.solve(
                flows.GD(),
                flows.single_example(mu),
                flows.balanced_init(alpha, 2),
                t1=1e3,
                rescaled=True,
                escape_tol=1e12,
            )
        )
        gap = 1 - limit_direction(traj)[j]
        text = f"status {traj.status_name}; 1-cos(beta, e_{j + 1}) = {_fmt(gap)}"
        return text, traj.status_name == "escaped" and gap <= 1e-9

    return _row(
        "C2",
        setting,
        f"limit e_{j + 1} = e_argmax(mu) for any alpha",
        "escaped, 1-cos <= 1e-9",
        measure,
    )


def _linf_alpha_c_row(mu, rho, bracket_rtol, eps=1e-3, alpha_c=None):
    r"""α_c = ρ for exact ℓ∞-SAM at L = 2, from the flow itself on both sides.

    The coordinates decouple, :math:`w_j=\rho+(\alpha-\rho)e^{\mu_j\tau}` (docs/theory.md §11).
    From α = ρ(1 − ε) every w_j reaches 0 (the largest μ first) and the run collapses when the last,
    :math:`w_1`, is :math:`c\sqrt d\,\alpha` (‖θ‖ = c‖θ₀‖, the others held at 0); from
    α = ρ(1 + ε) it escapes when :math:`\lVert w\rVert=E\sqrt d\,\alpha`. Both end times
    are closed forms (the second by brentq on them). ``critical_alpha`` (which decides these
    starts by the certificates at τ = 0, without a solve) must also return ρ. ``alpha_c``: the
    prediction (default ρ); the starts are alpha_c(1 ∓ ε).
    """
    mu = np.asarray(mu, dtype=float)
    d, c, esc = mu.size, 1e-6, 1e6
    alpha_c = rho if alpha_c is None else alpha_c
    setting = f"linf-SAM, L=2, mu={_vec(mu)}, rho={rho}, uniform alpha = alpha_c(1 -/+ {eps:g})"
    below, above = alpha_c * (1 - eps), alpha_c * (1 + eps)
    with np.errstate(invalid="ignore"):  # NaN (a FAIL) for a prediction alpha_c > rho
        tau_c = np.log((rho - c * np.sqrt(d) * below) / (rho - below)) / mu.min()
    norm = lambda t: np.linalg.norm(rho + (above - rho) * np.exp(mu * t))  # noqa: E731
    tau_e = scipy.optimize.brentq(
        lambda t: norm(t) - esc * np.sqrt(d) * above, 0.0, 50.0, xtol=1e-15, rtol=1e-15
    )

    def measure():
        got = {}
        for alpha in (below, above):
            got[alpha] = _finished(
                flows.solve(
                    flows.LinfSAM(rho),
                    flows.single_example(mu),
                    flows.balanced_init(alpha, 2, d),
                    t1=1e3,
                    rescaled=True,
                    collapse_tol=c,
                    escape_tol=esc,
                    rtol=1e-10,
                )
            )
        lo, hi = got[below], got[above]
        err = max(abs(float(lo.t_end) / tau_c - 1), abs(float(hi.t_end) / tau_e - 1))
        a_c = critical_alpha(flows.LinfSAM(rho), mu, bracket_rtol=bracket_rtol)
        text = (
            f"{lo.status_name} at tau={float(lo.t_end):.8g}, {hi.status_name} at "
            f"tau={float(hi.t_end):.8g} (rel. err {_fmt(err)}); critical_alpha = {a_c:.10g}"
        )
        ok = lo.status_name == "collapsed" and hi.status_name == "escaped" and err <= 1e-6
        return text, bool(ok and abs(a_c / alpha_c - 1) <= 2 * bracket_rtol)

    return _row(
        "C2",
        setting,
        f"alpha_c = {alpha_c:g} (rho = {rho}): collapse at tau={tau_c:.8g}, "
        f"escape at tau={tau_e:.8g} (closed form)",
        f"statuses, tau rel. err <= 1e-6; critical_alpha rel. err <= {2 * bracket_rtol:g}",
        measure,
    )


def check_c2(quick=False):
    mu = [1.0, 2.0, 3.0, 4.0]
    # L = 2 escapes exponentially: stop at 1e12 |theta0| so that the direction has converged.
    rows = [_linf_limit_row(mu, [0.3, 0.1, 0.06, 0.04], 2, 0.1, 1e12)]
    if quick:
        return rows
    return rows + [
        _linf_fate_row(mu, [0.3, 0.1, 0.06, 0.04], 0.1),
        _linf_limit_row(mu, [0.3, 0.3, 0.3, 0.3], 2, 0.1, 1e12),
        # L = 3 blows up in finite tau; escape at 1e3 |theta0| (the solve fails near the pole).
        _linf_limit_row(mu, [0.6, 0.25, 0.12, 0.11], 3, 0.1, 1e3),
        _gd_row(mu, [0.3, 0.1, 0.06, 0.04]),
        _linf_alpha_c_row(mu, 0.1, 1e-8),
    ]


# --- C3: ℓ2-SAM, L = 2 -> ℓ1 max margin -----------------------------------------------


def _l1_single_row(mu, rho, alpha, ref=None):
    r"""ℓ2-SAM, L = 2, one example: β/‖β‖ → the ℓ1 max-margin ``ref`` (default: the HiGHS LP),
    at the GD-phase rate :math:`4(\mu_{(d)}-\mu_{(d-1)})`."""
    mu = np.asarray(mu, dtype=float)
    single = flows.single_example(mu)
    ref = max_margin(single, 1) if ref is None else np.asarray(ref, dtype=float)
    setting = f"l2-SAM rho={rho:g}, L=2, mu={_vec(mu)}, alpha={alpha} (R2), rescaled, escape 1e12"

    def measure():
        traj = _finished(
            flows.solve(
                flows.L2SAM(rho),
                single,
                flows.balanced_init(alpha, 2, mu.size),
                t1=1e3,
                rescaled=True,
                escape_tol=1e12,
                ts=PLATEAU_GRID,
            )
        )
        gap = 1 - float(limit_direction(traj) @ ref)
        rate = convergence_rate(traj, ref, model="exp", tail=0.3)
        top = np.sort(mu)
        expect = 4 * (top[-1] - top[-2])
        text = (
            f"1-cos = {_fmt(gap)} at tau={float(traj.t_end):.4g}; exp rate {rate.rate:.4f} "
            f"(GD-phase asymptote 4(mu5-mu4) = {expect:g})"
        )
        ok = traj.status_name == "escaped" and gap <= 1e-9
        return text, bool(ok and abs(rate.rate / expect - 1) <= 0.02)

    return _row(
        "C3",
        setting,
        f"beta/|beta| -> l1 max-margin {_vec(np.round(ref, 12))} (HiGHS LP)",
        "1-cos <= 1e-9; rate within 2%",
        measure,
    )


def check_c3(quick=False):
    rows = [_l1_single_row([1.0, 2.0, 3.0, 4.0, 5.0], 1.0, 0.5)]
    if quick:
        return rows
    data = _separable_data()
    t1 = 1e200
    rows.append(
        _direction_rows(
            "C3",
            flows.L2SAM(0.05),
            "l2-SAM rho=0.05",
            data,
            2,
            0.1,
            max_margin(data, 1),
            max_margin(data, 2),
            t1,
            1e-2,
        )
    )
    return rows


# --- C4: ℓ2-SAM, L = 2, regimes in alpha ---------------------------------------------


def _alpha_c_row(mu, rho, bracket_rtol, reference=None, found=None):
    """α_c of ℓ2-SAM, L = 2 (:func:`critical_alpha`) against ``reference()`` (default: the
    scalar reduction bisected between the sympy bounds); the value found goes to ``found["c"]``."""
    bounds = l2sam_thresholds(mu, rho)
    if reference is None:
        reference = lambda: _reference.l2sam_alpha_c(mu, rho, bounds.all_shrink, bounds.all_grow)  # noqa: E731

    def measure():
        b = critical_alpha(flows.L2SAM(rho), mu, bracket_rtol=bracket_rtol, full_output=True)
        if found is not None:
            found["c"] = b.alpha
        ref = reference()
        err = abs(b.alpha / ref - 1)
        text = f"alpha_c = {b.alpha:.10f} ({b.solves} solves); reduction {ref:.10f}"
        return text + f" (rel. err {_fmt(err)})", bool(err <= 2 * bracket_rtol)

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}",
        "alpha_c of the scalar reduction dT/dtau = 1/|mu w| (scipy, bisected between the "
        f"sympy bounds {bounds.all_shrink:.6f}, all shrink, and "
        f"{bounds.all_grow:.6f}, all grow)",
        f"rel. err <= {2 * bracket_rtol:g}",
        measure,
    )


def _alpha_s_row(mu, rho, bracket_rtol, predicted=None, found=None):
    """α_s of ℓ2-SAM, L = 2 (:func:`direct_alpha`) against ``predicted`` (default: sympy); the
    value found goes to ``found["s"]``."""
    predicted = l2sam_thresholds(mu, rho).direct if predicted is None else predicted

    def measure():
        b = direct_alpha(flows.L2SAM(rho), mu, bracket_rtol=bracket_rtol, full_output=True)
        if found is not None:
            found["s"] = b.alpha
        err = abs(b.alpha / predicted - 1)
        return f"alpha_s = {b.alpha:.10f} (rel. err {_fmt(err)})", bool(err <= 2 * bracket_rtol)

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}",
        f"sequential/direct boundary = rho(mu5+mu4)/(sqrt2|mu|) = {predicted:.10f} (sympy)",
        f"rel. err <= {2 * bracket_rtol:g}",
        measure,
    )


def _regimes_row(mu, rho, points):
    """``points``: regime name -> α, each a start where that regime is predicted."""
    method = flows.L2SAM(rho)

    def measure():
        got = {name: regime_path(method, mu, a).regime for name, a in points.items()}
        text = ", ".join(f"alpha={points[n]:.6g}: {g}" for n, g in got.items())
        return text, all(g == n for n, g in got.items())

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}, alpha = 0.99 all-shrink, 1.01 all-grow, "
        "1.01 alpha_s (sympy)",
        ", ".join(points),
        "each as predicted",
        measure,
    )


def _scale_row(mu, rho, lam, bracket_rtol, found, alpha_c=None, alpha_s=None):
    r"""α_c and α_s of ℓ2-SAM at λρ against the reduction's α_c at λρ (``alpha_c()``; bisected
    between the sympy bounds at λρ) and the sympy α_s at λρ (``alpha_s``), with their ratios to
    the values found at ρ (``found``, rays α = kρ)."""
    bounds = l2sam_thresholds(mu, lam * rho)
    if alpha_c is None:
        alpha_c = lambda: _reference.l2sam_alpha_c(
            mu, lam * rho, bounds.all_shrink, bounds.all_grow
        )  # noqa: E731
    alpha_s = bounds.direct if alpha_s is None else alpha_s

    def measure():
        m = flows.L2SAM(lam * rho)
        c = critical_alpha(m, mu, bracket_rtol=bracket_rtol)
        s = direct_alpha(m, mu, bracket_rtol=bracket_rtol)
        ref = alpha_c()
        err = max(abs(c / ref - 1), abs(s / alpha_s - 1))
        text = f"alpha_c = {c:.10f} (reduction {ref:.10f}), alpha_s = {s:.10f}"
        text += f" (rel. err {_fmt(err)}); ratios to rho={rho}: {c / found['c']:.10f}, "
        return text + f"{s / found['s']:.10f}", bool(err <= 2 * bracket_rtol)

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={lam * rho} (= {lam} x {rho})",
        f"alpha_c of the scalar reduction at rho={lam * rho}; alpha_s = {alpha_s:.10f} (sympy); "
        f"ratios {lam} (rays alpha = k rho)",
        f"rel. err <= {2 * bracket_rtol:g}",
        measure,
    )


def _sequence_row(mu, rho, a, a_c, reference=None):
    """The j† path of ℓ2-SAM, L = 2, from α = ``a`` (:func:`regime_path`) against
    ``reference()`` (default: the scalar reduction, :func:`analysis._reference.scalar_switches`)."""
    method = flows.L2SAM(rho)
    if reference is None:
        reference = lambda: _reference.scalar_switches(mu, a, rho, 200.0)  # noqa: E731

    def measure():
        expected, times = reference()
        p = regime_path(method, mu, a)
        err = np.max(np.abs(p.times / times - 1)) if len(p.times) == len(times) else np.inf
        seq = "->".join(str(j + 1) for j in p.sequence)
        text = f"j† = {seq} at tau = " + ", ".join(f"{t:.6g}" for t in p.times)
        text += f" (reference {'->'.join(str(j + 1) for j in expected)}; times {_fmt(err)})"
        return text, bool(p.sequence == list(expected) and err <= 1e-6)

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}, alpha = {a / a_c:g} alpha_c (R2)",
        "j† path of the scalar reduction dT/dtau = 1/|mu w| (scipy)",
        "same sequence, times rel. err <= 1e-6",
        measure,
    )


def _saddle_loss(mu_j, rho):
    """The loss at the R2 saddle w = (rho/sqrt2) e_j: beta_j = rho^2/2, l(mu_j rho^2/2)."""
    return float(np.log1p(np.exp(-mu_j * rho**2 / 2)))


def _plateau_row(mu, rho, a, height=_saddle_loss):
    """Just above α_c the path lingers at a saddle: the loss plateau at the height
    ``height(mu_j, rho)``, j = j† of the scalar reduction in the middle of the plateau."""

    def measure():
        traj = _finished(
            flows.solve(
                flows.L2SAM(rho),
                flows.single_example(mu),
                flows.balanced_init(a, 2, len(mu)),
                t1=1e3,
                rescaled=True,
                ts=PLATEAU_GRID,
                escape_tol=1e12,
            )
        )
        pl = loss_plateau(traj, band=1e-3)
        # the saddle's index: j† of the scalar reduction in the middle of the plateau
        seq, times = _reference.scalar_switches(mu, a, rho, float(PLATEAU_GRID[-1]))
        j = seq[int(np.searchsorted(times, 0.5 * (pl.start + pl.end)))]
        predicted = height(mu[j], rho)
        text = (
            f"plateau tau in [{pl.start:.3g}, {pl.end:.3g}], height {pl.height:.8f} at j†={j + 1} "
            f"(predicted {predicted:.8f})"
        )
        return text, bool(abs(pl.height / predicted - 1) <= 1e-3 and pl.duration > 1.0)

    return _row(
        "C4",
        f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}, alpha = alpha_c(1+1e-6), rescaled, band 1e-3",
        "loss plateau at the saddle beta_j = rho^2/2: height l(mu_j rho^2/2)",
        "height rel. err <= 1e-3, duration > 1",
        measure,
    )


def check_c4(quick=False):
    mu = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    rho, lam = 1.0, 3.0
    bracket_rtol = 1e-6 if quick else 1e-8
    bounds = l2sam_thresholds(mu, rho)
    found = {}
    rows = [
        _alpha_c_row(mu, rho, bracket_rtol, found=found),
        _alpha_s_row(mu, rho, bracket_rtol, found=found),
    ]
    # The three regimes where the sympy bounds decide them, independently of the searches.
    points = {
        "collapse": 0.99 * bounds.all_shrink,
        "sequential": 1.01 * bounds.all_grow,
        "direct": 1.01 * bounds.direct,
    }
    rows.append(_regimes_row(mu, rho, points))
    if quick:
        return rows
    rows.append(_scale_row(mu, rho, lam, bracket_rtol, found))
    a_c = found.get("c", float("nan"))  # a failed search fails the rows below too
    rows += [_sequence_row(mu, rho, a, a_c) for a in (a_c * (1 + 1e-3), 2 * a_c)]
    # The R2 plateau: just above alpha_c the path lingers at the saddle w = (rho/sqrt2) e_j,
    # where beta_j = rho^2/2 and the loss is l(mu_j rho^2 / 2).
    rows.append(_plateau_row(mu, rho, a_c * (1 + 1e-6)))
    return rows


# --- depth (docs/theory.md §8, §10, §11): closed forms at L >= 3 ---------------------------


def _blowup_row(method, name, mu, alpha, depth, shift):
    r"""t_end of an escape at E = 1e3 against the closed-form blow-up of the winning coordinate.

    The winner :math:`k` obeys :math:`\dot z=\mu_kz^{L-1}` with :math:`z=w_k-s` (GD: s = 0;
    ℓ∞-SAM: s = ρ), so it reaches :math:`W` at
    :math:`\tau=(z_0^{-(L-2)}-(W-s)^{-(L-2)})/((L-2)\mu_k)`, with :math:`W` from the escape norm
    :math:`\sqrt L\,W\approx E\lVert\theta_0\rVert` (the other coordinates stay finite).
    """
    mu, alpha = np.asarray(mu), np.broadcast_to(np.asarray(alpha, dtype=float), (len(mu),))
    k = _first_blowup(mu, alpha, depth, shift)
    esc = 1e3
    w_end = esc * np.sqrt(np.sum(alpha**2))
    p = depth - 2
    predicted = ((alpha[k] - shift) ** -p - (w_end - shift) ** -p) / (p * mu[k])
    setting = f"{name}, L={depth}, mu={_vec(mu)}, alpha={_vec(alpha)}, rescaled, escape 1e3"

    def measure():
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(alpha, depth),
                t1=10 * predicted,
                rescaled=True,
                escape_tol=esc,
                rtol=1e-10,
                atol=1e-12,
            )
        )
        err = abs(float(traj.t_end) / predicted - 1)
        lead = int(dominant_at(traj.theta_end))
        text = (
            f"status {traj.status_name}, tau_end = {float(traj.t_end):.10g} (rel. err {_fmt(err)})"
        )
        return (
            text + f", leader {lead + 1}",
            traj.status_name == "escaped" and err <= 1e-6 and lead == k,
        )

    return _row(
        "L>=3",
        setting,
        f"coordinate {k + 1} blows up first, at tau = {predicted:.10g} (closed form)",
        "escaped, rel. err <= 1e-6, same leader",
        measure,
    )


def _odd_depth_row(mu, rho, depth):
    r"""ℓ2-SAM at odd L has no α_c, for a reason: :math:`dw_j/d\tau=\mu_j\hat w_j^{L-1}\ge0`,
    no weight ever decreases. :func:`critical_alpha` must report none after a scan that
    classified its points (not a failed search), and the run from the scan's smallest start
    (:math:`\rho\,2^{-8+1/\pi}`) must escape with every w_j non-decreasing on 201 points of
    its dense output, and a field >= 0 there."""
    mu = np.asarray(mu, dtype=float)
    method = flows.L2SAM(rho)
    lo = rho * 2 ** (-8 + 1 / np.pi)  # the default scan's lowest point (critical_alpha)

    def measure():
        b = critical_alpha(method, mu, depth=depth, full_output=True)
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(lo, depth, mu.size),
                t1=1e6,
                rescaled=True,
                dense=True,
            )
        )
        ts = np.linspace(0.0, float(traj.t_end), 201)
        data = flows.single_example(mu)
        # one compiled program each for the 201 points (not 201 eager evaluations)
        thetas = np.asarray(jax.jit(jax.vmap(traj.evaluate))(ts))
        drop = float(np.max(-np.diff(thetas, axis=0) / thetas[:-1]))
        velocity = lambda th: flows.rescaled_velocity(method, data, "logistic", th)  # noqa: E731
        speed = float(np.min(jax.jit(jax.vmap(velocity))(thetas)))
        text = f"exists={b.exists}, alpha_c={b.value} ({b.solves} solves); from alpha={lo:.4g}: "
        text += f"{traj.status_name} at tau={float(traj.t_end):.4g}, largest relative decrease "
        text += f"{_fmt(max(drop, 0.0))}, min dw/dtau {_fmt(speed)}"
        ok = not b.exists and b.solves > 0 and traj.status_name == "escaped"
        return text, bool(ok and drop <= 0.0 and speed >= 0.0)

    return _row(
        "L>=3",
        f"l2-SAM rho={rho:g}, L={depth}, mu={_vec(mu)}",
        f"no collapse at odd L (dw/dtau = mu what^(L-1) >= 0): no alpha_c; from alpha={lo:.4g} "
        "no weight ever decreases",
        "critical_alpha reports none after its scan; escaped, w non-decreasing, dw/dtau >= 0",
        measure,
    )


def _path_row(mu, rho, alpha, depth, reference=None):
    """The j† path of ℓ2-SAM at L >= 3 (:func:`regime_path`) against ``reference()`` (default:
    the reduced flow in w, :func:`analysis._reference.l2sam_switches`, to max w = 1e6): the same
    sequence, ending on the major coordinate, and the same switch times."""
    mu = np.asarray(mu, dtype=float)
    if reference is None:
        reference = lambda: _reference.l2sam_switches(mu, alpha, rho, depth, w_max=1e6)  # noqa: E731

    def measure():
        expected, times = reference()
        p = regime_path(flows.L2SAM(rho), mu, alpha, depth=depth)
        err = np.max(np.abs(p.times / times - 1)) if len(p.times) == len(times) else np.inf
        seq = "->".join(str(j + 1) for j in p.sequence)
        text = f"{p.regime}, j† = {seq} at tau = " + ", ".join(f"{t:.6g}" for t in p.times)
        text += f" (reference {'->'.join(str(j + 1) for j in expected)}; times {_fmt(err)})"
        ok = p.sequence == list(expected) and p.sequence[-1] == int(np.argmax(mu))
        return text, bool(ok and err <= 1e-6)

    return _row(
        "L>=3",
        f"l2-SAM rho={rho:g}, L={depth}, mu={_vec(mu)}, alpha={alpha}",
        "j† path of the reduced flow in w (scipy), ending on the major coordinate "
        "(q_j = mu_j w_j^(L-2) keep their order)",
        "same sequence, times rel. err <= 1e-6",
        measure,
    )


def check_deep(quick=False):
    mu = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    rows = [
        _blowup_row(flows.GD(), "GD", mu, 0.5, 3, 0.0),
        _blowup_row(flows.GD(), "GD", mu, 0.5, 4, 0.0),
        # ℓ∞-SAM, L = 3: a minor coordinate with a larger start wins (claim C2's corollary).
        _blowup_row(
            flows.LinfSAM(0.1), "linf-SAM rho=0.1", mu[:4], [0.6, 0.25, 0.12, 0.11], 3, 0.1
        ),
    ]
    if quick:
        return rows
    rows.append(_odd_depth_row(mu, 1.0, 3))
    rows += [_path_row(mu, 1.0, 0.5, depth) for depth in (3, 4)]
    return rows


def _kernel_rich_row(data, alpha):
    """GD flow on the squared loss from the u⊙v start (α, 0) ends at the minimiser of Woodworth
    et al.'s potential Q_{α/2} on Xβ = y (docs/theory.md §18), computed on the dual."""
    setting = f"u*v GD flow, squared loss, n={data.n}, d={data.d}, alpha={alpha:g}, t=1e4"

    def measure():
        predicted = kernel_rich_limit(data, alpha)
        traj = _finished(flows.solve(flows.GD(), data, flows.product_init(alpha, 0.0, d=data.d),
                                     t1=1e4, loss="squared", rtol=1e-12, atol=1e-14,
                                     max_steps=200_000))  # fmt: skip
        err = np.max(np.abs(np.asarray(traj.beta[-1]) - predicted)) / np.max(np.abs(predicted))
        return f"max|beta - beta_Q| / max|beta_Q| = {_fmt(float(err))}", bool(err <= 1e-9)

    prediction = "argmin Q_alpha s.t. X beta = y"
    return _row("regression", setting, prediction, "<= 1e-9 relative", measure)


def check_regression(quick=False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 6))
    data = flows.Dataset(X, X @ np.array([1.0, 0.0, 0.0, -0.5, 0.0, 0.0]), regression=True)
    return [_kernel_rich_row(data, alpha) for alpha in ((0.1,) if quick else (0.1, 1.0))]


CHECKS = (check_c1, check_c2, check_c3, check_c4, check_deep, check_regression)
# CPU seconds of each check in full mode (measured on a Xeon core): the longest are handed out
# first when the checks run side by side. A check not listed counts as 0.
_SECONDS = {"check_deep": 8.8, "check_c4": 7.5, "check_c2": 4.6, "check_c1": 3.4,
            "check_c3": 1.3, "check_regression": 0.8}  # fmt: skip


def run_checks(quick: bool = False, progress: bool = False, jobs=None, checks=CHECKS) -> list:
    """Run ``checks`` (default: C1–C4, the depth and regression checks; ``quick``: looser
    tolerances and fewer points) and return their rows, in the order of ``checks``.

    ``jobs``: processes running the checks side by side (:func:`flows.internal.side_by_side`:
    the same rows, bit for bit), an integer >= 1, or None: one per core. ``progress``: one
    line on stderr as each check starts and ends.
    """
    jobs = check_jobs(jobs)
    if jobs is None:
        jobs = default_jobs(len(checks))
    n = len(checks)
    order = sorted(range(n), key=lambda i: -_SECONDS.get(getattr(checks[i], "__name__", ""), 0))
    calls = [(_run_check, (checks[i], f"[{i + 1}/{n}]", quick, progress)) for i in order]
    rows = [None] * n
    for i, got in zip(order, side_by_side(calls, jobs), strict=True):
        rows[i] = got
    return [row for part in rows for row in part]


def _run_check(check, label: str, quick: bool, progress: bool) -> list:
    """The rows of one check, with its progress lines."""
    name = check.__name__.removeprefix("check_")
    start = time.perf_counter()
    if progress:
        print(f"{label} {name} ...", file=sys.stderr, flush=True)
    rows = check(quick)
    if progress:
        print(f"{label} {name}: done in {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)  # fmt: skip
    return rows


def format_table(rows) -> str:
    """The rows as a plain-text table, one line per check."""
    cols = [f.name for f in dataclasses.fields(Row)]
    lines = [" | ".join(c.upper() for c in cols)]
    lines += [" | ".join(getattr(r, c) for c in cols) for r in rows]
    return "\n".join(lines)


def failed(rows) -> bool:
    """True when any row is a FAIL."""
    return any(r.result == "FAIL" for r in rows)
