r"""The LE-SAM figure (figures/_lesam.py): its quick data agree with :mod:`analysis` at points next
to the regime boundaries, and each statement of its README caption holds.

Independent sources: ℓ2-SAM(ρ_max) classified on its own (the large-σ limit of LE-SAM,
docs/theory.md §5: the cap binds wherever ‖∇L‖ < σ/ρ_max), with its α_c from the scalar reduction
of docs/theory.md §9
(analysis._reference.l2sam_alpha_c) and its α_direct in closed form (:func:`_l2_direct`); the
small-σ scaling of the uncapped flow: with ℓ' ≈ -1/2 (margins ≪ 1) the rescaled flow
dw/dτ = μ⊙ŵ, ŵ = w − σ μ⊙w / (2|ℓ'| ‖μ⊙w‖²), is invariant under (w, σ) → (λw, λ²σ), so both
boundaries obey α ∝ √σ as σ → 0 (constants by a scipy bisection of that flow,
:func:`_reduced_lesam_regime`); and a scipy/numpy re-implementation of the plain flows of the
sharpness panel (:func:`_reference_run`).
"""

import functools

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.special

import analysis
import flows
from analysis import _reference
from figures import _lesam
from tests.helpers import gallery_caption, numpy_perturbation, published_data, quick_data

MU = _lesam.MU
REGIMES = analysis.REGIMES


@pytest.fixture(scope="module")
def quick(quick_figures):
    """``python -m figures --quick`` (made once): the LE-SAM figure's files and saved data."""
    out, _ = quick_figures
    names = ["lesam", "lesam_flatness"]  # the regime map; the radius and flatness runs
    data = quick_data(quick_figures, names)
    files = [out / f"{n}.{ext}" for n in names for ext in ("pdf", "png")]
    return files, {**data["lesam"], **data["lesam_flatness"]}


def _regime(method, alpha):
    return analysis.regime(method, MU, float(alpha), collapse_tol=_lesam.COLLAPSE_TOL)


def _l2_direct(rho):
    r"""ℓ2-SAM's sequential/direct boundary at L = 2 on MU, in closed form (docs/theory.md §9).

    At τ = 0 every w_j = α, so dw_j/dτ = μ_j α − ρμ_j²/(√2‖μ‖): the major index d leads from
    τ = 0⁺ iff μ_d(α − cμ_d) > μ_j(α − cμ_j), i.e. α > c(μ_d + μ_j), for every j < d
    (c = ρ/(√2‖μ‖)): α_direct = ρ(μ_(d) + μ_(d−1))/(√2‖μ‖), 0.3·9/(√2·√55) ≈ 0.25743 here.
    """
    top2 = np.sort(MU)[-2:].sum()
    return rho * top2 / (np.sqrt(2.0) * np.linalg.norm(MU))


def _l2_alpha_c(rho):
    """ℓ2-SAM's α_c at L = 2 on MU: the scalar reduction at ρ = 1, times ρ (α_c = k_c ρ)."""
    return rho * _reference.l2sam_alpha_c(mu=tuple(float(m) for m in MU))


def test_writes_pdf_and_png(quick):
    paths, _ = quick
    assert sorted(p.name for p in paths) == [
        "lesam.pdf", "lesam.png", "lesam_flatness.pdf", "lesam_flatness.png"
    ]  # fmt: skip
    assert all(p.stat().st_size > 1000 for p in paths)


def test_map_is_at_the_public_defaults(quick):
    _, data = quick
    assert float(data["rho_max"]) == 0.3 and float(data["sigma_default"]) == 0.35
    assert not np.any(data["regime"] == REGIMES.index("undetermined"))
    assert MU.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]  # the μ of the figures' and checks' reductions
    assert float(data["l2_direct"]) == pytest.approx(_l2_direct(0.3), rel=1e-12)
    assert _l2_direct(0.3) == pytest.approx(0.3 * 9 / (np.sqrt(2) * np.sqrt(55)), rel=1e-15)


