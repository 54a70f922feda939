r"""The mechanism and max-margin figures (figures/_mechanism.py): their data against independent
references, and every number their gallery captions state.

Independent sources: the balanced L = 2 ℓ2-SAM flow in w alone (docs/theory.md §8) solved by
scipy (:func:`analysis._reference.l2sam_flow`), with the rates
:math:`r_j=2\mu_j(1-\rho\mu_j/\lVert\nabla m\rVert)`,
:math:`\lVert\nabla m\rVert=\sqrt2\lVert\mu\odot w\rVert` written out here; the scalar reduction
of docs/theory.md §9 (scipy), for the switch times of j† (the μ_j nearest τ/(2cT(τ))) and for
:math:`T_\infty`; the ℓ1 max-margin direction from an LP of another form than analysis's
(maximise the margin γ over :math:`\lVert\beta\rVert_1\le1`, scipy's ``linprog``); and the
closed form :math:`\beta=\alpha+\mu\tau` at L = 1.
"""

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

from analysis import _reference
from figures import _mechanism
from tests.helpers import gallery_caption, published_data, quick_data

MU = _mechanism.MU
RHO = _mechanism.RHO


@pytest.fixture(scope="module")
def quick(quick_figures):
    """``python -m figures --quick`` (made once): both figures' files and saved data."""
    out, _ = quick_figures
    files = [out / f"{n}.{ext}" for n in ("mechanism", "max_margin") for ext in ("pdf", "png")]
    return files, quick_data(quick_figures, ["mechanism", "max_margin"])


def _stated(caption, text):
    """The caption states ``text`` (an assertion; True so that it chains with ``and``)."""
    assert text in caption, text
    return True


def test_writes_pdf_and_png(quick):
    files, _ = quick
    assert all(p.stat().st_size > 1000 for p in files)


# --- mechanism -------------------------------------------------------------------------------


def _reference_rates(taus, alpha, rho):
    """(rates (T, d), ‖∇m‖ (T,)) of balanced ℓ2-SAM at L = 2 from scipy's solution in w."""
    sol = _reference.l2sam_flow(MU, alpha, rho, 2, taus[-1], w_max=1e300)
    assert sol.status == 0, sol.message
    w = sol.sol(taus).T  # (T, d)
    grad_m = np.sqrt(2.0) * np.linalg.norm(MU * w, axis=1)
    return 2 * MU * (1 - rho * MU / grad_m[:, None]), grad_m


