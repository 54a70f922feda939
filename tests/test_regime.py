"""analysis._regime: j† sequences (returns included), regimes at every depth, one regime table.

Expected values come from independent integrations (scipy on the reduced balanced flow of
docs/theory.md §8 and §9, in tests/helpers.py), closed forms and the q-order theorem, never
from the code.
"""

import functools

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
from hypothesis import example, given, settings
from hypothesis import strategies as st

import analysis
import flows
from analysis import _reference
from tests.helpers import all_methods, annealed_switches, cosine_sigma

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
SQ2 = np.sqrt(2.0)


def test_l2_sequence_keeps_the_return_to_an_earlier_index():
    # ℓ2-SAM, L = 2, α = 0.36. Independent: the scalar reduction of docs/theory.md §9,
    # log w_j = log α + μ_j τ − c μ_j² T(τ), dT/dτ = 1/‖μ⊙w‖, c = ρ/√2
    # (analysis._reference.scalar_reduction), j† changes by brentq between 30,000 samples.
    alpha = 0.36
    _, log_w = _reference.scalar_reduction(MU, alpha, 1.0, 15.0)
    expected, times = _reference.argmax_changes(log_w, np.linspace(0, 15, 30_001)[1:], 1e-14)
    assert expected == [1, 0, 1, 2, 3, 4]  # the reduction itself shows the return 0 -> 1
    r = analysis.regime_path(flows.L2SAM(1.0), MU, alpha)
    assert r.sequence == expected
    assert len(r.times) == len(r.sequence) - 1
    np.testing.assert_allclose(r.times, times, rtol=1e-6)
    assert r.regime == "sequential" and not r.monotone


def test_depth3_ends_on_the_major_coordinate():
    # The second case: L = 3, α = 0.001 was reported "minor", sequence [4, 3].
    expected, times = _reference.dense_argmax_changes(_reference.l2sam_flow(MU, 1e-3, 1.0, 3, 1e4))
    assert expected == [4, 3, 4]  # major first, a minor excursion, major last
    r = analysis.regime_path(flows.L2SAM(1.0), MU, 1e-3, depth=3)
    assert r.sequence == expected and r.regime == "excursion"
    np.testing.assert_allclose(r.times, times, rtol=1e-6)


@pytest.mark.parametrize("depth", [3, 4, 5, 6, 8])
def test_l2sam_paths_match_the_reduced_flow_at_every_depth(depth):
    # Above α_c at every depth (α = 0.5ρ escapes): the sequence of j† changes must be
    # the reduced flow's, and by the q-order theorem it ends on argmax μ.
    alpha = 0.5
    expected, times = _reference.l2sam_switches(MU, alpha, 1.0, depth)
    r = analysis.regime_path(flows.L2SAM(1.0), MU, alpha, depth=depth)
    assert r.sequence == expected
    assert r.sequence[-1] == 4 and r.regime == _regime_of(expected)
    np.testing.assert_allclose(r.times, times, rtol=1e-6)


def _regime_of(sequence, major=4):
    """The regime of an escape that ends on ``major``, read off an independent j† sequence."""
    assert sequence[-1] == major
    if sequence[0] != major:
        return "sequential"
    return "excursion" if len(sequence) > 1 else "direct"


def _start_index(alpha, depth, rho=1.0):
    r"""j†(0⁺) of balanced ℓ2-SAM from a uniform α, by hand (docs/theory.md §8): at τ = 0,
    N = √L α^{L−1}‖μ‖, so ŵ_j = α(1 − κμ_j) with κ = ρ/(α√L‖μ‖), and the log-growth rate of
    |β_j| is L μ_j α^{L−2}(1 − κμ_j)^{L−1}: the tie of τ = 0 goes to its argmax."""
    kappa = rho / (alpha * np.sqrt(depth) * np.linalg.norm(MU))
    rates = MU * (1 - kappa * MU) ** (depth - 1)
    assert np.sort(rates)[-1] - np.sort(rates)[-2] > 1e-3 * np.abs(rates).max()  # no near-tie
    return int(np.argmax(rates))