def test_large_sigma_columns_are_l2sam_at_rho_max(quick):
    """Caption: for σ ≳ 0.22 the map's regimes are ℓ2-SAM(ρ_max)'s, cell by cell."""
    _, data = quick
    alpha_c = _l2_alpha_c(0.3)  # scalar reduction (docs/theory.md §9), α_c = k_c ρ
    alpha_d = _l2_direct(0.3)  # closed form
    a = data["alpha"]
    l2 = np.where(a < alpha_c, 0, np.where(a < alpha_d, 1, 2))
    cols = data["sigma"] >= 0.22
    assert cols.sum() >= 3
    assert np.array_equal(data["regime"][:, cols], np.repeat(l2[:, None], cols.sum(), axis=1))


def test_map_cells_next_to_each_boundary_agree_with_the_reduced_flow(quick):
    """Both cells of every α-adjacent pair with different regimes, in three σ columns, against
    the reduced LE-SAM flow with the exact ℓ'(m) and the cap (:func:`_reduced_lesam_regime`)."""
    _, data = quick
    code, alphas, sigmas = data["regime"], data["alpha"], data["sigma"]  # code: (alpha, sigma)
    checked = []
    for j in (0, code.shape[1] // 2, code.shape[1] - 1):
        for i in np.flatnonzero(code[1:, j] != code[:-1, j]):
            for k in (i, i + 1):
                want = _reduced_lesam_regime(float(alphas[k]), float(sigmas[j]), scale_free=False)
                assert REGIMES[code[k, j]] == want, (alphas[k], sigmas[j])
                checked.append(want)
    assert len(checked) >= 8  # collapse|sequential and sequential|direct in each column, or so
    assert set(checked) == {"collapse", "sequential", "direct"}


def test_public_default_regimes_are_l2sam_at_rho_max():
    """Caption: at σ = 0.35 the boundaries are ℓ2-SAM(ρ_max)'s (1% either side of each)."""
    alpha_c = _l2_alpha_c(0.3)  # scalar reduction (docs/theory.md §9), α_c = k_c ρ
    alpha_d = _l2_direct(0.3)  # closed form
    cases = {0.99 * alpha_c: "collapse", 1.01 * alpha_c: "sequential"}
    cases.update({0.99 * alpha_d: "sequential", 1.01 * alpha_d: "direct"})
    for a, want in cases.items():
        assert _regime(flows.L2SAM(0.3), a) == want
        assert _regime(flows.LESAM(0.35, 0.3), a) == want


def test_small_sigma_keeps_a_sequential_band_minor_first():
    """Caption: for small σ both boundaries follow √σ, with a sequential band between
    α ≈ k_c√σ and k_d√σ (k_c ≈ 0.2746, k_d ≈ 0.4045: :func:`_scale_free_constants`); inside it
    j† starts on a minor index and ends on argmax μ."""
    sigma = 1e-3
    for k, want in ((0.26, "collapse"), (0.34, "sequential"), (0.42, "direct")):
        assert _regime(flows.LESAM(sigma, 0.3), k * np.sqrt(sigma)) == want
    path = analysis.regime_path(
        flows.LESAM(sigma, 0.3), MU, 0.34 * np.sqrt(sigma), collapse_tol=_lesam.COLLAPSE_TOL
    )
    assert path.sequence[0] < MU.size - 1 and path.sequence[-1] == MU.size - 1


def _reduced_lesam_regime(alpha, sigma, scale_free):
    r"""Regime of balanced single-example LE-SAM(σ, ρ_max), L = 2, on MU from w(0) = α (scipy).

    Derived from docs/theory.md §2, §4 and §5: with w⁽¹⁾ = w⁽²⁾ = w, m = ⟨μ, w²⟩,
    g = ℓ'(m)(μ⊙w, μ⊙w), so ‖g‖ = √2|ℓ'|N, N = ‖μ⊙w‖, and the perturbed layer is
    ŵ = w − ρ_t μ⊙w/(√2N) with ρ_t = min(σ/‖g‖, ρ_max) (ϱ = 1e-12 dropped); the rescaled
    flow dw/dτ = μ⊙ŵ gives, in z = log(w/α), dz_j/dτ = μ_j(1 − aμ_j),
    a = min(σ/(2|ℓ'(m)|N²), ρ_max/(√2N)).
    ``scale_free``: the small-σ flow of the module docstring, ℓ' = −1/2 and no cap: a = σ/N².

    Decided by certificates, no horizon: (i) escape and a settled leader once
    a(μ_d + μ_(d−1)) ≤ 1 for good, i.e. N ≥ ρ_max(μ_d + μ_(d−1))/√2 (a ≤ ρ_max/(√2N) always)
    or, scale-free, N² ≥ σ(μ_d + μ_(d−1)): then every z_j grows, so N grows, and
    d(z_d − z_j)/dτ = (μ_d − μ_j)(1 − a(μ_d + μ_j)) ≥ 0, so the leader never changes again;
    (ii) collapse once aμ_1 > 1 for good, i.e. N² < σμ_1 and N < ρ_max μ_1/√2 (2|ℓ'| ≤ 1 for
    m ≥ 0) or, scale-free, N² < σμ_1: every z_j then shrinks, and N with it. "direct" if
    argmax_j z_j is d at every sampled τ > 0 (16 samples in each solver step), else "sequential".
    """
    mu, rho_max = MU, _lesam.RHO_MAX
    top2 = mu[-1] + mu[-2]

    def norm(z):
        return np.linalg.norm(mu * alpha * np.exp(z))

    def a_of(z):
        n = norm(z)
        if scale_free:
            return sigma / n**2
        lp = scipy.special.expit(-np.sum(mu * (alpha * np.exp(z)) ** 2))  # |ℓ'(m)|
        return min(sigma / (2 * lp * n**2), rho_max / (np.sqrt(2.0) * n))

    def settled(t, z):
        n = norm(z)
        return n**2 - sigma * top2 if scale_free else n - rho_max * top2 / np.sqrt(2.0)

    def collapsed(t, z):
        n = norm(z)
        gap = n**2 - sigma * mu[0]
        return gap if scale_free else max(gap, n - rho_max * mu[0] / np.sqrt(2.0))

    settled.terminal = collapsed.terminal = True
    z0 = np.zeros(mu.size)
    if collapsed(0.0, z0) < 0:
        return "collapse"
    if settled(0.0, z0) > 0:  # every gap z_d - z_j grows from 0 at once
        return "direct"
    sol = scipy.integrate.solve_ivp(
        lambda t, z: mu * (1 - a_of(z) * mu),
        (0.0, 1e3),
        z0,
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
        events=[settled, collapsed],
        dense_output=True,
    )
    assert sol.status == 1, sol.message  # a certificate was reached
    if sol.t_events[1].size:
        return "collapse"
    frac = np.arange(16) / 16
    ts = np.append((sol.t[:-1, None] + np.diff(sol.t)[:, None] * frac).ravel()[1:], sol.t[-1])
    z = sol.sol(ts)
    return "direct" if np.all(z[-1] > np.max(z[:-1], axis=0)) else "sequential"


def _bisect(below, lo, hi, rtol=1e-7):
    """Geometric bisection of the point where ``below`` turns from True (at lo) to False."""
    assert below(lo) and not below(hi)
    while hi / lo - 1 > rtol:
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return np.sqrt(lo * hi)


@functools.cache
def _scale_free_constants():
    """(k_c, k_d): the boundaries α = k√σ of the scale-free flow, bisected in α at σ = 1."""
    regime = lambda a: _reduced_lesam_regime(a, 1.0, scale_free=True)  # noqa: E731
    k_c = _bisect(lambda a: regime(a) == "collapse", 0.05, 1.0)
    k_d = _bisect(lambda a: regime(a) != "direct", k_c, 1.0)
    return k_c, k_d


def test_collapse_boundary_scales_as_root_sigma():
    """σ_c(2α) / σ_c(α) → 4 as σ → 0 (the (w, σ) → (λw, λ²σ) invariance), along σ as drawn;
    the figure's boundaries at α = 0.01 (collapse) and 0.015 (direct) against a scipy bisection
    of the same reduced flow, and their √σ constants against the scale-free flow's."""
    s1, s2 = (_lesam._sigma_boundary(a, "collapse") for a in (0.01, 0.02))
    s_d = _lesam._sigma_boundary(0.015, "direct")
    assert s2 / s1 == pytest.approx(4.0, rel=0.01)
    # The reduced flow with the exact ℓ'(m) and the cap, bisected in σ (large σ: the "below"
    # side) to 1e-7. analysis.boundary stops at a bracket |hi − lo| ≤ 1e-4·|lo| (the figure's
    # rtol), so its value is within 1e-4 of the true boundary; 1e-7 of ours on top.
    exact = {
        "collapse": _bisect(
            lambda s: _reduced_lesam_regime(0.01, s, False) != "collapse", 1e-4, 1e-2
        ),
        "direct": _bisect(lambda s: _reduced_lesam_regime(0.015, s, False) == "direct", 1e-4, 1e-2),
    }
    assert s1 == pytest.approx(exact["collapse"], rel=1e-4 + 1e-7)
    assert s_d == pytest.approx(exact["direct"], rel=1e-4 + 1e-7)
    # The caption's √σ constants: the scale-free flow drops the finite-margin factor
    # 2|ℓ'(m)| = 1 − m/2 + O(m²), an effective budget σ(1 + m/2), so α/√σ sits ≈ m/4 above k,
    # with m ≈ Σμ α² (the start's margin): 3.8e-4 at α = 0.01, 8.4e-4 at α = 0.015. Tolerance:
    # twice that first-order shift, plus the search's 1e-4 (5e-5 on √σ).
    k_c, k_d = _scale_free_constants()
    for alpha, sigma, k in ((0.01, s1, k_c), (0.015, s_d, k_d)):
        m0 = MU.sum() * alpha**2
        assert alpha / np.sqrt(sigma) == pytest.approx(k * (1 + m0 / 4), rel=m0 / 2 + 1e-4)


def _at_loss(data, name, key, level):
    """Log-log interpolation of ``key`` at the last crossing of the loss ``level``."""
    loss, values = data[f"loss/{name}"], data[f"{key}/{name}"]
    i = np.flatnonzero(loss >= level)[-1]
    f = np.log(level / loss[i]) / np.log(loss[i + 1] / loss[i])
    return float(np.exp(np.log(values[i]) + f * np.log(values[i + 1] / values[i])))


SHARP_Z = np.asarray(_lesam.SHARP_DATA.y)[:, None] * np.asarray(_lesam.SHARP_DATA.X)  # y_i x_i


def _loss_grad(theta):
    """Mean logistic loss and its θ-gradient, L = 2 (numpy): m_i = Σ_j y_i x_ij w1_j w2_j."""
    w1, w2 = theta
    m = SHARP_Z @ (w1 * w2)
    d1 = -scipy.special.expit(-m) / m.size  # ℓ'(m_i)/n
    return np.mean(np.logaddexp(0.0, -m)), np.stack([d1 @ (SHARP_Z * w2), d1 @ (SHARP_Z * w1)])


def _hessian(theta):
    """(tr H, λ_max(H)) of the mean logistic loss in θ = (w1, w2), L = 2 (numpy): with
    ∇m_i = (z_i⊙w2, z_i⊙w1) and ∇²m_i = [[0, diag z_i], [diag z_i, 0]] (z_i = y_i x_i),
    H = (1/n) Σ_i ℓ''(m_i) ∇m_i∇m_iᵀ + ℓ'(m_i) ∇²m_i."""
    w1, w2 = theta
    s = scipy.special.expit(-(SHARP_Z @ (w1 * w2)))  # -ℓ'(m_i); ℓ''(m_i) = s(1 - s)
    n, d = SHARP_Z.shape
    gm = np.concatenate([SHARP_Z * w2, SHARP_Z * w1], axis=1)
    h = (gm.T * (s * (1 - s))) @ gm / n
    off = np.diag(-(s @ SHARP_Z) / n)
    h[:d, d:] += off
    h[d:, :d] += off
    return np.trace(h), np.linalg.eigvalsh(h)[-1]


def _numpy_cosine(t):
    """The caption's annealed budget σ(t) = 0.35(1 + cos(πt/T))/2, 0 after T = 10, written here
    (jnp only so that flows.LESAM, which traces its schedule once, accepts it; the reference
    runs call it on floats)."""
    return 0.35 * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t / 10.0, 1.0)))


