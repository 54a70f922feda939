"""analysis._boundary: boundaries along any family, at every depth, against independent values.

Expected values: closed forms (d = 1; the ℓ2-SAM direct boundary at L = 2; LE-SAM's σ_c at
d = 1), the sympy bounds, and the reduced balanced flow integrated by scipy on both sides of a
boundary at L = 4 (tests/helpers.py).
"""

import math
import re

import numpy as np
import pytest

import analysis
import flows
from analysis import _boundary, _reference
from tests.helpers import cosine_sigma, lesam_schedule_l2

MU = [1.0, 2.0, 3.0, 4.0, 5.0]
SQ2 = np.sqrt(2.0)


def test_critical_alpha_d1_is_rho_over_sqrt2():
    # d = 1: dw/dτ = μ (w − ρ/√2), so α_c = ρ/√2 exactly (independent of μ).
    for rho in (1.0, 0.3):
        got = analysis.critical_alpha(flows.L2SAM(rho), [2.0], full_output=True)
        assert got.exists and abs(got.alpha / (rho / SQ2) - 1) <= 2e-8
        assert got.bracket[1] - got.bracket[0] <= 1e-8 * got.bracket[0]
    got = analysis.critical_alpha(flows.L2SAM(1.0), [2.0], bracket=(0.5, 1.0), bracket_rtol=1e-10)
    assert abs(got / (1 / SQ2) - 1) <= 2e-10


def test_boundary_along_rho_and_its_reversed_bracket():
    # Along ρ at fixed α = 1 (d = 1): collapse iff ρ > √2 α. The collapsing side is the large ρ.
    b = analysis.boundary(lambda r: (flows.L2SAM(r), 1.0), [2.0], bracket=(4.0, 0.5))
    assert abs(b.value / SQ2 - 1) <= 2e-8


def test_boundary_along_lesam_sigma_closed_form():
    # LE-SAM, d = 1, L = 2, logistic: ŵ = w − ρ_t/√2 with ρ_t = min(σ/(|ℓ'(μw²)|√2μw), ρ_max).
    # With α < ρ_max/√2 the start shrinks iff σ > σ_c = 2μα²|ℓ'(μα²)|, and the sign of ŵ is
    # kept afterwards (w|ℓ'(μw²)|·2w increases on [α, ρ_max/√2]): σ_c is the boundary.
    mu, alpha, rho_max = 1.0, 0.5, 1.0
    sigma_c = 2 * mu * alpha**2 / (1 + np.exp(mu * alpha**2))
    b = analysis.boundary(
        lambda s: (flows.LESAM(s, rho_max), alpha), [mu], bracket=(0.4, 0.1), bracket_rtol=1e-7
    )
    assert abs(b.value / sigma_c - 1) <= 1e-6  # ϱ = 1e-12 moves it by ~1e-11


def test_critical_alpha_is_the_reduced_flows_and_scale_invariant():
    b = analysis.critical_alpha(flows.L2SAM(1.0), MU, full_output=True)
    n = np.linalg.norm(MU)
    assert 1 / (SQ2 * n) < b.bracket[0] < b.bracket[1] < 5 / (SQ2 * n)  # all shrink / all grow
    # the scalar reduction's α_c (scipy, bisected to 1e-11), to bracket_rtol 1e-8, twice
    assert abs(b.alpha / _reference.l2sam_alpha_c() - 1) <= 2e-8
    scaled = analysis.critical_alpha(flows.L2SAM(2.5), MU)
    assert abs(scaled / (2.5 * b.alpha) - 1) <= 3e-8


@pytest.mark.parametrize("lam", [1e-100, 1e100])
def test_critical_alpha_of_the_scale_twins(lam):
    # α_c(λρ) = λ α_c(ρ) (docs/theory.md §6) down to λ = 1e-100, where an absolute atol = 1e-30
    # would exceed every weight; α_c lies between the sympy bounds 1/(√2‖μ‖), 5/(√2‖μ‖).
    n = np.linalg.norm(MU)
    ref = analysis.critical_alpha(flows.L2SAM(1.0), MU)
    got = analysis.critical_alpha(flows.L2SAM(lam), MU, full_output=True)
    assert got.exists
    assert 1 / (SQ2 * n) < got.bracket[0] / lam < got.bracket[1] / lam < 5 / (SQ2 * n)
    assert abs(got.alpha / lam / ref - 1) <= 2e-8  # the search's bracket_rtol = 1e-8, twice
    assert abs(got.alpha / lam / _reference.l2sam_alpha_c() - 1) <= 2e-8  # and the reduction's


