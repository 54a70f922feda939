"""analysis._certify: the escape / settled certificates hold on independent integrations.

For random balanced states at L = 2…6, whenever the certificate says "settled on k", the
reduced ℓ2-SAM flow integrated by scipy (tests/helpers.py) keeps k as argmax w until it blows
up; whenever it says "escaped", w_max grows past 10³. The q-order guard flags states whose
order the exact flow cannot reach.
"""

import numpy as np
import pytest

import analysis
import flows
from analysis._certify import invariant_leader, keeps_invariant_order, time_scale
from tests.helpers import reduced_l2sam

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize("depth", [2, 3, 4, 6])
def test_settled_states_stay_settled_on_the_reduced_flow(depth):
    rng = np.random.default_rng(depth)
    checked = 0
    for _ in range(40):
        w = rng.uniform(0.5, 6.0, MU.size)
        theta = np.tile(w, (depth, 1))
        escaped, leader, settled = (
            np.asarray(x) for x in analysis.certificate(theta, MU, 1.0, depth)
        )
        if not settled:
            continue
        assert escaped
        sol = reduced_l2sam(MU, w, 1.0, depth, 50.0, w_max=1e4 * w.max())
        ts = np.linspace(sol.t[0], sol.t[-1], 2001)
        assert np.all(np.argmax(sol.sol(ts), axis=0) == leader)
        checked += 1
        if checked == 4:
            break
    assert checked >= 3  # the test exercised the certificate


def test_certificate_is_not_granted_to_a_leader_that_loses():
    # L = 2, w = (3, 1): index 0 leads but μ_1 > μ_0 lets index 1 overtake (reduced flow).
    mu = np.array([1.0, 2.0])
    theta = np.tile([3.0, 1.0], (2, 1))
    escaped, leader, settled = analysis.certificate(theta, mu, 0.1, 2)
    assert bool(escaped) and int(leader) == 0 and not bool(settled)
    sol = reduced_l2sam(mu, [3.0, 1.0], 0.1, 2, 20.0, w_max=1e6)
    assert np.argmax(sol.y[:, -1]) == 1


def test_depth1_certificate_is_exact():
    # L = 1: dw/dτ = μ exactly, so k leads forever iff w_k >= w_j and μ_k >= μ_j.
    mu = np.array([1.0, 2.0])
    assert bool(analysis.certificate([[2.0, 1.0]], mu, 0.5, 1)[2]) is False  # 1 overtakes at τ=1
    assert bool(analysis.certificate([[1.0, 2.0]], mu, 0.5, 1)[2]) is True


def test_invariant_order_and_leader():
    m = flows.L2SAM(1.0)
    theta0 = np.tile(np.full(5, 0.3), (4, 1))
    assert int(invariant_leader(m, theta0, MU, 4)) == 4  # argmax μ_j α^{L-2}
    assert int(invariant_leader(m, theta0, MU, 2)) == -1  # the theorem is for L >= 3
    assert int(invariant_leader(flows.LinfSAM(0.1), theta0, MU, 4)) == -1
    assert not bool(keeps_invariant_order(m, theta0, np.tile(0.3 * MU**-0.5, (4, 1)), MU, 4))
    w = 0.3 * MU**-0.5  # all q_j = μ_j w_j² equal: the order is lost
    assert not bool(keeps_invariant_order(m, theta0, np.tile(w, (4, 1)), MU, 4))
    assert bool(keeps_invariant_order(m, theta0, theta0 * 2, MU, 4))


def test_time_scale_is_homogeneous():
    # The field is homogeneous of degree L-1 in (θ, e): time scales as s^(2-L).
    theta = np.full((4, 3), 0.5)
    mu = np.array([1.0, 2.0, 3.0])
    assert float(time_scale(theta, mu, 0.1, 4)) == pytest.approx(0.5**-2)
    assert float(time_scale(10 * theta, mu, 1.0, 4)) == pytest.approx(5.0**-2)


def test_perturbation_bound_bad_method():
    with pytest.raises(ValueError, match="method"):
        analysis.perturbation_bound("sam")