#: The reference runs' methods; ℓ2-SAM ρ̄ at the reference's own ρ̄ (:func:`_reference_rho_bar`).
REFERENCE_METHODS = {
    "GD": flows.GD(),
    "ℓ2-SAM": flows.L2SAM(0.3),
    "LE-SAM": flows.LESAM(0.35, 0.3),
    "LE-SAM cos": flows.LESAM(_numpy_cosine, 0.3),
}


@functools.cache
def _reference_run(name):
    """The plain flow dθ/dt = −∇L(θ + ε(θ)) of ``name`` on sharp_data() from the balanced start
    α_sharp (scipy DOP853, rtol 1e-11), ε by tests.helpers.numpy_perturbation, down to loss
    1e-4; events: loss 1e-3 and ‖∇L‖ = σ/ρ_max. Dense output."""
    if name == "ℓ2-SAM ρ̄":
        method = flows.L2SAM(_reference_rho_bar())
    else:
        method = REFERENCE_METHODS[name]
    d = MU.size

    def rhs(t, y):
        theta = y.reshape(2, d)
        g = _loss_grad(theta)[1]
        return -_loss_grad(theta + numpy_perturbation(method, g, t))[1].ravel()

    end = lambda t, y: _loss_grad(y.reshape(2, d))[0] - 1e-4  # noqa: E731
    end.terminal = True
    at_level = lambda t, y: _loss_grad(y.reshape(2, d))[0] - 1e-3  # noqa: E731
    cap = lambda t, y: np.linalg.norm(_loss_grad(y.reshape(2, d))[1]) - SIGMA_OVER_RHO  # noqa: E731
    theta0 = np.full(2 * d, float(_lesam.ALPHA_SHARP))
    sol = scipy.integrate.solve_ivp(
        rhs, (0.0, 1e4), theta0, "DOP853", rtol=1e-11, atol=1e-13, events=[end, at_level, cap],
        dense_output=True,
    )  # fmt: skip
    assert sol.status == 1, sol.message
    return sol