def test_direct_alpha_matches_hand_formula():
    # Exact boundary: ρ (μ_(d) + μ_(d-1)) / (√2 ‖μ‖) (the top two initial rates tie).
    got = analysis.direct_alpha(flows.L2SAM(1.0), [3.0, 4.0])
    assert abs(got / (7 / (5 * SQ2)) - 1) <= 2e-8


def test_critical_alpha_depth4_separates_the_reduced_flow():
    # The reduced flow, integrated independently, collapses just below α_c and escapes past
    # the certificate w > ρ (it then grows without bound) just above.
    b = analysis.critical_alpha(flows.L2SAM(1.0), MU, depth=4, full_output=True)
    assert b.exists and b.bracket[1] - b.bracket[0] <= 1e-8 * b.bracket[0]
    lo, hi = b.value * (1 - 1e-4), b.value * (1 + 1e-4)
    down = _reference.l2sam_flow(MU, lo, 1.0, 4, 1e12, w_max=1.0, w_min=1e-3 * lo)
    up = _reference.l2sam_flow(MU, hi, 1.0, 4, 1e12, w_max=1.0, w_min=1e-3 * hi)
    assert len(down.t_events[1]) == 1 and len(up.t_events[0]) == 1


@pytest.mark.parametrize("depth", [1, 3, 5])
def test_no_collapse_at_odd_depth_is_a_documented_nan(depth):
    # At odd L (and L = 1, where dw/dτ = μ) ℓ2-SAM's weights never decrease: no α_c exists.
    b = analysis.critical_alpha(flows.L2SAM(1.0), MU, depth=depth, full_output=True)
    assert not b.exists and math.isnan(b.value)
    assert math.isnan(analysis.critical_alpha(flows.GD(), MU, depth=2))  # GD never collapses


@pytest.mark.parametrize(("depth", "rho"), [*((L, 1.0) for L in range(2, 9)), (4, 0.3)])
def test_linf_sam_alpha_c_is_rho_at_every_depth(depth, rho, monkeypatch):
    # Claim C2: exact ℓ∞-SAM decouples, dw_j/dτ = μ_j (w_j − ρ)^{L−1} for balanced w_j > 0, so
    # w_j = ρ is an equilibrium of each coordinate: every α < ρ stays below ρ (even L: every
    # layer shrinks, collapse; odd L: it creeps up to ρ, stalled) and every α > ρ blows up.
    # Hence α_c = ρ exactly. Both sides are certified at τ = 0 (every |w| < ρ: trapped /
    # never_escapes; min w > ρ: the escape certificate), so the search integrates nothing:
    # the batched solver must not be called (it took minutes to compile at L = 4).
    def no_solver(*args, **kwargs):
        raise AssertionError("the batched solver was called for a start-decided point")

    monkeypatch.setattr(_boundary, "classify", no_solver)
    b = analysis.critical_alpha(flows.LinfSAM(rho), MU, depth=depth, full_output=True)
    assert b.exists
    assert b.bracket[0] < rho < b.bracket[1]
    assert b.bracket[1] - b.bracket[0] <= 1e-8 * b.bracket[0]
    assert abs(b.value / rho - 1) <= 1e-8


@pytest.mark.parametrize("depth", range(2, 9))
def test_linf_sam_direct_alpha_is_rho_at_every_depth(depth, monkeypatch):
    # Each balanced coordinate follows one scalar flow, w_j(τ) = W(α, μ_j τ) with
    # dW/dτ = (W − ρ)^{L−1}. Above ρ, W increases, so from a uniform α > ρ the largest μ_j
    # leads |β| at every τ > 0 (j† never leaves argmax μ: direct); below ρ nothing escapes.
    # So α_s = α_c = ρ exactly. From ρ(1 + 2e-7) the coordinates tie in float64 for long
    # (ε^{L−1} ≈ 1e-27 at L = 5) and j† used to be read as index 0 there: direct_alpha
    # raised at L = 4 ("changes more than once"). Both sides are decided at τ = 0.
    def no_solver(*args, **kwargs):
        raise AssertionError("the batched solver was called for a start-decided point")

    monkeypatch.setattr(_boundary, "classify", no_solver)
    b = analysis.direct_alpha(flows.LinfSAM(1.0), MU, depth=depth, full_output=True)
    assert b.exists and b.bracket[0] < 1.0 < b.bracket[1]
    assert b.bracket[1] - b.bracket[0] <= 1e-8 * b.bracket[0]