@pytest.mark.parametrize(
    "depth, alpha, start",
    [(3, 0.1, 4), (5, 0.05, 4), (3, 0.35, 1), (5, 0.3, 0), (2, 0.5, 2), (4, 0.3, 0)],
)
def test_excursion_starts_on_the_major_coordinate_sequential_on_a_minor_one(depth, alpha, start):
    """Small odd-depth starts lead with the major coordinate (κ is large, and with L − 1 even
    the rate μ_j(1 − κμ_j)^{L−1} ≈ κ^{L−1}μ_j^L grows with μ_j) and make a minor excursion:
    ``excursion``, not minor first. Larger odd-depth starts, and every escape at even depth,
    start on a minor coordinate: ``sequential``. Independent: the j† sequence of the reduced
    flow (scipy, its own vector field) and the start rate by hand."""
    assert _start_index(alpha, depth) == start
    expected, times = _reference.l2sam_switches(MU, alpha, 1.0, depth)
    assert expected[0] == start and expected[-1] == 4 and len(expected) > 1
    r = analysis.regime_path(flows.L2SAM(1.0), MU, alpha, depth=depth)
    assert r.sequence == expected
    np.testing.assert_allclose(r.times, times, rtol=1e-6)
    assert r.regime == ("excursion" if start == 4 else "sequential") == _regime_of(expected)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 6, 7, 8])
def test_gd_is_direct_at_every_depth(depth):
    # dw_j/dτ = μ_j w_j^{L-1} from a uniform α: w_j(τ) is increasing in μ_j for every τ > 0
    # (closed form, docs/theory.md §8), so j† = argmax μ throughout: "direct", sequence [d-1].
    r = analysis.regime_path(flows.GD(), MU, 0.7, depth=depth)
    assert (r.regime, r.sequence) == ("direct", [4])


@pytest.mark.parametrize("depth", [3, 5, 7])
def test_l2sam_never_collapses_at_odd_depth(depth):
    # At odd L, dw/dτ = μ ŵ^{L-1} >= 0: weights never decrease, so even α = ρ/100 escapes; by
    # the q-order theorem (uniform α) the limit is argmax μ.
    r = analysis.regime_path(flows.L2SAM(1.0), MU, 0.01, depth=depth)
    assert r.regime == "excursion" and r.sequence[0] == r.sequence[-1] == 4


@pytest.mark.parametrize("depth", [4, 6])
def test_l2sam_collapses_at_even_depth_like_the_reduced_flow(depth):
    # The reduced flow, integrated independently, falls to 1e-3 of its start.
    alpha = 0.05
    sol = _reference.l2sam_flow(MU, alpha, 1.0, depth, 1e9, w_min=alpha * 1e-3)
    assert sol.status == 1 and len(sol.t_events[1]) == 1
    assert analysis.regime(flows.L2SAM(1.0), MU, alpha, depth=depth) == "collapse"


@pytest.mark.parametrize("name", sorted(all_methods()))
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_every_method_is_decided_and_ends_major(name, depth):
    # At α = 2: every coordinate exceeds the perturbation bound (ρ, ρ_max <= 0.3) from the
    # start, so the run escapes; the limit is argmax μ (L <= 2: rates; L >= 3: the q-order
    # theorem, or for ℓ∞-SAM argmax μ_j(α − ρ)^{L−2}, the same index for a uniform α).
    # The uniform start ties every |β_j|; the tie goes to the fastest-growing index, the
    # largest μ (each ŵ_j >= 2 - 0.3 > 0 and μ_j ŵ_j^{L-1} increases with μ_j), which then
    # leads throughout: j† = 4 from 0+ to the limit, "direct", with no switch.
    method = all_methods()[name]
    r = analysis.regime_path(method, MU, 2.0, depth=depth)
    assert (r.regime, r.sequence, len(r.times)) == ("direct", [4], 0)


def test_linf_minor_start_then_major_closed_form():
    # ℓ∞-SAM, L = 3, ρ = 0.1: w_j = ρ + 1/(1/(α_j − ρ) − μ_j τ) (docs/theory.md §11). With
    # μ = (1, 2), α = (0.3, 0.25): w_1 leads until 5 − τ = 1/0.15 − 2τ, τ = 1/0.15 − 5, and 2
    # blows up first.
    r = analysis.regime_path(flows.LinfSAM(0.1), [1.0, 2.0], [0.3, 0.25], depth=3)
    assert r.sequence == [0, 1] and r.regime == "sequential"
    np.testing.assert_allclose(r.times, [1 / 0.15 - 5], rtol=1e-8)


def test_linf_minor_wins_while_the_major_slides_at_zero():
    # ℓ∞-SAM, L = 2, ρ = 0.5, μ = (1, 2), α = (0.9, 0.3) (docs/theory.md §11): w_1 = ρ + 0.4 e^{τ}
    # grows; w_2 = ρ − 0.2 e^{2τ} reaches 0 at τ = ln(2.5)/2 and is held there by sliding. The
    # limit is e_1 (claim C2), which needs the trap: the sliding state keeps |w_2| ~ 1e-14.
    # The start itself decides it (w_2 < ρ is trapped, w_1 > ρ settled): no solve, status ok.
    r = analysis.regime_path(flows.LinfSAM(0.5), [1.0, 2.0], [0.9, 0.3], depth=2)
    assert r.regime == "minor" and r.sequence == [0]
    assert (r.status, r.t_end, r.restarts) == ("ok", 0.0, 0)