SIGMA_OVER_RHO = _lesam.SIGMA / _lesam.RHO_MAX


@functools.cache
def _reference_rho_bar():
    r"""ρ̄ = (1/T)∫_0^T ρ_t dt of the reference LE-SAM run, T = 10: ρ_t = σ/(‖∇L‖ + ϱ) up to the
    cap event t_b (scipy quad on the dense output), ρ_max from there on (‖∇L‖ stays below
    σ/ρ_max: :func:`test_lesam_cap_binds_after_the_start`)."""
    sol = _reference_run("LE-SAM")
    (t_b,) = sol.t_events[2]

    def rho(t):
        return 0.35 / (np.linalg.norm(_loss_grad(sol.sol(t).reshape(2, -1))[1]) + 1e-12)

    head, _ = scipy.integrate.quad(rho, 0.0, t_b, epsabs=1e-13, epsrel=1e-12)
    return (head + 0.3 * (10.0 - t_b)) / 10.0


def _reference_at_loss(name, level):
    """(tr H, λ_max) of the reference run where its loss is ``level`` (1e-4 < level < 0.3)."""
    sol = _reference_run(name)
    loss = lambda t: _loss_grad(sol.sol(t).reshape(2, -1))[0] - level  # noqa: E731
    t = scipy.optimize.brentq(loss, 0.0, sol.t[-1], xtol=1e-14, rtol=1e-14)
    return np.array(_hessian(sol.sol(t).reshape(2, -1)))


