"""analysis._dominant (j†, its tie rule, switch times): every expected value comes from a
closed form, a hand derivation, or an independent scipy computation, never from the function
under test."""

import warnings

import equinox as eqx
import jax
import numpy as np
import pytest

import analysis
import flows
from analysis import _reference
from tests.helpers import N_SAVE, gd_rescaled, grid, l2sam_d1

SQ2 = np.sqrt(2.0)


# --- dominant index and its fastest-growing variant ---------------------------------


def test_dominant_index_matches_closed_form_gd():
    # GD, L = 2: w_j = α_j e^{μ_j τ}, so log|β_j| = 2 log α_j + 2 μ_j τ.
    mu, alpha = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.5, 0.2])
    ts = grid(1.5)
    traj = gd_rescaled(mu, alpha, 2, 1.5)
    expected = np.argmax(2 * np.log(alpha) + 2 * mu * ts[:, None], axis=1)
    assert analysis.dominant_index(traj).tolist() == expected.tolist()


def test_dominant_at_is_the_closed_form_argmax_at_every_saved_state():
    # The same GD run, state by state: dominant_at(θ(τ_k)) = argmax_j (2 log α_j + 2 μ_j τ_k),
    # batched over the saved states and under jit and vmap.
    mu, alpha = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.5, 0.2])
    ts = grid(1.5)
    traj = gd_rescaled(mu, alpha, 2, 1.5)
    expected = np.argmax(2 * np.log(alpha) + 2 * mu * ts[:, None], axis=1)
    assert len(set(expected.tolist())) == 3  # every index leads somewhere on the grid
    assert np.asarray(analysis.dominant_at(traj.thetas)).tolist() == expected.tolist()
    traced = jax.jit(jax.vmap(analysis.dominant_at))(traj.thetas)
    assert np.asarray(traced).tolist() == expected.tolist()


def test_dominant_at_orders_products_that_underflow_and_breaks_ties_low():
    # L = 4, every β_j = ∏_l w_j^(l) underflows to 0 (argmax |β| would say 0); by hand,
    # log10|β| = (-420, -410, -430): index 1.
    theta = np.array([[1e-100, 1e-110, 1e-200]] * 2 + [[1e-110, 1e-95, 1e-15]] * 2)
    assert np.all(np.prod(theta, axis=0) == 0.0)
    assert int(analysis.dominant_at(theta)) == 1
    # |β| = (2, 2, 1) with a sign: an exact tie goes to the lowest index
    assert int(analysis.dominant_at(np.array([[1.0, -2.0, 1.0], [2.0, 1.0, 1.0]]))) == 0


def test_dominant_index_tie_rule_and_unreached():
    # Uniform α: every |β_j(0)| ties; the right limit for GD is argmax μ (rates 2 μ_j).
    traj = gd_rescaled([1.0, 3.0, 2.0], [0.5, 0.5, 0.5], 2, 1.0)
    assert analysis.dominant_index(traj).tolist() == [1] * N_SAVE
    # d = 1, ℓ2-SAM, L = 2: dw/dτ = μ (w - ρ/√2); from α < ρ/√2 it collapses at
    # τ_c = log((ρ/√2 - 1e-6 α) / (ρ/√2 - α)) / μ, after which nothing is reached.
    mu, rho, a = 2.0, 1.0, 0.5
    tau_c = np.log((rho / SQ2 - 1e-6 * a) / (rho / SQ2 - a)) / mu
    traj = l2sam_d1(a, 2.1 * tau_c)
    assert traj.status_name == "collapsed"
    assert abs(float(traj.t_end) - tau_c) < 1e-8
    expected = np.where(grid(2.1 * tau_c) <= tau_c, 0, -1)
    assert analysis.dominant_index(traj).tolist() == expected.tolist()


def test_fastest_growing_index_closed_form_l2sam():
    # docs/theory.md §9, ℓ2-SAM, L = 2, balanced: d log β_j / dτ = 2 d log w_j / dτ
    #   r_j(τ) = 2 μ_j (1 - ρ μ_j / (√2 ‖μ ⊙ w(τ)‖)),
    # with w(τ) from scipy's Radau on the reduced flow (analysis._reference.l2sam_flow), not from
    # the trajectory. Its argmax moves from minor to major as ‖μ ⊙ w‖ grows (τ ≲ 0.4 here), so
    # a constant answer (e.g. the one at t = 0) fails for α = 0.3, 0.5 and 0.7.
    mu, rho, t1 = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 1.0, 1.0
    moving = 0
    for a in (0.3, 0.5, 0.7, 1.0):
        p = analysis.Problem(
            flows.L2SAM(rho),
            flows.single_example(mu),
            flows.balanced_init(a, 2, 5),
            t1,
            rescaled=True,
        )
        rates = 2 * mu * (1 - rho * mu / (SQ2 * a * np.linalg.norm(mu)))
        np.testing.assert_allclose(p.rates(p.theta0), rates, rtol=1e-12)
        traj = p.solve()
        assert traj.status_name == "ok"  # every saved time is reached (α = 0.3 collapses later)
        ts = np.asarray(traj.ts)
        ref = _reference.l2sam_flow(mu, a, rho, 2, t1, w_max=1e300)
        assert ref.status == 0  # reached t1, no event
        norm = np.linalg.norm(mu[:, None] * ref.sol(ts), axis=0)
        r = 2 * mu[:, None] * (1 - rho * mu[:, None] / (SQ2 * norm))  # (d, T)
        expected = np.argmax(r, axis=0)
        # Skip saved times where the top two rates tie to within 1e-4 of their scale: there
        # the index is decided by the solvers' errors (the run's rtol 1e-8, and up to 1e-4
        # relative measured in the tiny coordinates of α = 0.3, from its atol), not
        # by the function under test. Here the closest pair is 1.5e-3 apart, so none is skipped.
        top2 = np.sort(r, axis=0)[-2:]
        clear = top2[1] - top2[0] > 1e-4 * np.max(np.abs(r), axis=0)
        assert clear.mean() > 0.9
        got = analysis.fastest_growing_index(traj, p)
        assert got[clear].tolist() == expected[clear].tolist()
        moving += len(set(expected.tolist())) > 1
    assert moving == 3  # the check sees the index move, not just its value at t = 0


