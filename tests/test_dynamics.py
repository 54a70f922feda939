"""Autodiff vector fields against sympy-derived closed forms (issue 2, test 1)."""

import numpy as np
import pytest
import sympy as sp

import flows
from tests.helpers import all_methods, numpy_perturbation, separable_data

SYMPY_LOSS = {"logistic": lambda z: sp.log(1 + sp.exp(-z)), "exponential": lambda z: sp.exp(-z)}


def sympy_gradients(data, depth, loss):
    """Closed-form ∇L(θ) and, for one example, ∇m(θ) and ℓ'(m(θ)), lambdified."""
    X, y = np.asarray(data.X), np.asarray(data.y)
    n, d = X.shape
    th = sp.Matrix(depth, d, lambda i, j: sp.Symbol(f"w{i}_{j}"))
    beta = [sp.Mul(*[th[i, j] for i in range(depth)]) for j in range(d)]
    margins = [
        sp.Integer(int(y[i])) * sum(sp.Float(X[i, j], 30) * beta[j] for j in range(d))
        for i in range(n)
    ]
    ell = SYMPY_LOSS[loss]
    objective = sum(ell(m) for m in margins) / n
    syms = list(th)
    grad_L = sp.lambdify(syms, [sp.diff(objective, s) for s in syms], "numpy")
    grad_m = sp.lambdify(syms, [sp.diff(margins[0], s) for s in syms], "numpy")
    z = sp.Symbol("z")
    dell = sp.lambdify(z, sp.diff(ell(z), z), "numpy")
    m0 = sp.lambdify(syms, margins[0], "numpy")

    def call(fn, theta):
        return np.array(fn(*np.asarray(theta).ravel()), dtype=float).reshape(theta.shape)

    return (
        lambda th_: call(grad_L, th_),
        lambda th_: call(grad_m, th_),
        lambda th_: float(dell(float(m0(*np.asarray(th_).ravel())))),
    )


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_plain_flow_matches_sympy(depth, loss):
    data = separable_data(n=4, d=3, seed=depth)
    grad_L, _, _ = sympy_gradients(data, depth, loss)
    rng = np.random.default_rng(10 + depth)
    for name, method in all_methods().items():
        for _ in range(3):
            theta = rng.uniform(0.2, 1.2, size=(depth, 3)) * rng.choice([-1, 1], size=(depth, 3))
            g = grad_L(theta)
            expected = -grad_L(theta + numpy_perturbation(method, g, t=0.7))
            got = np.asarray(flows.velocity(method, data, loss, theta, 0.7))
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_rescaled_flow_matches_sympy(depth, loss):
    mu = np.array([0.5, 1.0, 2.0])
    data = flows.single_example(mu)
    grad_L, grad_m, dell = sympy_gradients(data, depth, loss)
    rng = np.random.default_rng(20 + depth)
    for name, method in all_methods().items():
        for _ in range(3):
            theta = rng.uniform(0.2, 1.0, size=(depth, 3)) * rng.choice([-1, 1], size=(depth, 3))
            # the true gradient, ℓ'(m) ∇m, from the closed form
            g = grad_L(theta)
            np.testing.assert_allclose(g, dell(theta) * grad_m(theta), rtol=1e-12)
            theta_hat = theta + numpy_perturbation(method, g, t=0.3)
            # dθ/dτ = -∇L(θ̂) / (-ℓ'(m(θ̂))) = ∇m(θ̂)
            expected = -grad_L(theta_hat) / -dell(theta_hat)
            got = np.asarray(flows.rescaled_velocity(method, data, loss, theta, 0.3))
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-13, err_msg=name)


def test_rescaled_flow_is_loss_free_for_scale_free_methods():
    """GD, ℓ2-SAM and ℓ∞-SAM perturb along g/|g| only: the rescaled field ignores ℓ (§3)."""
    data = flows.single_example([0.5, 1.0, 2.0])
    theta = np.array([[0.4, -0.7, 1.1], [0.9, 0.3, -0.5]])
    for name, method in all_methods().items():
        a = np.asarray(flows.rescaled_velocity(method, data, "logistic", theta))
        b = np.asarray(flows.rescaled_velocity(method, data, "exponential", theta))
        if method.scale_free:
            np.testing.assert_allclose(a, b, rtol=1e-13, err_msg=name)
        elif name == "lesam":  # σ/|g| below the cap: the radius depends on |ℓ'|
            assert not np.allclose(a, b, rtol=1e-6), name


