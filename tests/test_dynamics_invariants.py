"""Conservation laws and symmetries of the flows (issue 2, test 6)."""

import numpy as np

import flows
from tests.helpers import separable_data


def test_gd_conserves_layer_imbalance_L2():
    """For L = 2, d/dt (w1_j² − w2_j²) = 2 w1_j ẇ1_j − 2 w2_j ẇ2_j = 0 under GD."""
    data = separable_data(n=5, d=3, seed=11)
    theta0 = np.array([[0.9, -0.2, 0.4], [0.1, 0.7, -0.5]])  # unbalanced, mixed signs
    traj = flows.solve(
        flows.GD(), data, theta0, t1=50.0, ts=np.linspace(0, 50, 51), rtol=1e-12, atol=1e-14
    )
    assert traj.status_name == "ok"
    th = np.asarray(traj.thetas)
    imbalance = th[:, 0] ** 2 - th[:, 1] ** 2
    np.testing.assert_allclose(imbalance, imbalance[:1].repeat(len(th), 0), atol=1e-10)
    assert np.max(np.abs(th[-1] - th[0])) > 0.5  # the weights did move


def test_gd_discrete_breaks_imbalance_only_at_order_lr_squared():
    """One Euler step changes w1² − w2² by O(η²): the conservation is a flow property."""
    data = separable_data(n=5, d=3, seed=11)
    theta0 = np.array([[0.9, -0.2, 0.4], [0.1, 0.7, -0.5]])
    drift = []
    for lr in (1e-2, 1e-3):
        th = np.asarray(flows.iterate(flows.GD(), data, theta0, lr=lr, steps=1).thetas[-1])
        drift.append(np.max(np.abs((th[0] ** 2 - th[1] ** 2) - (theta0[0] ** 2 - theta0[1] ** 2))))
    assert 80 < drift[0] / drift[1] < 120  # quadratic in η


def test_l2sam_keeps_balanced_init_balanced():
    data = separable_data(n=5, d=3, seed=4)
    theta0 = flows.balanced_init(np.array([0.3, 0.5, 0.8]), 2)
    for rescaled, d in ((False, data), (True, flows.single_example([1.0, 2.0, 3.0]))):
        traj = flows.solve(
            flows.L2SAM(0.4), d, theta0, t1=5.0, ts=np.linspace(0, 5, 26), rescaled=rescaled
        )
        th = np.asarray(traj.thetas)[np.asarray(traj.reached)]
        np.testing.assert_array_equal(th[:, 0], th[:, 1])
        assert np.max(np.abs(th[-1] - th[0])) > 0.05
    it = flows.iterate(flows.L2SAM(0.4), data, theta0, lr=0.05, steps=200, every=20)
    np.testing.assert_array_equal(np.asarray(it.thetas[:, 0]), np.asarray(it.thetas[:, 1]))


def test_balanced_l2sam_matches_science_closed_form_field():
    """docs/theory.md §9: dw_j/dτ = μ_j w_j (1 − ρ μ_j / (√2 ‖μ ⊙ w‖)) for balanced L = 2."""
    mu = np.array([1.0, 2.0, 3.0, 4.0])
    w = np.array([0.3, 0.1, 0.5, 0.2])
    rho = 0.4
    got = np.asarray(
        flows.rescaled_velocity(
            flows.L2SAM(rho), flows.single_example(mu), "logistic", np.stack([w, w])
        )
    )
    expected = mu * w * (1 - rho * mu / (np.sqrt(2) * np.linalg.norm(mu * w)))
    np.testing.assert_allclose(got[0], expected, rtol=1e-13)
    np.testing.assert_allclose(got[1], expected, rtol=1e-13)
