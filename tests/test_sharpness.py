r"""analysis.sharpness: trace, top eigenvalue and gradient norm of the θ-Hessian of the loss.

Expected values come from the closed form (derived by hand, module docstring of
analysis/_sharpness.py), written here in numpy and evaluated at the trajectory's saved states:

.. math::
    H=\frac1n\sum_i\big(\ell''(m_i)\nabla m_i\nabla m_i^\top+\ell'(m_i)\nabla^2m_i\big),\qquad
    \partial_{w^{(l)}_j}m_i=y_ix_{ij}\prod_{k\ne l}w^{(k)}_j,

with ℓ', ℓ'' of the logistic loss from scipy's expit (ℓ'=-expit(-z), ℓ''=expit(z)expit(-z)) or
of the exponential loss; at L = 3 the Hessian comes from sympy instead. Eigenvalues of the
expected matrices are numpy's ``eigvalsh``.

analysis.lesam_radius against the numpy perturbation rule of tests.helpers and the branch
condition of docs/theory.md §2 written out; analysis.at_loss against a power law (exact).
"""

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import sympy

import analysis
import flows
from tests.helpers import (
    cosine_sigma,
    numpy_logistic_grad,
    numpy_perturbation,
    separable_data,
)


def _derivatives(loss, z):
    """(ℓ'(z), ℓ''(z)) in numpy, independently of flows."""
    if loss == "logistic":
        return -scipy.special.expit(-z), scipy.special.expit(z) * scipy.special.expit(-z)
    return -np.exp(-z), np.exp(-z)


def _closed_form(theta, data, loss):
    """(trace, λ_max, ‖∇L‖) of the closed-form θ-Hessian at θ (L, d), any depth."""
    X, y = np.asarray(data.X), np.asarray(data.y)
    depth, d = theta.shape
    n = X.shape[0]
    m = y * (X @ np.prod(theta, axis=0))
    d1, d2 = _derivatives(loss, m)
    hess = np.zeros((depth * d, depth * d))
    grad = np.zeros(depth * d)
    for i in range(n):
        # ∂m_i/∂w_j^(l) = y_i x_ij Π_{k≠l} w_j^(k); index l*d + j
        gm = np.array(
            [
                y[i] * X[i, j] * np.prod(np.delete(theta[:, j], layer))
                for layer in range(depth)
                for j in range(d)
            ]
        )
        hm = np.zeros((depth * d, depth * d))
        for j in range(d):
            for l1 in range(depth):
                for l2 in range(depth):
                    if l1 != l2:
                        rest = np.prod(np.delete(theta[:, j], [l1, l2]))
                        hm[l1 * d + j, l2 * d + j] = y[i] * X[i, j] * rest
        hess += (d2[i] * np.outer(gm, gm) + d1[i] * hm) / n
        grad += d1[i] * gm / n
    return np.trace(hess), np.linalg.eigvalsh(hess)[-1], np.linalg.norm(grad)


def _gd_trajectory(data, theta0, loss="logistic", t1=3.0):
    ts = np.linspace(0.0, t1, 7)
    return flows.solve(flows.GD(), data, np.asarray(theta0, dtype=float), t1=t1, ts=ts, loss=loss)


def _check_against(traj, data, loss, expected_fn, rtol=1e-9):
    got = analysis.sharpness(traj, data, loss=loss)
    thetas = np.asarray(traj.thetas)
    assert np.asarray(traj.reached).all()
    for k in range(thetas.shape[0]):
        tr, top, gn = expected_fn(thetas[k], data, loss)
        np.testing.assert_allclose(got.trace[k], tr, rtol=rtol)
        np.testing.assert_allclose(got.top[k], top, rtol=rtol)
        np.testing.assert_allclose(got.grad_norm[k], gn, rtol=rtol)
    return got


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_depth_one_is_the_data_hessian(loss):
    """L = 1: H = (1/n) Σ ℓ''(m_i) x_i x_iᵀ (PSD; the θ- and β-Hessians agree)."""
    data = separable_data(n=5, d=3, seed=1)
    traj = _gd_trajectory(data, [[0.3, -0.2, 0.1]], loss)

    def expected(theta, data, loss):
        X, y = np.asarray(data.X), np.asarray(data.y)
        d1, d2 = _derivatives(loss, y * (X @ theta[0]))
        hess = (X.T * d2) @ X / X.shape[0]
        grad = X.T @ (d1 * y) / X.shape[0]
        return np.trace(hess), np.linalg.eigvalsh(hess)[-1], np.linalg.norm(grad)

    got = _check_against(traj, data, loss, expected)
    assert np.all(got.top > 0) and np.all(got.trace >= got.top)


