"""Discrete updates: against the flow (order 1), against optax's SAM, and ρ = 0 = GD."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flows
from tests.helpers import all_methods, cosine_sigma, numpy_iterate, separable_data

ORDER_CASES = {
    "gd": flows.GD(),
    "l2sam": flows.L2SAM(0.3),
    "l2sam_layer": flows.L2SAM(0.3, per_layer=True),
    "lesam": flows.LESAM(0.05, 0.3),  # σ/‖g‖ below the cap: the loss-equated branch
    "lesam_capped": flows.LESAM(0.35, 0.3),  # ‖g‖ < σ/ρ_max: the cap binds
    "lesam_schedule": flows.LESAM(cosine_sigma, 0.3),
}


@pytest.mark.parametrize("name", list(ORDER_CASES))
def test_discrete_converges_to_flow_at_order_one(name):
    """‖θ_K − θ(Kη)‖ ∝ η: the log-log slope over 5 values of η is 1 ± 0.15."""
    method = ORDER_CASES[name]
    data = separable_data(n=5, d=3, seed=3)
    theta0 = flows.balanced_init(np.array([0.3, 0.5, 0.7]), 2)
    T = 2.0
    flow = flows.solve(method, data, theta0, t1=T, ts=[T], rtol=1e-12, atol=1e-14)
    assert flow.status_name == "ok"
    lrs = T / np.array([40, 80, 160, 320, 640])
    errors = []
    for lr in lrs:
        steps = int(round(T / lr))
        it = flows.iterate(method, data, theta0, lr=lr, steps=steps, every=steps)
        assert float(it.ts[-1]) == pytest.approx(T)
        errors.append(float(jnp.linalg.norm(it.thetas[-1] - flow.thetas[-1])))
    slope = np.polyfit(np.log(lrs), np.log(errors), 1)[0]
    assert abs(slope - 1.0) < 0.15, (slope, errors)


def optax_sam_steps(adversary, data, theta0, lr, rho, steps):
    """`steps` SAM steps with optax.contrib.sam: each is one adversarial + one outer call."""
    opt = optax.contrib.sam(optax.sgd(lr), optax.chain(adversary, optax.sgd(rho)), sync_period=2)
    grad = jax.grad(lambda th: flows.objective(th, data))
    params, state = jnp.asarray(theta0), opt.init(theta0)
    for _ in range(2 * steps):
        updates, state = opt.update(grad(params), state, params)
        params = optax.apply_updates(params, updates)
    return params


@pytest.mark.parametrize(
    "method, adversary",
    [
        (flows.L2SAM(0.07), optax.contrib.normalize()),
        (flows.LinfSAM(0.07), optax.scale_by_sign()),
    ],
    ids=["l2", "linf"],
)
@pytest.mark.parametrize("steps", [1, 5])
def test_discrete_step_matches_optax_sam(method, adversary, steps):
    data = separable_data(n=6, d=4, seed=5)
    rng = np.random.default_rng(1)
    theta0 = rng.normal(size=(3, 4))
    lr = 0.1
    expected = optax_sam_steps(adversary, data, theta0, lr, float(method.rho), steps)
    got = flows.iterate(method, data, theta0, lr=lr, steps=steps, every=steps).thetas[-1]
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "method",
    [flows.L2SAM(0.0), flows.L2SAM(0.0, per_layer=True), flows.LinfSAM(0.0), flows.LESAM(0.0, 0.3)],
)
def test_zero_radius_is_gd_exactly(method):
    data = separable_data(n=4, d=3, seed=2)
    theta0 = flows.balanced_init(np.array([0.2, 0.5, 0.9]), 2)
    gd_it = flows.iterate(flows.GD(), data, theta0, lr=0.05, steps=50, every=10)
    it = flows.iterate(method, data, theta0, lr=0.05, steps=50, every=10)
    np.testing.assert_array_equal(np.asarray(it.thetas), np.asarray(gd_it.thetas))
    kw = dict(t1=5.0, ts=np.linspace(0, 5, 11))
    gd_fl = flows.solve(flows.GD(), data, theta0, **kw)
    fl = flows.solve(method, data, theta0, **kw)
    np.testing.assert_array_equal(np.asarray(fl.thetas), np.asarray(gd_fl.thetas))
    assert int(fl.n_steps) == int(gd_fl.n_steps)


def test_iterate_saving_grid_and_status():
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(0.5, 2, d=2)
    it = flows.iterate(flows.L2SAM(0.1), data, theta0, lr=0.01, steps=300, every=100)
    np.testing.assert_allclose(np.asarray(it.ts), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(it.thetas[0]), np.asarray(theta0))
    assert it.thetas.shape == (4, 2, 2) and it.beta.shape == (4, 2) and it.loss.shape == (4,)
    assert it.status_name == "ok" and int(it.n_steps) == 300
    # the saved iterates are every 100th of an independent numpy update
    expected = numpy_iterate(flows.L2SAM(0.1), data, theta0, 0.01, 300)[::100]
    np.testing.assert_allclose(np.asarray(it.thetas), expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.asarray(it.beta), np.prod(expected, axis=1), rtol=1e-12)
    # an overflowing run is reported, not silent: margin −1200 makes e^{1200} = inf
    theta_bad = np.array([[-20.0, -20.0], [20.0, 20.0]])
    bad = flows.iterate(flows.GD(), data, theta_bad, lr=0.1, steps=5, loss="exponential")
    assert bad.status_name == "nonfinite"


def test_all_methods_run_discrete():
    """Every method's 20 iterates against an independent numpy update (tests.helpers)."""
    data = separable_data()
    theta0 = flows.balanced_init(0.5, 2, d=3)
    for name, method in all_methods().items():
        it = flows.iterate(method, data, theta0, lr=0.1, steps=20)
        assert it.status_name == "ok", name
        expected = numpy_iterate(method, data, theta0, 0.1, 20)
        np.testing.assert_allclose(np.asarray(it.thetas), expected, rtol=1e-12, err_msg=name)
        assert float(it.loss[-1]) < float(it.loss[0]), name