@pytest.mark.parametrize("depth", [2, 5, 8])
def test_linf_uniform_start_just_above_rho_is_direct(depth):
    # Each coordinate follows one scalar flow, w_j(τ) = W(α, μ_j τ) with W increasing above
    # ρ: argmax μ leads |β| at every τ > 0 and blows up first (direct). From ρ(1 + 2e-7) the
    # coordinates differ by ~μτε^{L−1}, below float64's resolution, and their tie used to be
    # read as a switch to index 0 ('sequential', [4, 0] at L >= 5).
    r = analysis.regime_path(flows.LinfSAM(1.0), MU, 1.0 + 2e-7, depth=depth)
    assert r.regime == "direct" and r.sequence == [4]


@pytest.mark.parametrize("depth", [2, 4])
def test_linf_below_rho_collapses_at_even_depth(depth):
    # dw/dτ = μ (w − ρ)^{L−1} < 0 below ρ: every weight reaches 0 in finite τ and slides there.
    assert analysis.regime(flows.LinfSAM(0.1), [1.0, 2.0], [0.05, 0.08], depth=depth) == "collapse"


@pytest.mark.parametrize("depth", [3, 5])
def test_linf_below_rho_stalls_at_odd_depth(depth):
    # dw/dτ = μ (w − ρ)^{L−1} >= 0 with w = ρ an equilibrium: from α < ρ the run neither
    # escapes nor collapses.
    assert analysis.regime(flows.LinfSAM(0.1), [1.0, 2.0], 0.05, depth=depth) == "stalled"


def test_regime_code_table():
    codes = {  # (collapsed, settled, leader, visited_other, first); target 4
        "collapse": (True, False, 0, False, 4),
        "sequential": (False, True, 4, True, 1),
        "direct": (False, True, 4, False, 4),
        "excursion": (False, True, 4, True, 4),
        "minor": (False, True, 1, True, 4),
        "undetermined": (False, False, 4, True, 1),  # "stalled" is set by decide(), not here
    }
    for name, (collapsed, settled, leader, other, first) in codes.items():
        code = analysis.regime_code(collapsed, settled, leader, other, 4, first)
        assert analysis.REGIMES[int(code)] == name
    # the codes of earlier versions (on disk, in phase.nc attrs) keep their numbers
    assert analysis.REGIMES[:6] == (
        "collapse", "sequential", "direct", "minor", "stalled", "undetermined"
    )  # fmt: skip


def test_regime_d1_and_gd():
    m = flows.L2SAM(1.0)
    assert analysis.regime(m, [2.0], 0.7) == "collapse"  # d = 1: dw/dτ = μ(w − ρ/√2)
    assert analysis.regime(m, [2.0], 0.715) == "direct"
    assert analysis.regime(flows.GD(), [1.0, 2.0, 3.0], 1e-3) == "direct"


def test_regime_three_regimes_from_hand_bounds():
    n = np.linalg.norm(MU)
    m = flows.L2SAM(1.0)
    r = analysis.regime_path(m, MU, 0.99 / (SQ2 * n))  # all shrink from the start: collapse
    assert r.regime == "collapse" and abs(r.loss_end - np.log(2)) < 1e-5
    r = analysis.regime_path(m, MU, 1.01 * 5 / (SQ2 * n))  # all grow, below α_s
    assert r.regime == "sequential" and r.sequence[-1] == 4 and r.sequence[0] != 4
    assert analysis.regime(m, MU, 1.01 * 9 / (SQ2 * n)) == "direct"  # above α_s = 9/(√2‖μ‖)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=-1.0), "alpha"),
        (dict(mu=[1.0, 0.0]), "mu"),
        (dict(depth=0), "depth"),
        (dict(method="sam"), "method"),
        (dict(alpha=[1.0, 2.0, 3.0]), "alpha"),
        (dict(max_passes=0), "max_passes"),
    ],
)
def test_regime_bad_input(kwargs, name):
    args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0], alpha=0.5) | kwargs
    with pytest.raises(ValueError, match=name):
        analysis.regime(**args)