def test_fastest_growing_index_compiles_once_for_every_saved_time():
    """The rates at 40 saved times are one compiled program, not one per time (the time was a
    static argument: 40 compilations, 13 s of the mechanism figure's 17)."""
    compiled = []

    def listen(event, duration, fun_name=None, **_):
        if event.endswith("backend_compile_duration") and "log_growth_rates" in str(fun_name):
            compiled.append(fun_name)

    jax.monitoring.register_event_duration_secs_listener(listen)
    p = analysis.Problem(flows.L2SAM(0.4), flows.single_example([1.0, 2.0, 3.0]),
                         flows.balanced_init(0.37, 2, 3), 0.5, rescaled=True)  # fmt: skip
    traj = p.solve(ts=np.linspace(0.0, 0.5, 40))
    analysis.fastest_growing_index(traj, p)  # its values: the closed-form test above
    assert len(compiled) <= 1, compiled  # the first call's, if this worker had none yet


def test_dominant_bad_input():
    traj = gd_rescaled([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 2, 1.0)
    with pytest.raises(ValueError, match="traj"):
        analysis.dominant_index("not a trajectory")
    with pytest.raises(ValueError, match="tie_rtol"):
        analysis.dominant_index(traj, tie_rtol=-1.0)
    batch = jax.vmap(lambda a: gd_rescaled([1.0, 2.0], [0.5, 0.5], 2, 1.0, dense=False))(np.ones(2))
    with pytest.raises(ValueError, match="traj"):
        analysis.dominant_index(batch)
    with pytest.raises(ValueError, match="problem"):
        analysis.fastest_growing_index(traj, problem=None)


# --- switch times -------------------------------------------------------------------


def test_switch_times_gd_l2_closed_form():
    # Upper envelope of the lines 2 log α_j + 2 μ_j τ: 0 -> 1 at log 2, 1 -> 2 at log(5/2).
    traj = gd_rescaled([1.0, 2.0, 3.0], [1.0, 0.5, 0.2], 2, 2.0)
    s = analysis.switch_times(traj)
    assert s.sequence == [0, 1, 2]
    # solve's default rtol is 1e-8: the located times are that accurate, not the grid's 0.05.
    np.testing.assert_allclose(s.times, [np.log(2.0), np.log(2.5)], rtol=1e-8)
    assert s.before.tolist() == [0, 1] and s.after.tolist() == [1, 2] and s.final == 2


def test_switch_times_gd_l3_closed_form_skips_middle_index():
    # GD, L = 3: w_j = α_j / (1 - μ_j α_j τ). w_0 = w_2 at τ = 0.55 / 0.9; index 1 never leads.
    mu, alpha = [1.0, 2.0, 3.0], [1.0, 0.6, 0.45]
    traj = gd_rescaled(mu, alpha, 3, 0.7, rtol=1e-10, atol=1e-12)
    s = analysis.switch_times(traj)
    assert s.sequence == [0, 2]
    np.testing.assert_allclose(s.times, [0.55 / 0.9], rtol=1e-9)


def test_switch_times_with_a_dead_coordinate_warns_nothing():
    """A coordinate at 0 (β_j = 0, log|β_j| = -inf) stays there under GD; the others switch as
    in the closed form (rescaled GD, L = 2: w_j = α_j e^{μ_j τ}, 0 -> 2 at τ = log(5)/2),
    and reading j†(0) (in NumPy) raises no floating-point warning."""
    theta0 = np.array([[1.0, 0.0, 0.2], [1.0, 0.0, 0.2]])
    data = flows.single_example([1.0, 2.0, 3.0])
    traj = flows.solve(flows.GD(), data, theta0, t1=1.0, rescaled=True, dense=True, rtol=1e-10,
                       atol=1e-12)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = analysis.switch_times(traj)
    assert s.sequence == [0, 2]
    np.testing.assert_allclose(s.times, [np.log(5.0) / 2], rtol=1e-9)


def test_switch_times_tie_at_zero_problem_and_trajectory_agree():
    # Uniform α, ℓ2-SAM: j†(0) is the fastest initial rate 2 μ_j (1 - ρ μ_j / (√2 α ‖μ‖)).
    mu, rho, a = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 1.0, 0.6
    p = analysis.Problem(
        flows.L2SAM(rho),
        flows.single_example(mu),
        flows.balanced_init(a, 2, 5),
        50.0,
        rescaled=True,
    )
    expected0 = int(np.argmax(mu * (1 - rho * mu / (SQ2 * a * np.linalg.norm(mu)))))
    s1, s2 = analysis.switch_times(p), analysis.switch_times(p.solve())
    assert s1.initial == s2.initial == expected0
    assert s1.sequence == s2.sequence and s1.final == 4
    np.testing.assert_allclose(s1.times, s2.times, rtol=1e-12)
    # Independent reference: argmax_j w_j (the same order as |β_j| = w_j² here) of scipy's
    # Radau on the reduced flow (rtol 1e-12), changes by brentq (xtol 1e-13 t_end), for the
    # same μ, α = 0.6, ρ = 1, L = 2; no escape event before t1 = 50 (w ≲ e^{250} < 1e300).
    ref_seq, ref_times = _reference.dense_argmax_changes(
        _reference.l2sam_flow(mu, a, rho, 2, 50.0, w_max=1e300)
    )
    assert s1.sequence == ref_seq  # [2, 3, 4]: minor first, major last
    # The run has rtol 1e-8 (flows.solve's default), the reference 1e-12: the crossing times
    # agree to the run's global error, a few 1e-8 relative (2e-8 measured); 1e-7 bounds it.
    np.testing.assert_allclose(s1.times, ref_times, rtol=1e-7)
    # At each located time the two leaders tie on the dense output.
    traj = p.solve()
    for t, a_, b_ in zip(s1.times, s1.before, s1.after, strict=True):
        logb = np.sum(np.log(np.abs(np.asarray(traj.evaluate(t)))), axis=0)
        assert abs(logb[a_] - logb[b_]) < 1e-9


def test_switch_times_split_bracket_finds_a_short_lived_leader():
    # GD, L = 2: log|β_j| = 2 log α_j + 2 μ_j τ. With μ = (1, 2, 3), index 1 overtakes 0 at
    # τ_01 = log(α_0/α_1) / (μ_1 - μ_0) and 2 overtakes 1 at τ_12 = log(α_1/α_2) / (μ_2 - μ_1);
    # α is chosen so that τ_01 = 1.02 and τ_12 = τ_01 + 1e-4: index 1 leads for 1e-4, far less
    # than one solver step (≈ 0.04). Sampled once per step, j† seems to jump 0 -> 2; Brent's
    # root of β_2 = β_0 (at τ_02 = (τ_01 + τ_12)/2) has index 1 above both, so the bracket must
    # be split (_locate's recursion) to find 0 -> 1 -> 2. Without it: [0, 2] at τ_02.
    mu = np.array([1.0, 2.0, 3.0])
    alpha = np.array([1.0, np.exp(-1.02), np.exp(-1.02 - 1.0201)])
    t01 = np.log(alpha[0] / alpha[1]) / (mu[1] - mu[0])
    t12 = np.log(alpha[1] / alpha[2]) / (mu[2] - mu[1])
    assert 0 < t12 - t01 < 2e-4
    traj = gd_rescaled(mu, alpha, 2, 2.0)
    # precondition: no solver step ends inside [τ_01, τ_12] (so one sample interval holds both)
    nodes = np.asarray(traj.interpolation.ts)
    assert not np.any((nodes >= t01) & (nodes <= t12))
    s = analysis.switch_times(traj, samples_per_step=1)
    assert s.sequence == [0, 1, 2]
    np.testing.assert_allclose(s.times, [t01, t12], rtol=1e-8)  # solve's default rtol
    assert s.before.tolist() == [0, 1] and s.after.tolist() == [1, 2] and s.final == 2


def test_switch_times_bad_input():
    traj = gd_rescaled([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 2, 1.0)
    with pytest.raises(ValueError, match="dense"):
        analysis.switch_times(eqx.tree_at(lambda t: t.interpolation, traj, None))
    with pytest.raises(ValueError, match="traj_or_problem"):
        analysis.switch_times(42)
    with pytest.raises(ValueError, match="samples_per_step"):
        analysis.switch_times(traj, samples_per_step=0)


def test_dominant_at_names_a_theta_without_features():
    # found by the hostile draws of the property tests (tests/properties.py) under another
    # seed: shape (2, 0) gave JAX's "argmax of an empty sequence", naming nothing
    with pytest.raises(ValueError, match="`theta`"):
        analysis.dominant_at(np.zeros((2, 0)))
    assert int(analysis.dominant_at(np.array([[1.0, -3.0], [2.0, 1.0]]))) == 1  # |β| = (2, 3)