def test_linf_sam_at_depth_one_never_collapses():
    # L = 1: dw/dτ = μ exactly (no layer product to perturb the sign of): every start escapes,
    # so there is no boundary, the documented NaN.
    b = analysis.critical_alpha(flows.LinfSAM(1.0), MU, depth=1, full_output=True)
    assert not b.exists and math.isnan(b.value)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(bracket_rtol=0.0), "bracket_rtol"),
        # below float64's resolution: the bracket would stall
        (dict(bracket_rtol=1e-17), "bracket_rtol"),
        (dict(bracket_rtol=1e-300), "bracket_rtol"),
        (dict(bracket_rtol=True), "bracket_rtol"),
        (dict(scan=600), "scan"),  # 2^(±600): the ends' ratio overflows
        (dict(points=0), "points"),
        (dict(bracket=(1.0, 0.5)), "bracket"),  # the collapsing end must come first
        (dict(bracket=(1.0, 2.0, 3.0)), "bracket"),
        (dict(bracket=(2.0, 3.0)), "bracket"),  # no change of regime inside
        (dict(mu=[[1.0]]), "mu"),
        (dict(mu=[1.0, np.inf]), "mu"),
        (dict(method=None), "method"),
        (dict(depth=0), "depth"),
        (dict(max_steps=0), "max_steps"),
        (dict(atol=-1.0), "atol"),
    ],
)
def test_critical_alpha_bad_input(kwargs, name):
    args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0]) | kwargs
    with pytest.raises(ValueError, match=f"`{name}`"):
        analysis.critical_alpha(**args)


def test_bisection_at_float64_resolution_ends_on_adjacent_floats():
    """bracket_rtol = 2^-52 (any scalar form) ends: within a float64 ulp of the scipy
    reduction's α_c, or, where rounding decides the runs next to α_c (their flags then
    alternate), with the error that names `bracket` (not a loop on two adjacent floats)."""
    ref = _reference.l2sam_alpha_c()  # scipy, bisected to 1e-11
    try:
        b = analysis.critical_alpha(
            flows.L2SAM(1.0), MU, bracket=(ref * (1 - 1e-9), ref * (1 + 1e-9)),
            bracket_rtol=np.float32(np.finfo(np.float64).eps), full_output=True,
        )  # fmt: skip
    except ValueError as err:
        # a refusal is right only where the runs' flags really alternate: the message lists
        # them, and they must change direction (1 -> 0 -> 1 or 0 -> 1 -> 0), not merely flip once
        assert "`bracket`: the regime changes more than once" in str(err)
        flags = [int(f) for f in re.search(r"below-flags \[([01 ]+)\]", str(err))[1].split()]
        changes = np.flatnonzero(np.diff(flags))
        assert len(changes) >= 2 or flags[0] == 0, flags
        return
    lo, hi = b.bracket
    assert hi - lo <= np.finfo(np.float64).eps * lo or np.nextafter(lo, hi) == hi
    assert abs(b.alpha / ref - 1) <= 2e-11


@pytest.mark.parametrize(
    "family",
    [
        lambda p: flows.L2SAM(p),  # not a tuple
        lambda p: (flows.L2SAM(1.0), -p),  # a bad alpha
        lambda p: ("sam", p),  # not a method
        lambda p: (flows.L2SAM(1.0, per_layer=p > 1), p),  # the static configuration varies
    ],
)
def test_boundary_bad_family(family):
    with pytest.raises(ValueError, match="family"):
        analysis.boundary(family, [1.0, 2.0], bracket=(0.5, 2.0))


def test_direct_alpha_needs_two_features():
    with pytest.raises(ValueError, match="mu"):
        analysis.direct_alpha(flows.L2SAM(1.0), [2.0])


def test_per_layer_l2sam_alpha_c_is_global_l2sam_at_root_two_rho():
    # Per-layer ℓ2-SAM, L = 2, balanced: each layer's gradient is ‖g‖/√2 long, so its
    # perturbation ρ g_l/‖g_l‖ is global ℓ2-SAM's at √2 ρ; α_c = √2 ρ k_c (the reduction's k_c),
    # to bracket_rtol 1e-6, twice. Also inside the hand bounds ρμ_min/‖μ‖, ρμ_max/‖μ‖.
    b = analysis.critical_alpha(
        flows.L2SAM(0.3, per_layer=True), MU, bracket_rtol=1e-6, full_output=True
    )
    assert abs(b.alpha / (SQ2 * 0.3 * _reference.l2sam_alpha_c()) - 1) <= 2e-6
    n = np.linalg.norm(MU)
    assert 0.3 * 1 / n < b.bracket[0] < b.bracket[1] < 0.3 * 5 / n