def test_sharpness_at_loss_1e3_against_scipy(quick):
    """tr H and λ_max at loss 1e-3 of the figure's runs against the scipy reference runs, to
    the error of reading them off the saving grid."""
    _, data = quick
    for name in REFERENCE_METHODS:
        sol = _reference_run(name)
        assert sol.t_events[1].size == 1  # the loss crosses 1e-3 once
        want = np.array(_hessian(sol.y_events[1][0].reshape(2, -1)))
        got = np.array([_at_loss(data, name, k, 1e-3) for k in ("trace", "top")])
        # The figure reads the value off its saving grid by log-log interpolation between the
        # two samples around loss 1e-3, at log-loss distance h = log(loss[i]/loss[i+1]) apart
        # (from the data). Linear interpolation of f(x) = log tr H (x = log loss) errs by at
        # most h²/8·|f''|; h²f'' is the second difference of the reference at x ± h, so the
        # bound is |f(x+h) − 2f(x) + f(x−h)|/8 (2× for f'' varying over the interval), plus
        # 1e-6 for the two solvers (the figure's rtol 1e-8, ours 1e-11).
        loss = data[f"loss/{name}"]
        i = np.flatnonzero(loss >= 1e-3)[-1]
        h = np.log(loss[i] / loss[i + 1])
        side = [np.log(_reference_at_loss(name, 1e-3 * np.exp(s))) for s in (h, -h)]
        tol = np.abs(side[0] - 2 * np.log(want) + side[1]) / 4 + 1e-6
        assert np.all(np.abs(np.log(got / want)) <= tol), (name, got, want, tol)
        assert np.all(tol < 1e-3)  # the grid resolves these numbers to 3 digits at least