MU3 = np.array([1.0, 2.0, 3.0])
# Scale twins (docs/theory.md §6): (α, ρ) → λ(α, ρ) maps the rescaled flow by θ → λθ and
# τ → τ/λ^{L-2}. At L = 2 every λ from 1e-150 to 1e150; at L >= 3, as far as β = ∏_l θ^{(l)}
# stays a float64 at the end of the run (100·0.5λ at L = 3: λ <= 1e90 here; λ^4 at L = 4).
TWIN_LAMBDAS = {
    2: (1e-150, 1e-100, 1e-30, 1e-25, 1e-12, 1e30, 1e150),
    3: (1e-150, 1e-100, 1e-30, 1e-25, 1e-12, 1e30, 1e90),
    4: (1e-70, 1e-25, 1e30, 1e60),
}


def _collapse_reference(alpha):
    """The reduced L = 2 flow (scipy): its j† path and the τ where ‖w‖ = 1e-6 ‖w(0)‖ (the
    collapse event, ‖θ‖ = √2‖w‖ for the balanced flow)."""

    sol = _reference.l2sam_flow(MU3, alpha, 1.0, 2, 1e3, w_min=1e-7 * alpha)
    assert sol.status == 1 and len(sol.t_events[1]) == 1  # collapsed
    seq, times = _reference.dense_argmax_changes(sol)
    norm0 = np.linalg.norm(np.full(3, alpha))
    tau = scipy.optimize.brentq(
        lambda t: np.linalg.norm(sol.sol(t)) - 1e-6 * norm0, 0.0, sol.t[-1], xtol=1e-15
    )
    return seq, times, tau


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_regime_path_scale_twins_at_every_magnitude(depth):
    # The case at L = 2: (ρ, α) = λ(1, 0.1) collapses; an absolute atol = 1e-30, above
    # the weights at λ <= 1e-25, made it end late (1.59 for 0.2125) or 'sequential' there.
    # At L = 3, 4 (α = 0.5ρ) it escapes through the sequence of the reduced flow.
    if depth == 2:
        alpha = 0.1
        seq, times, tau = _collapse_reference(alpha)
        regime, status = "collapse", "collapsed"
    else:
        alpha = 0.5
        seq, times = _reference.dense_argmax_changes(
            _reference.l2sam_flow(MU3, alpha, 1.0, depth, 1e8)
        )
        tau, regime, status = None, "sequential", "escaped"
    assert seq == ([0] if depth == 2 else [0, 1, 2])
    ref = analysis.regime_path(flows.L2SAM(1.0), MU3, alpha, depth=depth)
    assert (ref.regime, ref.status, ref.sequence) == (regime, status, seq)
    np.testing.assert_allclose(ref.times, times, rtol=1e-6)
    if tau is not None:
        np.testing.assert_allclose(ref.t_end, tau, rtol=1e-6)
    for lam in TWIN_LAMBDAS[depth]:
        r = analysis.regime_path(flows.L2SAM(lam), MU3, alpha * lam, depth=depth)
        scale = lam ** (depth - 2)  # τ → τ/λ^{L-2}
        assert (r.regime, r.status, r.sequence) == (regime, status, seq), lam
        # the same flow, to rounding: far tighter than the references above
        np.testing.assert_allclose(r.times * scale, ref.times, rtol=1e-9, err_msg=f"λ = {lam}")
        np.testing.assert_allclose(r.t_end * scale, ref.t_end, rtol=1e-9, err_msg=f"λ = {lam}")
        assert r.restarts == ref.restarts, lam


def test_regime_path_user_atol_is_absolute():
    # A number stays an absolute tolerance (the documented meaning): 1e-30 exceeds the weights
    # of the λ = 1e-30 twin, whose solve then stops resolving them; with the default (relative
    # to θ₀) the same twin collapses as at λ = 1.
    # An absolute 1e-30 at λ = 1e-30 is the scale twin of atol = 1 at λ = 1 (θ → λθ, same τ at
    # L = 2): a solve that resolves nothing, which escapes through 1 -> 3 -> 1 -> 3 instead of
    # collapsing. Read as relative, 1e-30 would resolve the weights and the twin would collapse.
    lam = 1e-30
    assert analysis.regime(flows.L2SAM(lam), MU3, 0.1 * lam) == "collapse"
    r = analysis.regime_path(flows.L2SAM(lam), MU3, 0.1 * lam, atol=1e-30)
    one = analysis.regime_path(flows.L2SAM(1.0), MU3, 0.1, atol=1.0)
    assert (r.regime, r.status, r.sequence) == ("sequential", "escaped", [0, 2, 0, 2])
    assert (one.regime, one.status, one.sequence) == (r.regime, r.status, r.sequence)
    np.testing.assert_allclose(r.times, one.times, rtol=1e-9)
    np.testing.assert_allclose(r.t_end, one.t_end, rtol=1e-9)
    assert abs(r.t_end - _collapse_reference(0.1)[2]) > 1e-3


