"""analysis._dominant (j†, its tie rule, switch times): every expected value comes from a
closed form, a hand derivation, or an independent scipy computation, never from the function
under test."""

import equinox as eqx
import jax
import numpy as np
import pytest

import analysis
import flows
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
    # Initial rates (science.md §5): r_j = 2 μ_j (1 - ρ μ_j / (√2 α ‖μ‖)).
    mu, rho = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 1.0
    for a in (0.3, 0.5, 0.7, 1.0):
        p = analysis.Problem(
            flows.L2SAM(rho),
            flows.single_example(mu),
            flows.balanced_init(a, 2, 5),
            dict(t1=0.1, rescaled=True),
        )
        rates = 2 * mu * (1 - rho * mu / (SQ2 * a * np.linalg.norm(mu)))
        np.testing.assert_allclose(p.rates(p.theta0), rates, rtol=1e-12)
        got = analysis.fastest_growing_index(p.solve(), p)
        assert got[0] == int(np.argmax(rates))


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


def test_switch_times_tie_at_zero_problem_and_trajectory_agree():
    # Uniform α, ℓ2-SAM: j†(0) is the fastest initial rate 2 μ_j (1 - ρ μ_j / (√2 α ‖μ‖)).
    mu, rho, a = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 1.0, 0.6
    p = analysis.Problem(
        flows.L2SAM(rho),
        flows.single_example(mu),
        flows.balanced_init(a, 2, 5),
        dict(t1=50.0, rescaled=True),
    )
    expected0 = int(np.argmax(mu * (1 - rho * mu / (SQ2 * a * np.linalg.norm(mu)))))
    s1, s2 = analysis.switch_times(p), analysis.switch_times(p.solve())
    assert s1.initial == s2.initial == expected0
    assert s1.sequence == s2.sequence and s1.final == 4
    np.testing.assert_allclose(s1.times, s2.times, rtol=1e-12)
    # At each located time the two leaders tie on the dense output.
    traj = p.solve()
    for t, a_, b_ in zip(s1.times, s1.before, s1.after, strict=True):
        logb = np.sum(np.log(np.abs(np.asarray(traj.evaluate(t)))), axis=0)
        assert abs(logb[a_] - logb[b_]) < 1e-9


def test_switch_times_bad_input():
    traj = gd_rescaled([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 2, 1.0)
    with pytest.raises(ValueError, match="dense"):
        analysis.switch_times(eqx.tree_at(lambda t: t.interpolation, traj, None))
    with pytest.raises(ValueError, match="traj_or_problem"):
        analysis.switch_times(42)
    with pytest.raises(ValueError, match="samples_per_step"):
        analysis.switch_times(traj, samples_per_step=0)