def test_rho_bar_caption_number(quick):
    """Caption: ρ̄ = 0.2993, within 0.3 % of ρ_max: the quick data's trapezoidal ρ̄ against the
    reference's quadrature (1e-5, a fifth of the caption's last digit), and the published
    figure's ρ̄ at the caption's rounding."""
    _, data = quick
    caption = gallery_caption("lesam_flatness")
    assert "ρ̄ = (1/T)∫₀ᵀ ρ_t dt = 0.2993" in caption and "within 0.3 % of ρ_max" in caption
    assert "annealed to 0 at T = 10" in caption and float(data["t_anneal"]) == 10.0
    ref = _reference_rho_bar()
    assert round(ref, 4) == 0.2993 and 0 < 1 - ref / 0.3 < 0.003
    assert float(data["rho_bar"]) == pytest.approx(ref, abs=1e-5)
    assert round(float(published_data("lesam_flatness")["rho_bar"]), 4) == 0.2993


def test_ratio_caption_numbers(quick):
    """GD's tr H at loss 1e-3 (0.26, the scale of the ratios); caption: tr H/tr H_GD at 1e-3 and
    1e-6, each at its rounding in the published data, those at 1e-3 also from the reference
    runs; LE-SAM is flatter than GD but not than ℓ2-SAM at either radius, at every decade of
    loss drawn."""
    caption = gallery_caption("lesam_flatness")
    assert "at loss 10⁻³ (dotted), tr H/tr H_GD = 0.39 for ℓ2-SAM (both radii)" in caption
    assert "0.59 for LE-SAM (both budgets)" in caption
    assert "at 10⁻⁶ (the right edge), 0.35 (both radii), 0.66 (constant σ) and 0.71" in caption
    assert _lesam.LOSS_READ == 1e-3 and _lesam.LOSS_MIN == 1e-6
    stated = {
        1e-3: {"ℓ2-SAM": 0.39, "ℓ2-SAM ρ̄": 0.39, "LE-SAM": 0.59, "LE-SAM cos": 0.59},
        1e-6: {"ℓ2-SAM": 0.35, "ℓ2-SAM ρ̄": 0.35, "LE-SAM": 0.66, "LE-SAM cos": 0.71},
    }
    trace_1e3 = {
        n: _hessian(_reference_run(n).y_events[1][0].reshape(2, -1))[0] for n in stated[1e-3]
    }
    gd_ref = _hessian(_reference_run("GD").y_events[1][0].reshape(2, -1))[0]
    assert round(float(gd_ref), 2) == 0.26
    published = published_data("lesam_flatness")
    assert round(_at_loss(published, "GD", "trace", 1e-3), 2) == 0.26
    for level, values in stated.items():
        for name, value in values.items():
            got = _at_loss(published, name, "trace_ratio", level)
            assert round(got, 2) == value, (level, name, got)
            if level == 1e-3:
                ref = trace_1e3[name] / gd_ref
                assert round(ref, 2) == value, (name, ref)
    _, data = quick
    for level in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        for key in ("trace_ratio", "top_ratio"):
            le = [_at_loss(data, n, key, level) for n in ("LE-SAM", "LE-SAM cos")]
            l2 = [_at_loss(data, n, key, level) for n in ("ℓ2-SAM", "ℓ2-SAM ρ̄")]
            assert 1 > min(le) and min(le) > max(l2), (level, key)


