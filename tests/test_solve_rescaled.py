"""The rescaled flow traces the same path as the plain flow (issue 2, test 5)."""

import jax
import numpy as np
import pytest

import flows
from tests.helpers import cosine_sigma

CASES = {
    "gd_L2": (flows.GD(), 2, 0.3),
    "l2sam_L2": (flows.L2SAM(0.2), 2, 0.5),
    "l2sam_L3": (flows.L2SAM(0.1), 3, 0.6),
    "lesam_L2": (flows.LESAM(0.35, 0.3), 2, 0.5),
    # σ(t) read at the real time t(τ) carried in the rescaled state (issue 11: read
    # at τ the directions differed by 2.2e-2).
    "lesam_schedule_L2": (flows.LESAM(cosine_sigma, 0.3), 2, 0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rescaled_and_plain_flows_trace_the_same_path(name):
    """Compare the direction β/‖β‖ at matched ‖β‖ (‖β‖ grows monotonically in these cases)."""
    method, depth, alpha = CASES[name]
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = flows.balanced_init(alpha, depth, d=3)
    tol = dict(rtol=1e-11, atol=1e-13)
    plain = flows.solve(method, data, theta0, t1=3e3, ts=np.geomspace(1e-3, 3e3, 400), **tol)
    assert plain.status_name == "ok"
    b_plain = np.asarray(plain.beta)
    n_plain = np.linalg.norm(b_plain, axis=1)
    resc = flows.solve(
        method, data, theta0, t1=40.0, rescaled=True, escape_tol=None, dense=True, **tol
    )
    n_grid = np.linalg.norm(np.asarray(resc.beta)[np.asarray(resc.reached)], axis=1)
    assert np.all(np.diff(n_plain) > 0) and np.all(np.diff(n_grid) > 0)
    assert n_grid[-1] > n_plain[-1]  # the rescaled path covers the plain one
    # τ at which the rescaled ‖β‖ equals each plain ‖β‖, by bisection on the dense output
    beta_at = jax.jit(jax.vmap(lambda tau: flows.beta(resc.evaluate(tau))))
    lo, hi = np.zeros_like(n_plain), np.full_like(n_plain, float(resc.t_end))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = np.linalg.norm(np.asarray(beta_at(mid)), axis=1) < n_plain
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    matched = np.asarray(beta_at(0.5 * (lo + hi)))
    dir_plain = b_plain / n_plain[:, None]
    dir_resc = matched / np.linalg.norm(matched, axis=1, keepdims=True)
    assert np.max(np.linalg.norm(dir_plain - dir_resc, axis=1)) < 1e-6
    # and the plain flow moved far enough for this to mean something
    assert n_plain[-1] > 3 * n_plain[0]
    if method.time_dependent:  # the real time carried at matched ‖β‖ is the plain t
        t_at = jax.jit(jax.vmap(resc.interpolation.t_real))(0.5 * (lo + hi))
        np.testing.assert_allclose(np.asarray(t_at), np.asarray(plain.ts), rtol=1e-6)


def test_rescaled_clock_matches_integrated_loss_derivative():
    """τ(t) = ∫₀ᵗ −ℓ'(m(θ̂)) ds: GD on one example, L = 1, where θ̂ = θ."""
    mu, b0 = 1.5, 0.2
    data = flows.single_example([mu])
    # plain GD, L = 1, logistic: β' = μ σ(−μβ); rescaled: dβ/dτ = μ, so β(τ) = β0 + μτ
    plain = flows.solve(
        flows.GD(), data, np.array([[b0]]), t1=50.0, ts=[50.0], rtol=1e-12, atol=1e-14
    )
    beta_t = float(plain.beta[-1, 0])
    # closed form of the plain flow: e^{μβ} + μβ = e^{μβ0} + μβ0 + μ² t
    lhs = np.exp(mu * beta_t) + mu * beta_t
    assert lhs == pytest.approx(np.exp(mu * b0) + mu * b0 + mu**2 * 50.0, rel=1e-9)
    tau = (beta_t - b0) / mu
    resc = flows.solve(
        flows.GD(), data, np.array([[b0]]), t1=tau, ts=[tau], rescaled=True,
        options=flows.SolverOptions(rtol=1e-12, atol=1e-14, real_time=True),
    )  # fmt: skip
    assert float(resc.beta[-1, 0]) == pytest.approx(beta_t, rel=1e-10)
    # the real time carried in the rescaled state (issue 11)
    assert float(resc.t_real[-1]) == pytest.approx(50.0, rel=1e-9)
    assert float(resc.t_real_end) == pytest.approx(50.0, rel=1e-9)
    np.testing.assert_array_equal(plain.t_real, plain.ts)  # the plain flow's own clock


def test_real_clock_finite_where_the_loss_derivative_underflows():
    """dt/dτ = exp(−log(−ℓ'(m̂))), log(−ℓ') from flows.log_speed (finite at any margin).

    GD, L = 1, logistic: β = β0 + μτ and t = ∫(1 + e^{μβ}) dτ; past m ≈ 745, −ℓ'(m)
    underflows to 0; the clock is reported up to dt/dτ = e^600, as inf after.
    """
    z = np.linspace(-30.0, 30.0, 13)
    for loss in ("logistic", "exponential"):
        np.testing.assert_allclose(
            flows.log_speed(loss, z), np.log(-np.asarray(flows.loss_derivative(loss, z))),
            rtol=1e-12, atol=1e-12,
        )  # fmt: skip
    mu, b0 = 1.0, 0.0
    taus = np.array([1.0, 5.0, 25.0])
    options = flows.SolverOptions(escape_tol=None, rtol=1e-12, atol=1e-14, real_time=True)
    resc = flows.solve(
        flows.GD(), flows.single_example([mu]), np.array([[b0]]), t1=800.0, ts=taus,
        rescaled=True, options=options,
    )  # fmt: skip
    assert resc.status_name == "ok"
    # t(τ) = τ + (e^{μτ} − 1)/μ for β0 = 0
    expected = taus + np.expm1(mu * taus) / mu
    np.testing.assert_allclose(np.asarray(resc.t_real), expected, rtol=1e-8)
    assert float(resc.t_real_end) == np.inf  # e^{800}: past the range, but no NaN anywhere
    assert int(resc.n_steps) < 1000
    # not carried (GD ignores the time): NaN, and the same path
    bare = flows.solve(
        flows.GD(), flows.single_example([mu]), np.array([[b0]]), t1=800.0, ts=taus,
        rescaled=True, options=options.replace(real_time=False),
    )  # fmt: skip
    assert np.all(np.isnan(np.asarray(bare.t_real)))
    np.testing.assert_allclose(np.asarray(bare.thetas), np.asarray(resc.thetas), rtol=1e-9)
    assert np.all(np.isfinite(np.asarray(resc.thetas)))