def test_rescaled_direction_survives_underflow():
    """At margins where ℓ' underflows to 0 the rescaled field is still exact (§3)."""
    data = flows.single_example([1.0, 2.0])
    theta = np.full((2, 2), 30.0)  # margin 2700: exp(-2700) == 0.0 in float64
    assert float(flows.loss_derivative("logistic", 2700.0)) == 0.0
    got = np.asarray(flows.rescaled_velocity(flows.L2SAM(0.5), data, "logistic", theta))
    w_hat = 30.0 - 0.5 / np.sqrt(2) * np.array([1.0, 2.0]) / np.sqrt(5.0)  # ε ∝ -(μ⊙w)
    np.testing.assert_allclose(got, np.array([[1.0, 2.0], [1.0, 2.0]]) * w_hat, rtol=1e-13)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-150, 1.0, 1e150, 1e200, 1e300])
def test_l2_direction_exact_at_every_magnitude(scale):
    """g = scale·(3, 4; 0, 12): ‖g‖ = 13·scale, so ε = ρ (3, 4; 0, 12)/13 at any scale.

    Squaring g underflows below ~1e-154 and overflows above ~1e154 (issue 15).
    """
    g = scale * np.array([[3.0, 4.0], [0.0, 12.0]])
    theta = np.ones((2, 2))
    expected = 0.5 * np.array([[3.0, 4.0], [0.0, 12.0]]) / 13.0
    eps = flows.L2SAM(0.5).perturbation(theta, g, 0.0)
    np.testing.assert_allclose(eps, expected, rtol=1e-15)
    per_layer = flows.L2SAM(0.5, per_layer=True).perturbation(theta, g, 0.0)
    np.testing.assert_allclose(per_layer, 0.5 * np.array([[0.6, 0.8], [0.0, 1.0]]), rtol=1e-15)
    # LE-SAM: ρ_t = min(σ / (‖g‖ + ϱ), ρ_max) with ‖g‖ = 13·scale
    lesam = flows.LESAM(0.35, 0.3).perturbation(theta, g, 0.0)
    rho_t = min(0.35 / (13.0 * scale + 1e-12), 0.3)
    np.testing.assert_allclose(lesam, rho_t * expected / 0.5, rtol=1e-14)


def test_l2_direction_is_zero_at_zero_gradient_and_nan_at_nan():
    theta = np.ones((1, 2))
    assert np.all(np.asarray(flows.L2SAM(0.5).perturbation(theta, np.zeros((1, 2)), 0.0)) == 0)
    nan = flows.L2SAM(0.5).perturbation(theta, np.array([[np.nan, 1.0]]), 0.0)
    assert np.all(np.isnan(np.asarray(nan)))


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_rescaled_l2sam_field_at_extreme_scales_matches_closed_form(scale):
    """docs/theory.md §9, L = 2 balanced: dw_j/dτ = μ_j w_j (1 − ρ μ_j / (√2 ‖μ⊙w‖)).

    With w = scale·a and ρ = scale·r the field is scale·(the field at a, r): the
    ℓ2 direction must not be lost to underflow or overflow of ‖g‖².
    """
    mu, a, r = np.array([1.0, 2.0, 3.0]), 0.4, 1.0
    w = scale * a * np.ones(3)
    theta = np.stack([w, w])
    v = np.asarray(
        flows.rescaled_velocity(flows.L2SAM(scale * r), flows.single_example(mu), "logistic", theta)
    )
    unit = mu * a * (1 - r * mu / (np.sqrt(2) * a * np.linalg.norm(mu)))  # field at a, r
    np.testing.assert_allclose(v / scale, np.stack([unit, unit]), rtol=1e-13)
