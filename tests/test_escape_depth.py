r"""The rescaled flow's finite-time blow-up ends ``escaped`` at every depth.

GD from the balanced start :math:`w_{lj}=\alpha`: :math:`\dot w_j=\mu_jw_j^{L-1}`
(docs/theory.md §8), so coordinate j blows up at :math:`1/((L-2)\mu_j\alpha^{L-2})` and the run at
:math:`\tau^*=1/((L-2)\alpha^{L-2}\max\mu)`. Balanced ℓ2-SAM on one coordinate:
:math:`\varepsilon_l=-\rho/\sqrt L`, so :math:`u=w-\rho/\sqrt L` follows GD from
:math:`u_0=\alpha-\rho/\sqrt L` and :math:`\tau^*=1/((L-2)\mu u_0^{L-2})`. The default escape
threshold fires :math:`\approx10^{-10}\tau^*` before the blow-up (``SolverOptions.escape``).
"""

import numpy as np
import pytest

import flows

MU = [1.0, 2.0, 3.0, 4.0, 5.0]
DEPTHS = range(3, 9)
TIGHT = flows.SolverOptions(backend="numba", rtol=1e-12)


def _gd_tau_star(alpha, depth):
    return 1.0 / ((depth - 2) * alpha ** (depth - 2) * max(MU))


def test_the_reported_blow_up_at_depth_5_escapes_in_a_few_hundred_steps():
    # with the fixed threshold 1e6 it ended `max_steps` after 100,000 steps at τ = 0.53333336
    tr = flows.solve_many(
        flows.GD(), flows.single_example(MU), np.full((5, 5), 0.5), t1=50.0, rescaled=True
    )
    assert tr.status_name == ["escaped"]
    assert int(tr.n_steps[0]) < 1000
    np.testing.assert_allclose(tr.t_end[0], 8.0 / 15.0, rtol=1e-6)  # rtol 1e-8 solve


@pytest.mark.parametrize("depth", DEPTHS)
def test_gd_escapes_at_the_closed_form_blow_up_on_engine_and_diffrax(depth):
    alpha = 0.5
    tau_star = _gd_tau_star(alpha, depth)
    theta0 = np.full((depth, len(MU)), alpha)
    data = flows.single_example(MU)
    engine = flows.solve_many(
        flows.GD(), data, theta0[None], t1=50.0, rescaled=True, options=TIGHT
    )
    assert engine.status_name == ["escaped"]
    np.testing.assert_allclose(engine.t_end[0], tau_star, rtol=1e-9)
    assert int(engine.n_steps[0]) < 3000
    if depth in (3, 5, 8):  # diffrax compiles per depth
        tr = flows.solve(flows.GD(), data, theta0, t1=50.0, rescaled=True, rtol=1e-12)
        assert tr.status_name == "escaped"
        np.testing.assert_allclose(float(tr.t_end), tau_star, rtol=1e-9)


@pytest.mark.parametrize("depth", [3, 4, 6, 7])
def test_l2sam_escapes_at_the_closed_form_blow_up_on_engine_and_diffrax(depth):
    mu, alpha, rho = 3.0, 0.8, 0.3
    u0 = alpha - rho / np.sqrt(depth)
    tau_star = 1.0 / ((depth - 2) * mu * u0 ** (depth - 2))
    data, theta0 = flows.single_example([mu]), np.full((depth, 1), alpha)
    engine = flows.solve_many(
        flows.L2SAM(rho), data, theta0[None], t1=1e3, rescaled=True, options=TIGHT
    )
    assert engine.status_name == ["escaped"]
    np.testing.assert_allclose(engine.t_end[0], tau_star, rtol=1e-9)
    tr = flows.solve(flows.L2SAM(rho), data, theta0, t1=1e3, rescaled=True, rtol=1e-12)
    assert tr.status_name == "escaped"
    np.testing.assert_allclose(float(tr.t_end), tau_star, rtol=1e-9)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 8])
def test_the_default_threshold_is_the_norm_clock_rate(depth):
    # ratio^(L-2) = 1e10 at L >= 3 (the norm clock of docs/theory.md §5); 1e6 at L <= 2;
    # none for the plain flow
    options = flows.SolverOptions()
    expected = 1e6 if depth <= 2 else 10.0 ** (10.0 / (depth - 2))
    np.testing.assert_allclose(options.escape(True, depth), expected, rtol=1e-15)
    assert options.escape(False, depth) is None
    assert flows.SolverOptions(escape_tol=7.0).escape(True, depth) == 7.0