def test_mechanism_rates_and_norms_against_the_reduced_flow(quick):
    """ℓ2-SAM: the rates, ‖∇m‖ and the fastest-growing index against scipy's solve of the flow in
    w; GD: the rates are 2μ_j at every τ (dw_j/dτ = μ_j w_j) and j† is the major index."""
    _, data = quick
    data = data["mechanism"]
    taus = data["taus"]
    rates, grad_m = _reference_rates(taus, float(data["alpha"]), float(data["rho"]))
    np.testing.assert_allclose(data["rates/ℓ2-SAM"], rates, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(data["margin_grad/ℓ2-SAM"], grad_m, rtol=1e-6)
    top2 = np.sort(rates, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4  # not at a tie of the two fastest
    assert clear.sum() > 0.9 * taus.size
    np.testing.assert_array_equal(data["fastest/ℓ2-SAM"][clear], np.argmax(rates, axis=1)[clear])
    np.testing.assert_allclose(data["rates/GD"], np.broadcast_to(2 * MU, rates.shape), rtol=1e-12)
    assert np.all(data["fastest/GD"] == MU.size - 1) and np.all(data["dominant/GD"] == MU.size - 1)
    assert data["sequence/GD"].tolist() == [MU.size - 1]


def test_mechanism_caption_numbers():
    """Every number of the mechanism caption, from the published data, and the switch times
    also from the reduced flow."""
    caption = gallery_caption("mechanism")
    data = published_data("mechanism")
    taus, gm, gl = data["taus"], data["margin_grad/ℓ2-SAM"], data["loss_grad/ℓ2-SAM"]
    assert (
        float(data["alpha"]) == 0.36 and float(data["rho"]) == 1.0 and _stated(caption, "α = 0.36")
    )
    assert MU.tolist() == [1, 2, 3, 4, 5] and _stated(caption, "μ = (1,…,5), ρ = 1")
    # ‖∇m‖ from 3.78 down to 2.32 at τ ≈ 1.0, where 3, 4, 5 shrink and 1, 2 grow
    low = int(np.argmin(gm))
    assert _stated(caption, f"from {gm[0]:.2f} to {gm[low]:.2f} at τ ≈ {taus[low]:.1f}")
    assert (gm[0], gm[low], taus[low]) == pytest.approx((3.78, 2.32, 1.0), abs=0.05)
    assert np.all(data["rates/ℓ2-SAM"][low, :2] > 0) and np.all(data["rates/ℓ2-SAM"][low, 2:] < 0)
    floor = np.min(data["rates/ℓ2-SAM"][:, 4])
    assert _stated(caption, f"d log|β₅|/dτ = −{-floor:.1f}")
    # the fastest-growing index changes where ‖∇m‖ crosses ρ(μ_j + μ_{j+1})
    fastest = data["fastest/ℓ2-SAM"]
    changes = np.flatnonzero(fastest[1:] != fastest[:-1])
    levels = RHO * (MU[:-1] + MU[1:])
    assert _stated(caption, "ρ(μ_j + μ_{j+1}) = 3, 5, 7, 9") and levels.tolist() == [3, 5, 7, 9]
    for k in changes:
        a, b = int(fastest[k]), int(fastest[k + 1])
        level = RHO * (MU[a] + MU[b])
        assert abs(a - b) == 1 and min(gm[k], gm[k + 1]) <= level <= max(gm[k], gm[k + 1])
    # j† 2 → 1 → 2 → 3 → 4 → 5 at the stated τ, as the reduced flow has it
    seq = "2 → 1 → 2 → 3 → 4 → 5"
    times = data["switch_t/ℓ2-SAM"]
    assert " → ".join(str(j + 1) for j in data["sequence/ℓ2-SAM"]) == seq
    assert _stated(caption, f"{seq} at τ = " + ", ".join(f"{t:.2f}" for t in times))
    ref_seq, ref_times = _reduction_switches(0.36, RHO, float(taus[-1]))
    assert ref_seq == data["sequence/ℓ2-SAM"].tolist()
    np.testing.assert_allclose(times, ref_times, rtol=1e-6)
    # ‖∇L‖ at most 0.51; below 1e-9 when the fastest index reaches 5 (τ ≈ 2.9, ‖∇m‖ > 9)
    assert _stated(caption, f"‖∇L‖ is at most {np.nanmax(gl):.2f}") and np.nanmax(gl) < 0.515
    first = int(np.argmax(fastest == MU.size - 1))
    assert np.all(fastest[first:] == MU.size - 1)
    assert _stated(caption, "below 10⁻⁹ (dotted level) when the fastest-growing index reaches 5")
    assert _mechanism.GRAD_FLOOR == 1e-9 and _stated(caption, "(dotted levels)")
    assert gl[first] < 1e-9 and gm[first] > 9 and gm[first - 1] < 9
    assert _stated(caption, f"(τ ≈ {taus[first]:.1f}, ‖∇m‖ > 9)")


# --- max margin ------------------------------------------------------------------------------


def _l1_direction(z):
    """ℓ1 max-margin direction of the rows z_i: max γ s.t. z_i·(u − v) ≥ γ, Σ(u + v) ≤ 1, u, v ≥ 0
    (scipy linprog), normalised in ℓ2."""
    n, d = z.shape
    c = np.zeros(2 * d + 1)
    c[-1] = -1.0  # maximise γ
    a_ub = np.vstack([np.hstack([-z, z, np.ones((n, 1))]), np.append(np.ones(2 * d), 0.0)[None, :]])
    b_ub = np.append(np.zeros(n), 1.0)
    bounds = [(0, None)] * (2 * d) + [(None, None)]
    res = scipy.optimize.linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    assert res.status == 0 and res.x[-1] > 0
    beta = res.x[:d] - res.x[d : 2 * d]
    return beta / np.linalg.norm(beta)


def test_l1_direction_of_the_lp_on_a_two_example_dataset():
    """The LP of this file on data where the ℓ1 direction is no example's largest feature:
    z = (1, 0.2, 0.7), (0.2, 1, 0.7) → e_3 (‖β‖₁ = 1/0.7 against 2/1.2 for (1,1,0)/1.2)."""
    z = np.array([[1.0, 0.2, 0.7], [0.2, 1.0, 0.7]])
    np.testing.assert_allclose(_l1_direction(z), [0.0, 0.0, 1.0], atol=1e-9)


def test_max_margin_directions_and_l1_closed_form(quick):
    _, data = quick
    data = data["max_margin"]
    np.testing.assert_allclose(data["l1"], _l1_direction(MU[None, :]), atol=1e-9)
    np.testing.assert_allclose(data["l2"], MU / np.linalg.norm(MU), rtol=1e-9)
    for key in ("GD", "ℓ2-SAM"):
        assert data[f"status/2/{key}"] == "ok" and data[f"status/1/{key}"] == "ok"
        assert data[f"cos_l1/2/{key}"][-1] > 1 - 1e-10  # L = 2 ends on β̂₁


def _reduction(alpha, rho, tau):
    """Dense T(τ) of the scalar reduction dT/dτ = 1/‖μ⊙w‖, w_j = α exp(μ_jτ − cμ_j²T), c = ρ/√2
    (docs/theory.md §9), by scipy (:func:`analysis._reference.scalar_reduction`)."""
    sol, _ = _reference.scalar_reduction(MU, alpha, rho, tau)
    assert sol.status == 0, sol.message
    return sol


def _reduction_switches(alpha, rho, tau):
    """(sequence, times) of j† by the reduction: j† is the μ_j nearest μ*(τ) = τ/(2cT(τ)), so it
    changes where μ* crosses a midpoint (μ_j + μ_{j+1})/2, located by brentq."""
    sol, c = _reduction(alpha, rho, tau), rho / np.sqrt(2.0)
    ts = np.linspace(1e-9, tau, 4001)
    mids = (MU[:-1] + MU[1:]) / 2

    def star(t):
        return t / (2 * c * sol.sol(t)[0])

    values = np.array([star(t) for t in ts])
    sequence, times = [int(np.argmin(np.abs(MU - values[0])))], []
    for k in range(ts.size - 1):
        for mid in mids:
            if (values[k] - mid) * (values[k + 1] - mid) < 0:
                times.append(scipy.optimize.brentq(lambda t, m=mid: star(t) - m, ts[k], ts[k + 1]))
                sequence.append(int(np.argmin(np.abs(MU - values[k + 1]))))
    return sequence, np.array(times)


def test_max_margin_caption_numbers():
    caption = gallery_caption("max_margin")
    data = published_data("max_margin")
    alpha = float(data["alpha"])
    assert alpha == 0.5 and float(data["rho"]) == 1.0 and _stated(caption, "ρ = 1, α = 0.5")
    between = float(data["l1"] @ data["l2"])
    assert between == pytest.approx(5 / np.sqrt(55), rel=1e-9)
    assert _stated(caption, f"5/√55 = {between:.3f}")
    # ℓ2-SAM at L = 2 turns away first: its smallest cosine and where
    cos, taus = data["cos_l1/2/ℓ2-SAM"], data["taus/2/ℓ2-SAM"]
    k = int(np.nanargmin(cos))
    assert _stated(caption, f"(to {cos[k]:.3f} at τ ≈ {taus[k]:.2f})") and taus[k] > 0
    # L = 1: cos∠(β, β̂₁) tends to 0.674
    assert _stated(caption, f"cos∠(β, β̂₁) to {between:.3f}")
    for key in ("GD", "ℓ2-SAM"):
        assert data[f"cos_l1/1/{key}"][-1] == pytest.approx(between, abs=5e-4)
    # (b): κ = 4.00 both, predicted 4(μ₅ − μ₄); C = 0.50 (½) and 16.6 (½ e^{4c(μ₅²−μ₄²)T∞})
    assert _stated(caption, "κ = 4.00 for both methods, the predicted 4(μ₅ − μ₄) = 4")
    for key in ("GD", "ℓ2-SAM"):
        assert f"{float(data[f'rate/2/{key}']):.2f}" == "4.00"
        assert float(data[f"rate/2/{key}"]) == pytest.approx(4 * (MU[4] - MU[3]), rel=1e-5)
        gap = 1 - data[f"cos_l1/2/{key}"]
        floor = float(data["gap_floor"])  # the run stops where 1 − cos falls below it
        assert gap[-1] < floor < 10 * np.min(gap)
    assert float(data["gap_floor"]) == 1e-11 and _stated(caption, "below 10⁻¹¹")
    c_gd, c_sam = float(data["prefactor/2/GD"]), float(data["prefactor/2/ℓ2-SAM"])
    assert _stated(caption, f"C = {c_gd:.2f} for GD (predicted ½) and {c_sam:.1f} for ℓ2-SAM")
    assert _stated(caption, "(dotted: the fit, drawn back to τ = 0, where it is C)")
    assert c_gd == pytest.approx(0.5, rel=1e-4)
    t_inf = float(_reduction(alpha, RHO, 30.0).y[0, -1])  # T stops changing long before τ = 30
    assert _stated(caption, f"T∞ = {t_inf:.3f}")
    c = RHO / np.sqrt(2.0)
    predicted = 0.5 * np.exp(4 * c * (MU[4] ** 2 - MU[3] ** 2) * t_inf)
    assert c_sam == pytest.approx(predicted, rel=1e-3)
    # (c): L = 1 is one flow for both, β = α + μτ; order κ = 2.00
    np.testing.assert_array_equal(data["cos_l2/1/GD"], data["cos_l2/1/ℓ2-SAM"])
    taus = data["taus/1/GD"]
    beta = alpha + MU[None, :] * taus[:, None]
    exact = beta @ data["l2"] / np.linalg.norm(beta, axis=1)
    np.testing.assert_allclose(data["cos_l2/1/GD"], exact, atol=1e-12)
    assert _stated(caption, "κ = 2.00, the predicted order 2")
    assert f"{float(data['rate/1/GD']):.2f}" == "2.00"
