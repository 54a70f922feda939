"""Tests of analysis/: every expected value comes from a closed form, a hand derivation,
or an independent scipy computation, never from the function under test."""

import numpy as np
import pytest
import scipy.optimize

import analysis
import flows
from tests.helpers import gd_rescaled, grid, l2sam_d1

SQ2 = np.sqrt(2.0)


# --- closed-form thresholds ------------------------------------------------------------


def test_l2sam_thresholds_match_hand_formulas():
    mu, rho = np.array([2.0, 1.0, 5.0, 3.0]), 0.7
    n = np.linalg.norm(mu)
    got = analysis.l2sam_thresholds(mu, rho)
    np.testing.assert_allclose(
        got, [rho / (SQ2 * n), 5 * rho / (SQ2 * n), 8 * rho / (SQ2 * n)], rtol=1e-14
    )
    got = analysis.l2sam_thresholds(mu, rho, per_layer=True)
    np.testing.assert_allclose(got, [rho / n, 5 * rho / n, 8 * rho / n], rtol=1e-14)


@pytest.mark.parametrize(
    "args, name",
    [
        (([1.0, -2.0], 1.0), "mu"),
        (([[1.0, 2.0]], 1.0), "mu"),
        (([1.0, 2.0], -1.0), "rho"),
        (([2.0, 2.0], 1.0), "mu"),
    ],
)
def test_l2sam_thresholds_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        analysis.l2sam_thresholds(*args)


# --- max margin and directional convergence -------------------------------------------


def min_norm_in_hull(z):
    """Independent ℓ2 max-margin direction: the min-norm point of conv{z_i} (NNLS)."""
    n = z.shape[0]
    big = 1e3
    a = np.vstack([z.T, big * np.ones((1, n))])
    lam, _ = scipy.optimize.nnls(a, np.r_[np.zeros(z.shape[1]), big], maxiter=10_000)
    w = z.T @ lam
    return w / np.linalg.norm(w)


def test_max_margin_l2_against_convex_hull():
    rng = np.random.default_rng(3)
    y = rng.choice([-1.0, 1.0], 12)
    x = y[:, None] * (rng.normal(size=(12, 4)) + np.array([2.0, 1.0, 0.0, 0.5]))
    z = y[:, None] * x
    got = analysis.max_margin(flows.Dataset(x, y), 2)
    np.testing.assert_allclose(got, min_norm_in_hull(z), atol=1e-6)


def test_max_margin_hand_cases():
    # z = (1, 1), (1, -1): both max-margin problems give β = (1, 0).
    data = flows.Dataset([[1.0, 1.0], [-1.0, 1.0]], [1, -1])
    np.testing.assert_allclose(analysis.max_margin(data, 2), [1.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(analysis.max_margin(data, 1), [1.0, 0.0], atol=1e-12)
    # One example μ: the ℓ1 solution is e_argmax μ, the ℓ2 solution μ/‖μ‖.
    mu = np.array([1.0, 3.0, 2.0])
    np.testing.assert_allclose(analysis.max_margin(flows.single_example(mu), 1), [0, 1, 0])
    np.testing.assert_allclose(
        analysis.max_margin(flows.single_example(mu), 2), mu / np.linalg.norm(mu), atol=1e-9
    )


def test_max_margin_bad_input():
    with pytest.raises(ValueError, match="data"):
        analysis.max_margin(flows.Dataset([[1.0], [1.0]], [1, -1]), 2)
    with pytest.raises(ValueError, match="data"):
        analysis.max_margin(np.ones((2, 2)), 1)
    for p in (3, 0, True, "2"):
        with pytest.raises(ValueError, match="`p`"):
            analysis.max_margin(flows.single_example([1.0]), p)


def test_direction_cosine_limit_and_rate_closed_form():
    # GD, L = 2: β_j = α_j² e^{2 μ_j τ}; 1 - cos(β, e_1) ≈ ½ e^{-4 (μ_1 - μ_0) τ}.
    mu, alpha = np.array([1.0, 1.5, 0.5]), np.array([0.8, 0.3, 0.5])
    ts = grid(8.0)
    traj = gd_rescaled(mu, alpha, 2, 8.0, escape_tol=1e12)
    beta = alpha**2 * np.exp(2 * mu * ts[:, None])
    v = np.array([1.0, 1.0, 0.0])
    expected = beta @ v / (np.linalg.norm(beta, axis=1) * np.sqrt(2))
    np.testing.assert_allclose(analysis.direction_cosine(traj, v), expected, rtol=1e-7)
    b_end = alpha**2 * np.exp(2 * mu * float(traj.t_end))
    np.testing.assert_allclose(
        analysis.limit_direction(traj), b_end / np.linalg.norm(b_end), rtol=1e-7
    )
    rate = analysis.convergence_rate(traj, [0.0, 1.0, 0.0], model="exp", tail=0.5)
    assert abs(rate.rate / (4 * 0.5) - 1) < 5e-3  # the fit also sees the O(r⁴) terms


def test_direction_bad_input():
    traj = gd_rescaled([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 2, 1.0)
    for bad in ([0.0, 0.0, 0.0], [1.0], [np.nan, 1.0, 0.0]):
        with pytest.raises(ValueError, match="direction"):
            analysis.direction_cosine(traj, bad)
    with pytest.raises(ValueError, match="model"):
        analysis.convergence_rate(traj, [1.0, 0.0, 0.0], model="linear")
    with pytest.raises(ValueError, match="tail"):
        analysis.convergence_rate(traj, [1.0, 0.0, 0.0], tail=0.0)
    with pytest.raises(ValueError, match="traj"):
        analysis.limit_direction(None)


# --- loss plateau ----------------------------------------------------------------------


def test_loss_plateau_at_the_d1_equilibrium():
    # d = 1, α = ρ/√2: the rescaled flow sits at its equilibrium, so the loss is the
    # constant ℓ(μ ρ²/2) over the whole run.
    mu, rho = 2.0, 1.0
    pl = analysis.loss_plateau(l2sam_d1(rho / SQ2, 5.0), band=1e-6)
    assert (pl.start, pl.end) == (0.0, 5.0)
    assert abs(pl.height / np.log1p(np.exp(-mu * rho**2 / 2)) - 1) < 1e-9


def test_loss_plateau_none_on_steady_decrease_and_bad_band():
    traj = gd_rescaled([1.0, 2.0, 3.0], [0.5, 0.5, 0.5], 2, 2.0)
    assert analysis.loss_plateau(traj, band=1e-3).duration == 0.0
    with pytest.raises(ValueError, match="band"):
        analysis.loss_plateau(traj, band=0.0)