def test_linf_iterate_on_an_exact_zero_steps_off_it():
    """ℓ∞-SAM, L = 2, one example μ = (1, 2), ρ = 0.5, from w_1 = 0 exactly on both layers
    (docs/theory.md §3): sign(0) = +1 gives ŵ_1 = ρ, so one step moves both layers of w_1 to
    η μ_1 ρ / (1 + e^{m̂}) with m̂ = μ_1 ρ² + μ_2 (w_2 − ρ)², by hand; sign(0) = 0 would leave
    them at 0 for good. Then w_1 chatters across 0, within η μ_1 ρ of it (every step is
    η |ℓ'| μ_1 |ŵ_1| with |ŵ_1| ≤ ρ)."""
    mu, rho, lr, w2 = np.array([1.0, 2.0]), 0.5, 0.01, 0.8
    data = flows.single_example(mu)
    theta0 = np.array([[0.0, w2], [0.0, w2]])
    it = flows.iterate(flows.LinfSAM(rho), data, theta0, lr=lr, steps=200)
    m_hat = mu[0] * rho**2 + mu[1] * (w2 - rho) ** 2
    first = lr * mu[0] * rho / (1 + np.exp(m_hat))
    np.testing.assert_allclose(np.asarray(it.thetas[1, :, 0]), [first, first], rtol=1e-13)
    w1 = np.asarray(it.thetas[:, :, 0])
    assert np.array_equal(w1[:, 0], w1[:, 1])  # the layers stay in phase
    assert np.all(np.abs(w1) <= lr * mu[0] * rho) and np.min(w1) < -0.9 * first
    assert np.count_nonzero(np.diff(np.sign(w1[1:, 0]))) > 100  # it chatters
