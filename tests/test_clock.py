r"""The norm clock :math:`ds=(\lVert\theta\rVert/\lVert\theta_0\rVert)^{L-2}d\tau`
(analysis._clock): it is τ at L = 2, it matches the closed form of GD at L = 3 with the
trapezoid rule's second-order error, it matches an independent scipy solve of ℓ2-SAM's reduced
balanced flow (docs/theory.md §8) with an adaptive quadrature of its norm, it is traceable, and bad
input is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import analysis
import flows
from analysis import _reference
from flows._validate import WrongTypeError


def _solve(method, mu, alpha, depth, **kw):
    return flows.solve(
        method,
        flows.single_example(mu),
        flows.balanced_init(alpha, depth, len(mu)),
        rescaled=True,
        dense=True,
        **kw,
    )


def test_the_clock_is_tau_at_depth_two():
    traj = _solve(flows.L2SAM(1.0), [1.0, 2.0, 3.0], 0.6, 2, t1=5.0)
    clock = analysis.norm_clock(traj, n=256)
    np.testing.assert_allclose(clock.s, clock.tau, rtol=1e-13, atol=1e-15)
    assert float(clock.tau[0]) == 0.0 and float(clock.tau[-1]) == float(traj.t_end)
    assert np.all(np.diff(np.asarray(clock.tau)) >= 0)


def test_gd_depth_three_closed_form_and_second_order_convergence():
    """GD, L = 3, d = 1: w = α/(1 − αμτ), so s = −log(1 − αμτ)/(αμ); here αμ = 0.8 and the run
    stops at ‖θ‖ = 10⁶‖θ₀‖, i.e. 10⁻⁶ before the blow-up, where s = log(10⁶)/0.8 = 17.3."""
    alpha, mu = 0.4, 2.0
    traj = _solve(flows.GD(), [mu], alpha, 3, t1=2.0, escape_tol=1e6, rtol=1e-12)
    assert traj.status_name == "escaped"
    errors = []
    for n in (1024, 2048, 4096):
        clock = analysis.norm_clock(traj, n=n)
        exact = -np.log1p(-alpha * mu * np.asarray(clock.tau)) / (alpha * mu)
        errors.append(np.max(np.abs(np.asarray(clock.s) - exact)) / exact[-1])
    assert exact[-1] == pytest.approx(np.log(1e6) / 0.8, rel=1e-6)
    assert errors[1] < 3e-4  # the accuracy the docstring states at the default n
    # trapezoid rule on a grid of log-step h ~ 1/n: the error falls as n^-2
    assert errors[0] / errors[1] == pytest.approx(4.0, rel=0.1)
    assert errors[1] / errors[2] == pytest.approx(4.0, rel=0.1)


def test_tau_at_and_s_at_invert_the_closed_form_clock():
    """GD, L = 3, d = 1 as above: τ(s) = (1 − e^{−αμs})/(αμ). ``tau_at`` and ``s_at`` read the
    clock's pairs back both ways, to the trapezoid rule's accuracy at the default n (3e-4 of the
    clock's span, the bound above) and exactly at the grid's own points."""
    alpha, mu = 0.4, 2.0
    traj = _solve(flows.GD(), [mu], alpha, 3, t1=2.0, escape_tol=1e6, rtol=1e-12)
    clock = analysis.norm_clock(traj)
    s_end = float(clock.s[-1])
    s = np.linspace(0.0, 0.9 * s_end, 200)
    tau_exact = -np.expm1(-alpha * mu * s) / (alpha * mu)
    # dτ/ds = e^{−αμs} ≤ 1: an error δ in s moves τ by at most δ
    np.testing.assert_allclose(clock.tau_at(s), tau_exact, rtol=0, atol=3e-4 * s_end)
    s_exact = -np.log1p(-alpha * mu * tau_exact) / (alpha * mu)
    np.testing.assert_allclose(clock.s_at(tau_exact), s_exact, rtol=0, atol=3e-4 * s_end)
    np.testing.assert_array_equal(clock.tau_at(clock.s), clock.tau)
    np.testing.assert_array_equal(clock.s_at(clock.tau), clock.s)


ESCAPE, COLLAPSE = 10.0, 1e-3  # the run's escape_tol and collapse_tol: ‖θ‖/‖θ₀‖ thresholds


def _reduced_to_norm_event(mu, alpha, rho, depth, t_max):
    r"""scipy's Radau (rtol 1e-12) on the balanced ℓ2-SAM reduced flow of docs/theory.md §8,
    dw_j/dτ = μ_j ŵ_j^{L-1}, ŵ = w − ρ μ⊙w^{L−1}/√(L Σ_k μ_k² w_k^{2L−2}), stopped by a terminal
    event at ‖w‖/‖w₀‖ = ESCAPE (event 0) or COLLAPSE (event 1). A balanced θ has every layer
    equal to w, so ‖θ‖/‖θ₀‖ = ‖w‖/‖w₀‖: the same thresholds as the run's events."""
    w0 = np.full(mu.size, alpha)
    n0 = np.linalg.norm(w0)

    def up(t, w):
        return np.linalg.norm(w) / n0 - ESCAPE

    def down(t, w):
        return np.linalg.norm(w) / n0 - COLLAPSE

    up.terminal = down.terminal = True
    return scipy.integrate.solve_ivp(
        _reference.l2sam_field(mu, rho, depth),
        (0.0, t_max),
        w0,
        method="Radau",
        rtol=1e-12,
        atol=1e-14 * alpha,
        dense_output=True,
        events=[up, down],
    )


@pytest.mark.parametrize(("depth", "alpha"), [(3, 0.3), (4, 0.5), (4, 0.21)])
def test_l2sam_matches_a_scipy_integration_of_the_reduced_flow(depth, alpha):
    """Escapes and a collapse: θ against scipy's Radau on the reduced flow, and s against an
    adaptive scipy quadrature of its norm ratio, to the trapezoid's accuracy. Where the run ends
    (the ratio ‖θ‖/‖θ₀‖ reaches 10 or 1e-3) and why (escaped or collapsed) come from the
    reference's own terminal events, not from the run."""
    mu, rho, t1 = np.array([1.0, 2.0, 3.0]), 1.0, 500.0
    ref = _reduced_to_norm_event(mu, alpha, rho, depth, t1)
    assert ref.status == 1  # a terminal event fired before t1
    (fired,) = [k for k, te in enumerate(ref.t_events) if te.size]
    status = ("escaped", "collapsed")[fired]
    traj = _solve(
        flows.L2SAM(rho),
        mu,
        alpha,
        depth,
        t1=t1,
        escape_tol=ESCAPE,
        collapse_tol=COLLAPSE,
        rtol=1e-12,
    )
    assert traj.status_name == status
    # Both runs stop on the same norm level: the event times agree to the solvers' accuracy
    # (rtol 1e-12 each, event roots to ~1e-14): 1e-9 relative leaves room for the error in τ
    # that a relative error 1e-12..1e-10 of ‖w‖ makes where d log‖w‖/dτ is O(0.1..1).
    assert float(traj.t_end) == pytest.approx(ref.t_events[fired][0], rel=1e-9)
    clock = analysis.norm_clock(traj)
    tau, first = np.unique(np.asarray(clock.tau), return_index=True)  # the end repeats t_end
    w0 = np.linalg.norm(np.full(mu.size, alpha))
    s_ref = scipy.integrate.solve_ivp(
        lambda t, _: [(np.linalg.norm(ref.sol(t)) / w0) ** (depth - 2)],
        (0.0, tau[-1]),
        [0.0],
        t_eval=tau,
        rtol=1e-12,
        atol=1e-14,
    )
    np.testing.assert_allclose(np.asarray(clock.thetas)[first, 0], ref.sol(tau).T, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(clock.s)[first], s_ref.y[0], rtol=2e-4, atol=1e-12)


def test_traceable_under_jit_and_vmap():
    mu = flows.single_example([1.0, 2.0])

    def s_end(alpha):
        traj = flows.solve(
            flows.GD(),
            mu,
            flows.balanced_init(alpha, 3, 2),
            t1=10.0,
            rescaled=True,
            dense=True,
            escape_tol=1e3,
            max_steps=2048,
        )
        return analysis.norm_clock(traj, n=512).s[-1]

    alphas = jnp.array([0.3, 0.6])
    batched = jax.jit(jax.vmap(s_end))(alphas)
    assert np.all(np.isfinite(batched))
    np.testing.assert_allclose(batched, [float(s_end(a)) for a in alphas], rtol=1e-12)


def test_bad_input_is_refused():
    traj = _solve(flows.GD(), [1.0, 2.0], 0.5, 3, t1=0.1)
    with pytest.raises(WrongTypeError, match="`traj` must be a flows.Trajectory"):
        analysis.norm_clock("trajectory")
    sparse = flows.solve(
        flows.GD(),
        flows.single_example([1.0, 2.0]),
        flows.balanced_init(0.5, 3, 2),
        t1=0.1,
        rescaled=True,
    )
    with pytest.raises(ValueError, match="dense output"):
        analysis.norm_clock(sparse)
    with pytest.raises(ValueError, match="`n`"):
        analysis.norm_clock(traj, n=2)
    for first in (0.0, 0.5, "0.1", True):
        with pytest.raises(ValueError, match="`first`"):
            analysis.norm_clock(traj, first=first)
    batch = jax.vmap(
        lambda a: flows.solve(
            flows.GD(),
            flows.single_example([1.0, 2.0]),
            flows.balanced_init(a, 3, 2),
            t1=0.1,
            rescaled=True,
            dense=True,
        )
    )(jnp.array([0.5, 0.6]))
    with pytest.raises(ValueError, match="single trajectory"):
        analysis.norm_clock(batch)