def test_depth_one_single_example_hand_values():
    """One example, L = 1: H = ℓ''(m) μμᵀ, so tr H = λ_max = ℓ''(m)‖μ‖², ‖∇L‖ = |ℓ'(m)|‖μ‖."""
    mu = np.array([1.0, 2.0])
    data = flows.single_example(mu)
    traj = _gd_trajectory(data, [[0.5, 0.25]])
    m = np.asarray(traj.thetas)[:, 0, :] @ mu
    got = analysis.sharpness(traj, data)
    sig = 1 / (1 + np.exp(-m))
    np.testing.assert_allclose(got.trace, sig * (1 - sig) * 5.0, rtol=1e-12)
    np.testing.assert_allclose(got.top, sig * (1 - sig) * 5.0, rtol=1e-12)
    np.testing.assert_allclose(got.grad_norm, (1 - sig) * np.sqrt(5.0), rtol=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_depth_two_closed_form_unbalanced(loss):
    """L = 2 from an unbalanced, mixed-sign start, n = 4 examples: the full closed form."""
    data = separable_data(n=4, d=3, seed=2)
    theta0 = [[0.4, -0.3, 0.2], [0.1, 0.5, -0.6]]
    _check_against(_gd_trajectory(data, theta0, loss), data, loss, _closed_form)


def test_depth_two_scalar_eigenvalues():
    r"""L = 2, d = 1, one example μ, w^(1) = w^(2) = w: H = ℓ''μ²w²·11ᵀ + ℓ'μ·[[0,1],[1,0]].

    Eigenvectors (1, 1) and (1, -1): λ = 2ℓ''μ²w² + ℓ'μ and λ = -ℓ'μ (> 0), so
    λ_max = max of the two and tr H = 2ℓ''μ²w². Both signs of 2ℓ''μ²w² + 2ℓ'μ occur on the run.
    """
    mu = 1.5
    data = flows.single_example([mu])
    traj = flows.solve(
        flows.GD(), data, flows.balanced_init(0.2, 2, 1), t1=6.0, ts=np.linspace(0, 6.0, 13)
    )
    w = np.asarray(traj.thetas)[:, 0, 0]
    m = mu * w**2
    d1, d2 = _derivatives("logistic", m)
    first, second = 2 * d2 * mu**2 * w**2 + d1 * mu, -d1 * mu
    assert np.any(first > second) and np.any(first < second)  # the top eigenvector changes
    got = analysis.sharpness(traj, data)
    np.testing.assert_allclose(got.top, np.maximum(first, second), rtol=1e-11)
    np.testing.assert_allclose(got.trace, 2 * d2 * mu**2 * w**2, rtol=1e-11)
    np.testing.assert_allclose(got.grad_norm, -d1 * mu * np.sqrt(2) * np.abs(w), rtol=1e-11)


def test_depth_two_has_negative_curvature_near_the_origin():
    """Near θ = 0 the term ℓ'∇²m (eigenvalues ±μ_j/2) dominates: λ_max ≈ max μ / 2 ≫ tr H."""
    data = flows.single_example([1.0, 2.0])
    traj = _gd_trajectory(data, flows.balanced_init(1e-3, 2, 2), t1=1e-3)
    got = analysis.sharpness(traj, data)
    theta = np.asarray(traj.thetas)[0]
    X = np.array([1.0, 2.0])
    # at β ≈ 0: ℓ'(0) = -1/2, eigenvalues of -½[[0, D],[D, 0]] are ±½μ_j, ℓ'' term O(α²)
    np.testing.assert_allclose(got.top[0], 0.5 * X.max(), rtol=1e-5)
    assert got.trace[0] == pytest.approx(_closed_form(theta, data, "logistic")[0], rel=1e-10)
    assert got.trace[0] < 1e-5  # tr H = ℓ''‖∇m‖² = O(α²), far below λ_max


@pytest.fixture(scope="module")
def sympy_depth_three():
    """The L = 3 Hessian and gradient of the logistic loss on a two-example dataset, by sympy."""
    X = np.array([[1.0, 0.5], [0.25, -1.5]])
    y = np.array([1.0, -1.0])
    w = sympy.Matrix(3, 2, lambda k, j: sympy.Symbol(f"w{k}{j}"))
    beta = [w[0, j] * w[1, j] * w[2, j] for j in range(2)]
    objective = sum(
        sympy.log(1 + sympy.exp(-sympy.Rational(int(y[i])) * sum(
            sympy.nsimplify(X[i, j]) * beta[j] for j in range(2)
        )))
        for i in range(2)
    ) / 2  # fmt: skip
    symbols = list(w)  # row-major: layer l, coordinate j -> l*d + j, as θ.reshape(-1)
    hess = sympy.lambdify(symbols, sympy.hessian(objective, symbols), "numpy")
    grad = sympy.lambdify(symbols, [sympy.diff(objective, s) for s in symbols], "numpy")
    return flows.Dataset(X, y), hess, grad


def test_depth_three_against_sympy(sympy_depth_three):
    data, hess, grad = sympy_depth_three

    def expected(theta, data, loss):
        h = np.array(hess(*theta.reshape(-1)), dtype=float)
        g = np.array(grad(*theta.reshape(-1)), dtype=float)
        return np.trace(h), np.linalg.eigvalsh(h)[-1], np.linalg.norm(g)

    theta0 = [[0.6, -0.4], [0.5, 0.3], [-0.7, 0.45]]
    _check_against(_gd_trajectory(data, theta0, t1=2.0), data, "logistic", expected)
    # and the numpy closed form agrees with sympy at depth 3 (the formula used at L = 2)
    theta = np.array(theta0)
    np.testing.assert_allclose(_closed_form(theta, data, "logistic"), expected(theta, data, None))


def test_rescaled_and_discrete_trajectories():
    """The Hessian is a function of θ alone: a rescaled flow and discrete iterates work alike."""
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = flows.balanced_init(0.4, 2, 3)
    rescaled = flows.solve(
        flows.L2SAM(0.2), data, theta0, t1=1.0, ts=np.linspace(0, 1, 5), rescaled=True
    )
    discrete = flows.iterate(flows.LESAM(0.35, 0.3), data, theta0, lr=0.05, steps=20, every=5)
    for traj in (rescaled, discrete):
        _check_against(traj, data, "logistic", _closed_form)


def test_nan_exactly_after_t_end():
    """A collapsing run: NaN at the saved times after t_end, finite closed-form values before."""
    data = flows.single_example([1.0, 2.0])
    traj = flows.solve(
        flows.L2SAM(1.0),
        data,
        flows.balanced_init(0.05, 2, 2),
        t1=50.0,
        ts=np.linspace(0.0, 50.0, 11),
        rescaled=True,
        collapse_tol=1e-3,
    )
    assert traj.status_name == "collapsed"
    reached = np.asarray(traj.reached)
    assert reached.any() and not reached.all()
    got = analysis.sharpness(traj, data)
    for values in got:
        assert np.all(np.isnan(values[~reached])) and np.all(np.isfinite(values[reached]))
    thetas = np.asarray(traj.thetas)
    for k in np.flatnonzero(reached):
        np.testing.assert_allclose(
            [got.trace[k], got.top[k], got.grad_norm[k]],
            _closed_form(thetas[k], data, "logistic"),
            rtol=1e-9,
        )


@pytest.fixture(scope="module")
def small_run():
    data = flows.single_example([1.0, 2.0])
    return data, _gd_trajectory(data, flows.balanced_init(0.3, 2, 2))


@pytest.mark.parametrize(
    "args, name",
    [
        (lambda traj, data: ("not a trajectory", data), "`traj`"),
        (lambda traj, data: (traj, "not data"), "`data`"),
        (lambda traj, data: (traj, flows.single_example([1.0, 2.0, 3.0])), "`data`"),
        (lambda traj, data: (traj, flows.single_example([1.0, 2.5])), "`data`"),
        (lambda traj, data: (traj, data, "hinge"), "`loss`"),
        (lambda traj, data: (traj, data, "exponential"), "`loss`"),
    ],
    ids=["traj", "data-type", "data-d", "data-other", "loss-unknown", "loss-other"],
)
def test_bad_input_names_the_argument(small_run, args, name):
    data, traj = small_run
    with pytest.raises(ValueError, match=name):
        analysis.sharpness(*args(traj, data))


def test_batched_trajectory_is_refused(small_run):
    data, traj = small_run
    import jax

    batch = jax.tree.map(lambda x: np.stack([x, x]) if hasattr(x, "shape") else x, traj)
    with pytest.raises(ValueError, match="`traj`"):
        analysis.sharpness(batch, data)


def test_non_finite_reached_state_is_refused(small_run):
    data, traj = small_run
    import equinox as eqx

    thetas = np.asarray(traj.thetas).copy()
    thetas[2, 0, 0] = np.nan
    broken = eqx.tree_at(lambda t: t.thetas, traj, thetas)
    with pytest.raises(ValueError, match="non-finite state"):
        analysis.sharpness(broken, data)


# --- analysis.margin_gradient_norm ---------------------------------------------------------


def _margin_grad_fd(theta, data, h=1e-6):
    """‖∇m‖ of the one example's margin m = y⟨Π_l θ_l, x⟩ by central differences in numpy."""
    x, y = np.asarray(data.X)[0], float(np.asarray(data.y)[0])

    def m(th):
        return y * x @ np.prod(th, axis=0)

    grad = np.zeros_like(theta)
    for idx in np.ndindex(theta.shape):
        step = np.zeros_like(theta)
        step[idx] = h
        grad[idx] = (m(theta + step) - m(theta - step)) / (2 * h)
    return np.linalg.norm(grad)


def test_margin_gradient_norm_against_finite_differences_and_loss_gradient():
    """Unbalanced L = 3 states of a GD run: ‖∇m‖ against central differences of m (numpy), and
    ‖∇L‖ = |ℓ'(m)|·‖∇m‖ for one example, with ‖∇L‖ and ℓ' from the closed form of this file."""
    data = flows.Dataset([[0.5, -1.5, 2.0]], [-1])
    theta0 = np.array([[0.7, -0.4, -0.9], [0.3, 0.8, -0.6], [1.1, 0.5, 0.4]])
    traj = _gd_trajectory(data, theta0, t1=1.0)
    got = analysis.margin_gradient_norm(traj, data)
    thetas = np.asarray(traj.thetas)
    for k in range(thetas.shape[0]):
        np.testing.assert_allclose(got[k], _margin_grad_fd(thetas[k], data), rtol=1e-8)
        m = float(np.asarray(data.y)[0] * np.asarray(data.X)[0] @ np.prod(thetas[k], axis=0))
        d1, _ = _derivatives("logistic", m)
        np.testing.assert_allclose(
            abs(d1) * got[k], _closed_form(thetas[k], data, "logistic")[2], rtol=1e-12
        )


def test_margin_gradient_norm_balanced_closed_form_nan_after_t_end_and_no_overflow():
    """L = 2 from a balanced start: ‖∇m‖ = √2‖μ⊙w‖ (∂m/∂w_j^(l) = μ_j w_j on both layers); NaN
    after a collapse; weights of 1e200, whose squares overflow, give the finite √2·1e200‖μ‖."""
    mu = np.array([1.0, 2.0])
    data = flows.single_example(mu)
    traj = flows.solve(
        flows.L2SAM(1.0), data, flows.balanced_init(0.05, 2, 2), t1=50.0,
        ts=np.linspace(0.0, 50.0, 11), rescaled=True, collapse_tol=1e-3,
    )  # fmt: skip
    reached = np.asarray(traj.reached)
    assert reached.any() and not reached.all()
    got = analysis.margin_gradient_norm(traj, data)
    w = np.asarray(traj.thetas)[reached, 0]
    np.testing.assert_allclose(
        got[reached], np.sqrt(2) * np.linalg.norm(mu * w, axis=1), rtol=1e-13
    )
    assert np.all(np.isnan(got[~reached]))
    big = flows.solve(flows.GD(), data, flows.balanced_init(1e200, 2, 2), t1=1e-300, ts=[0.0])
    np.testing.assert_allclose(
        analysis.margin_gradient_norm(big, data), [np.sqrt(2) * 1e200 * np.sqrt(5)], rtol=1e-14
    )


def test_margin_gradient_norm_bad_input(small_run):
    data, traj = small_run
    two = flows.Dataset([[1.0, 2.0], [2.0, 1.0]], [1, 1])
    for args in ((traj, two), (traj, flows.single_example([1.0, 2.0, 3.0])), (traj, "data")):
        with pytest.raises(ValueError, match="`data`"):
            analysis.margin_gradient_norm(*args)
    with pytest.raises(ValueError, match="`traj`"):
        analysis.margin_gradient_norm("traj", data)


# --- analysis.lesam_radius and analysis.at_loss ---------------------------------------------

RADIUS_DATA = flows.single_example([2.0])  # L = 1: g = ℓ'(2w)·2, ‖g‖ = 1 at w = 0


def _expected_radius(method, traj):
    """(ρ_t, budget) at the saved states, in numpy: ρ_t = ‖ε‖ with ε from
    tests.helpers.numpy_perturbation at g = ∇L (tests.helpers.numpy_logistic_grad), and the
    loss-equated branch where σ(t)/(‖g‖ + ϱ) < ρ_max (docs/theory.md §2)."""
    rho, budget = [], []
    for theta, t in zip(np.asarray(traj.thetas), np.asarray(traj.ts), strict=True):
        g = numpy_logistic_grad(theta, RADIUS_DATA)
        rho.append(np.linalg.norm(numpy_perturbation(method, g, t)))
        sigma = float(method.sigma(t)) if callable(method.sigma) else float(method.sigma)
        budget.append(sigma / (np.linalg.norm(g) + float(method.eps)) < float(method.rho_max))
    return np.array(rho), np.array(budget)


@pytest.mark.parametrize("schedule", [False, True], ids=["constant", "cosine"])
def test_lesam_radius_against_numpy(schedule):
    """ρ_t, the branch and the trapezoidal average over [0, until] against numpy. The run
    starts on the loss-equated branch (‖g‖ = 1 > σ/ρ_max) and leaves it; the annealed budget
    (0.35 to 0 at t = 2) brings it back once σ(t) < ρ_max‖g‖."""
    method = flows.LESAM(cosine_sigma if schedule else 0.25, 0.4)
    ts = np.linspace(0.0, 3.0, 31)
    traj = flows.solve(method, RADIUS_DATA, [[0.0]], t1=3.0, ts=ts)
    got = analysis.lesam_radius(traj, RADIUS_DATA, method)
    rho, budget = _expected_radius(method, traj)
    np.testing.assert_allclose(got.rho, rho, rtol=1e-14)
    np.testing.assert_array_equal(got.budget, budget)
    changes = np.flatnonzero(budget[1:] != budget[:-1])
    assert budget[0] and changes.size == (2 if schedule else 1)
    assert got.mean == pytest.approx(scipy.integrate.trapezoid(rho, ts) / 3.0, rel=1e-14)
    half = analysis.lesam_radius(traj, RADIUS_DATA, method, until=1.5)
    assert half.mean == pytest.approx(scipy.integrate.trapezoid(rho[:16], ts[:16]) / 1.5, rel=1e-14)


def test_lesam_radius_refusals():
    method = flows.LESAM(0.25, 0.3)
    traj = flows.solve(method, RADIUS_DATA, [[0.0]], t1=1.0, ts=[0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="`method`"):
        analysis.lesam_radius(traj, RADIUS_DATA, flows.L2SAM(0.3))
    with pytest.raises(ValueError, match="`until`"):
        analysis.lesam_radius(traj, RADIUS_DATA, method, until=0.7)
    rescaled = flows.solve(method, RADIUS_DATA, [[0.1]], t1=1.0, ts=[0.0, 1.0], rescaled=True)
    with pytest.raises(ValueError, match="real time"):  # t_real is not carried
        analysis.lesam_radius(rescaled, RADIUS_DATA, method)


def test_at_loss_is_exact_for_a_power_law_and_nan_outside():
    """v = 3 L^0.7 is linear in (log L, log v): exact between any saved points."""
    loss = np.array([0.7, 0.3, 0.05, 1e-3, 2e-6, np.nan])
    levels = np.array([0.5, 0.3, 1e-2, 1e-5, 0.8, 1e-6])
    got = analysis.at_loss(loss, 3.0 * loss**0.7, levels)
    np.testing.assert_allclose(got[:4], 3.0 * levels[:4] ** 0.7, rtol=1e-13)
    assert np.isnan(got[4:]).all()  # above the first loss, below the last finite one


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(loss=[1.0, 0.5, 0.7]), "`loss`"),
        (dict(loss=[1.0, np.nan, 0.5]), "`loss`"),
        (dict(values=[1.0, -1.0, 1.0]), "`values`"),
        (dict(values=[1.0, 1.0]), "`values`"),
        (dict(levels=[0.0]), "`levels`"),
    ],
)
def test_at_loss_refusals(kwargs, name):
    args = dict(loss=[1.0, 0.5, 0.25], values=[1.0, 2.0, 3.0], levels=[0.6]) | kwargs
    with pytest.raises(ValueError, match=name):
        analysis.at_loss(**args)