def test_switch_times_while_minor_weights_decay_far_below_the_start():
    """The plateau takes the minor weights to ~1e-48 of the start; the last switch is still
    resolved to 1e-9 against the scalar reduction in log variables (48.4567, not 48.4230): its
    accuracy does not depend on how small a weight gets (analysis._reference.scalar_reduction,
    j† changes by brentq between 20,000 samples)."""
    mu, alpha = [0.5, 1.0, 4.0], 0.48
    _, log_w = _reference.scalar_reduction(mu, alpha, 1.0, 100.0)
    sequence, times = _reference.argmax_changes(log_w, np.linspace(1e-9, 100.0, 20001), 1e-14)
    r = analysis.regime_path(flows.L2SAM(1.0), mu, alpha)
    assert r.sequence == sequence == [1, 0, 1, 2]
    np.testing.assert_allclose(r.times, times, rtol=1e-9)


@functools.cache
def _twin_at_scale_one(depth, alpha):
    r = analysis.regime_path(flows.L2SAM(1.0), MU, alpha, depth=depth)
    return r.regime, r.status, r.sequence


@settings(max_examples=4, deadline=None)
@given(
    depth=st.sampled_from([2, 3, 4, 6]),
    k=st.integers(-12, 12),
    alpha=st.sampled_from([0.5, 0.7]),
)
@example(depth=4, k=-6, alpha=0.7)  # rounding at the uniform start read as switches
@example(depth=4, k=-6, alpha=0.5)
@example(depth=6, k=-6, alpha=0.5)
def test_regime_path_is_scale_invariant(depth, k, alpha):
    """(λα, λρ) has the sequence, regime and status of its twin at λ = 1 (scale invariance)."""
    lam = 10.0**k
    r = analysis.regime_path(flows.L2SAM(lam), MU, alpha * lam, depth=depth)
    assert (r.regime, r.status, r.sequence) == _twin_at_scale_one(depth, alpha)


def test_regime_path_under_a_schedule_continues_on_the_real_clock():
    """LE-SAM with the annealed σ(t) (0 from t = T = 2 on) read on the real clock, solved in
    passes of τ = 0.25: each pass must start its schedule at the real time where the last one
    ended. The sequence and switch times of j† against the hand-written flow solved in one
    piece until T, then GD's closed forms (tests/helpers.annealed_switches)."""
    mu, alpha = [1.0, 2.0, 3.0], 0.1
    sequence, times, tau_T = annealed_switches(mu, alpha, 0.3, cosine_sigma, 2.0)
    # the switches come after T, from the state the schedule left at τ_T ≈ 0.99 (4 passes)
    assert sequence == [0, 1, 2] and tau_T < times[0]
    r = analysis.regime_path(flows.LESAM(cosine_sigma, 0.3), mu, alpha, t1=0.25)
    assert r.restarts > 10 and r.regime == "sequential"
    assert r.sequence == sequence
    np.testing.assert_allclose(r.times, times, rtol=1e-7)


@pytest.mark.parametrize("depth", [2, 4])
def test_an_undetermined_run_says_why(depth):
    """One pass of 8 steps decides nothing from a start near α_c (the run lingers for τ ≫ 1):
    the path is undetermined and its reason names the spent budget and the remedy; the same run
    with the default budgets is decided, with no reason. A boundary search that meets such a
    run raises with the same reason."""
    method, mu = flows.L2SAM(1.0), [1.0, 2.0, 3.0, 4.0, 5.0]
    alpha = analysis.critical_alpha(method, mu, depth) * (1 + 1e-6)
    r = analysis.regime_path(method, mu, alpha, depth, max_passes=1, max_steps=8)
    assert (r.regime, r.status, r.restarts) == ("undetermined", "max_steps", 0)
    assert "after 1 passes" in r.reason and "spent its 8 steps" in r.reason
    assert "`max_passes`" in r.reason
    assert analysis.regime_path(method, mu, alpha, depth).reason == ""
    with pytest.raises(RuntimeError, match="spent its 8 steps"):
        analysis.critical_alpha(method, mu, depth, bracket=(alpha / 2, 2 * alpha),
                                max_passes=1, max_steps=8)  # fmt: skip