def test_capped_lesam_is_l2sam_at_rho_max():
    # LE-SAM with σ/ρ_max far above ‖g‖ near the boundary keeps the cap: ρ_t = ρ_max, i.e. it is
    # ℓ2-SAM(ρ_max) exactly; by scale invariance its α_c is ρ_max times ℓ2-SAM's α_c at ρ = 1.
    lesam = analysis.critical_alpha(flows.LESAM(50.0, 0.2), MU, bracket_rtol=1e-8)
    assert abs(lesam / (0.2 * _reference.l2sam_alpha_c()) - 1) <= 3e-8  # the reduction's k_c


def _collapses_under(sigma, alpha, rho_max=0.3, mu=(1.0, 2.0, 3.0)):
    """The regime of the reference run (tests/helpers.lesam_schedule_l2): True for a collapse,
    False for an escape (some w_j reached ρ_max, the escape certificate of docs/theory.md §12)."""
    sol = lesam_schedule_l2(mu, alpha, rho_max, sigma, t_max=1e3, w_max=rho_max)
    assert sol.status == 1, sol.message  # an event ended it
    return sol.t_events[0].size == 1


def test_critical_alpha_under_a_cosine_schedule_matches_an_independent_bisection():
    """LE-SAM with the annealed σ(t) = σ₀(1 + cos(π t/T))/2 read on the real clock: α_c against a
    bisection written here on the hand-written flow, the two brackets (each 1e-4 wide) overlap.
    The schedule matters: under the constant budget σ₀ the upper end collapses instead."""
    mu, rho_max, rtol, bracket = [1.0, 2.0, 3.0], 0.3, 1e-4, (0.05, 0.12)
    lo, hi = bracket
    assert _collapses_under(cosine_sigma, lo) and not _collapses_under(cosine_sigma, hi)
    assert _collapses_under(lambda t: 0.35, hi)
    while hi - lo > rtol * lo:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _collapses_under(cosine_sigma, mid) else (lo, mid)
    out = analysis.critical_alpha(
        flows.LESAM(cosine_sigma, rho_max), mu, bracket=bracket, bracket_rtol=rtol, points=2,
        full_output=True,
    )  # fmt: skip
    assert out.exists and out.bracket[1] - out.bracket[0] <= rtol * out.bracket[0]
    assert out.bracket[0] <= hi and lo <= out.bracket[1], (out.bracket, (lo, hi))


def test_rtol_is_the_deprecated_name_of_bracket_rtol():
    """``rtol=`` (the bracket's width, as it was called) is still taken as ``bracket_rtol``, with
    a DeprecationWarning naming the new name and pointing at the caller's line; both at once are
    refused. d = 1, L = 2: α_c = ρ/√2 exactly (docs/theory.md §9)."""
    kw = dict(bracket=(0.5, 1.0), full_output=True)
    for search in (analysis.critical_alpha, _boundary_of_alpha):
        with pytest.warns(DeprecationWarning, match="`bracket_rtol`") as caught:
            old = search(flows.L2SAM(1.0), [2.0], rtol=1e-4, **kw)
        assert [w.filename for w in caught] == [__file__]
        assert old == search(flows.L2SAM(1.0), [2.0], bracket_rtol=1e-4, **kw)
        lo, hi = old.bracket
        assert lo < 1 / SQ2 < hi and 1e-6 * lo < hi - lo <= 1e-4 * lo  # 1e-4 wide, not 1e-8
    with pytest.raises(ValueError, match="`rtol` and `bracket_rtol`"):
        analysis.critical_alpha(flows.L2SAM(1.0), [2.0], rtol=1e-4, bracket_rtol=1e-4)
    with pytest.raises(ValueError, match="`rtol` and `bracket_rtol`"):
        analysis.boundary(_alpha_family, [2.0], bracket=(0.5, 1.0), rtol=1e-4, bracket_rtol=1e-4)


def _alpha_family(alpha):
    return flows.L2SAM(1.0), alpha


def _boundary_of_alpha(method, mu, *, full_output, **kwargs):
    """:func:`analysis.boundary` along α, called from this file (the warning's line)."""
    return analysis.boundary(_alpha_family, mu, **kwargs)