def test_lesam_cap_binds_after_the_start(quick):
    """Caption: ‖∇L‖ starts above σ/ρ_max (the loss-equated branch is active) and stays below
    it once the loss is under about 0.2: LE-SAM is then ℓ2-SAM(ρ_max) from a different state.
    The figure's branch (analysis.lesam_radius) agrees with ‖∇L‖ (analysis.sharpness)."""
    _, data = quick
    g, loss = data["grad_norm/LE-SAM"], data["loss/LE-SAM"]
    below = g < SIGMA_OVER_RHO
    np.testing.assert_array_equal(data["budget/LE-SAM"], ~below)
    assert not below[0]
    first = int(np.argmax(below))
    assert below[first:].all()
    # The reference run (scipy) crosses ‖∇L‖ = σ/ρ_max once before loss 1e-4, from above; its
    # loss there is the caption's "about 0.2". On the saving grid the crossing lies between
    # samples first − 1 and first, so the loss decreasing along the run, the figure's losses
    # bracket it: loss[first] ≤ L_cross < loss[first − 1] (1e-6: the two solvers' agreement).
    sol = _reference_run("LE-SAM")
    assert sol.t_events[2].size == 1
    assert np.linalg.norm(_loss_grad(sol.y[:, 0].reshape(2, -1))[1]) > SIGMA_OVER_RHO
    l_cross = _loss_grad(sol.y_events[2][0].reshape(2, -1))[0]
    assert loss[first] <= l_cross * (1 + 1e-6) and l_cross * (1 - 1e-6) < loss[first - 1]
    assert l_cross == pytest.approx(0.2, abs=0.01)


def test_annealed_run_returns_to_the_branch_in_the_last_2_percent(quick):
    """Caption: the annealed run leaves the branch with the constant one and returns only when
    σ(t) < ρ_max‖∇L‖, in the last 2 % of the horizon T = 10, then has ρ_t = 0 (σ = 0): its
    branch against σ(t)/(‖∇L‖ + ϱ) < ρ_max with the numpy σ(t) and analysis.sharpness's ‖∇L‖."""
    assert "in the last 2 % of the horizon" in gallery_caption("lesam_flatness")
    _, data = quick
    ts, g = data["ts"], data["grad_norm/LE-SAM cos"]
    sigma = np.array([_numpy_cosine(t) for t in ts])
    np.testing.assert_array_equal(data["budget/LE-SAM cos"], sigma / (g + 1e-12) < 0.3)
    budget = data["budget/LE-SAM cos"]
    np.testing.assert_array_equal(budget[ts < 9.0], data["budget/LE-SAM"][ts < 9.0])
    back = np.flatnonzero(~budget[:-1] & budget[1:]) + 1
    assert back.size == 1 and 0.98 * 10 <= ts[back[0] - 1] < ts[back[0]] <= 10
    assert budget[back[0] :].all()
    assert np.all(data["rho/LE-SAM cos"][ts >= 10] == 0)


def test_radius_panels_caption_numbers():
    """Panels (a), (b) of the flatness figure: ρ_t starts at σ/‖∇L(θ₀)‖ = 0.228 (numpy gradient),
    reaches the cap at the first saved time after the reference run's ‖∇L‖ = σ/ρ_max event
    (scipy), t = 0.15, and the level σ/ρ_max ≈ 1.17."""
    caption, data = gallery_caption("lesam_flatness"), published_data("lesam_flatness")
    theta0 = np.full((2, MU.size), float(_lesam.ALPHA_SHARP))
    rho0 = 0.35 / (np.linalg.norm(_loss_grad(theta0)[1]) + 1e-12)
    assert data["rho/LE-SAM"][0] == pytest.approx(rho0, rel=1e-9) and f"{rho0:.3f}" == "0.228"
    assert "it starts at 0.228" in caption
    ts, budget = data["ts"], data["budget/LE-SAM"]
    capped = ts[int(np.argmin(budget))]  # the first saved time with the cap binding
    (t_b,) = _reference_run("LE-SAM").t_events[2]
    assert ts[ts < capped][-1] < t_b <= capped and f"{capped:.2f}" == "0.15"
    assert "reaches the cap at t = 0.15" in caption
    assert f"{SIGMA_OVER_RHO:.2f}" == "1.17" and "σ/ρ_max ≈ 1.17 and σ(t)/ρ_max" in caption
