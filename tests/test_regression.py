r"""The regression setting: squared loss with real targets, u⊙v starts, unnormalised SAM and
per-example SAM (1-SAM), and the kernel-to-rich limit (docs/theory.md §18).

Every expected value is independent of the code under test: the reference code's printed test
losses (tml-epfl/understanding-sam, ``diagonal_linear_nets/diag_nets_sam.ipynb``), NumPy
fields and updates written here from the formulas and integrated by scipy, a root find for the
one-example closed form, and scipy's constrained optimiser for the potential's minimiser.
"""

import re

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.optimize

import analysis
import flows

# --- independent references (NumPy, from the formulas of docs/theory.md) ---------------


def _grad(W, X, y):
    r""":math:`\nabla\frac1{2n}\lVert X\prod_lw^{(l)}-y\rVert^2` for W of shape (L, d)."""
    r = X @ np.prod(W, axis=0) - y
    g = X.T @ r / X.shape[0]
    return np.stack([g * np.prod(np.delete(W, k, axis=0), axis=0) for k in range(W.shape[0])])


def _field(kind, rho, W, X, y):
    """−(the gradient at the perturbed point), per the method's rule."""
    if kind == "gd":
        return -_grad(W, X, y)
    if kind == "usam":
        return -_grad(W + rho * _grad(W, X, y), X, y)
    # 1-SAM: the mean over examples of each example's gradient at its own perturbed point
    per = [_grad(W + rho * _grad(W, X[i : i + 1], y[i : i + 1]), X[i : i + 1], y[i : i + 1])
           for i in range(X.shape[0])]  # fmt: skip
    return -np.mean(per, axis=0)


METHODS = {"gd": lambda rho: flows.GD(), "usam": flows.USAM, "one": flows.OneSAM}


def _data(n=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return flows.Dataset(X, X @ rng.normal(size=d), regression=True)


def _q(z):
    """Woodworth et al.'s q(z) = 2 − √(4 + z²) + z arcsinh(z/2)."""
    return 2 - np.sqrt(4 + z * z) + z * np.arcsinh(z / 2)


# --- 1. the squared loss on real targets -------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_squared_loss_and_its_field_match_the_formulas(depth):
    data = _data()
    X, y = np.asarray(data.X), np.asarray(data.y)
    W = np.random.default_rng(depth).normal(size=(depth, 5))
    b = np.prod(W, axis=0)
    assert float(flows.objective(W, data, "squared")) == pytest.approx(
        np.sum((X @ b - y) ** 2) / 8, rel=1e-14
    )
    for kind, rho in [("gd", 0.0), ("usam", 0.3), ("one", 0.3)]:
        v = flows.velocity(METHODS[kind](rho), data, "squared", W)
        np.testing.assert_allclose(v, _field(kind, rho, W, X, y), rtol=1e-12, atol=1e-14)


def test_one_sam_on_the_logistic_loss_matches_the_formula():
    """Per-example SAM is not tied to regression: on labels, ∇ℓ_i = ℓ'(m_i) y_i x_i ⊙ (the
    other layers), ℓ'(m) = −1/(1 + e^m)."""
    X = np.random.default_rng(5).normal(size=(3, 4))
    y = np.array([1.0, -1.0, 1.0])
    data = flows.Dataset(X, y)
    W = np.random.default_rng(6).normal(size=(3, 4))

    def grad(W, i):
        m = y[i] * X[i] @ np.prod(W, axis=0)
        g = -y[i] * X[i] / (1 + np.exp(m))
        return np.stack([g * np.prod(np.delete(W, k, axis=0), axis=0) for k in range(3)])

    want = -np.mean([grad(W + 0.4 * grad(W, i), i) for i in range(3)], axis=0)
    got = flows.velocity(flows.OneSAM(0.4), data, "logistic", W)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_one_sam_on_one_example_is_unnormalised_sam():
    data = _data(n=1)
    W = flows.product_init(0.4, [0.1, -0.2, 0.3, 0.0, 0.5])
    np.testing.assert_array_equal(
        flows.velocity(flows.OneSAM(0.2), data, "squared", W),
        flows.velocity(flows.USAM(0.2), data, "squared", W),
    )


# --- the flows against scipy -----------------------------------------------------------


@pytest.mark.parametrize(
    "kind, depth, backend",
    [("gd", 2, "diffrax"), ("usam", 3, "diffrax"), ("one", 2, "diffrax"), ("one", 3, "scipy"),
     ("usam", 4, "scipy")],
)  # fmt: skip
def test_flow_matches_a_numpy_field_integrated_by_scipy(kind, depth, backend):
    data = _data()
    X, y = np.asarray(data.X), np.asarray(data.y)
    rho = 0.2
    theta0 = flows.product_init(*([0.5] * (depth - 1) + [[0.0, 0.1, -0.1, 0.2, 0.0]]))
    ts = np.linspace(0.0, 4.0, 9)
    traj = flows.solve(METHODS[kind](rho), data, theta0, t1=4.0, ts=ts, loss="squared",
                       backend=backend, rtol=1e-12, atol=1e-14)  # fmt: skip
    assert traj.status_name == "ok"
    ref = scipy.integrate.solve_ivp(
        lambda t, w: _field(kind, rho, w.reshape(depth, 5), X, y).ravel(),
        (0.0, 4.0), np.asarray(theta0).ravel(), t_eval=ts, method="DOP853", rtol=1e-13,
        atol=1e-15,
    )  # fmt: skip
    np.testing.assert_allclose(
        np.asarray(traj.thetas).reshape(len(ts), -1), ref.y.T, rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(
        traj.loss, [np.sum((X @ np.prod(w.reshape(depth, 5), 0) - y) ** 2) / 8 for w in ref.y.T],
        rtol=1e-8,
    )


@pytest.mark.parametrize("kind", ["usam", "one"])
def test_discrete_updates_match_numpy_updates_at_depth_three(kind):
    data = _data()
    X, y = np.asarray(data.X), np.asarray(data.y)
    W = np.asarray(flows.product_init(0.6, 0.5, [0.0, 0.1, -0.1, 0.2, 0.3]))
    traj = flows.iterate(METHODS[kind](0.3), data, W, lr=0.05, steps=20, loss="squared")
    for _ in range(20):
        W = W + 0.05 * _field(kind, 0.3, W, X, y)
    np.testing.assert_allclose(traj.theta_end, W, rtol=1e-12, atol=1e-14)


# --- 2. u⊙v and u² − v² ----------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 0.7])
def test_uv_from_two_alpha_follows_u2_minus_v2_from_alpha_at_half_speed(alpha):
    data = _data()
    X, y = np.asarray(data.X), np.asarray(data.y)

    def u2v2(t, z):  # β = u² − v², hand-written: u̇ = −2u∇, v̇ = +2v∇, ∇ = X^T r / n
        u, v = z[:5], z[5:]
        g = X.T @ (X @ (u * u - v * v) - y) / X.shape[0]
        return np.concatenate([-2 * u * g, 2 * v * g])

    ts = np.linspace(0.0, 6.0, 7)
    ref = scipy.integrate.solve_ivp(u2v2, (0.0, 3.0), np.full(10, alpha), t_eval=ts / 2,
                                    method="DOP853", rtol=1e-13, atol=1e-15)  # fmt: skip
    traj = flows.solve(flows.GD(), data, flows.product_init(2 * alpha, 0.0, d=5), t1=6.0, ts=ts,
                       loss="squared", rtol=1e-12, atol=1e-14)  # fmt: skip
    beta_ref = ref.y[:5] ** 2 - ref.y[5:] ** 2
    np.testing.assert_allclose(traj.beta, beta_ref.T, rtol=1e-8, atol=1e-11)


# --- 6. the reference code's numbers ---------------------------------------------------


@pytest.fixture(scope="module")
def peer_data():
    """The reference code's data (diag_nets_sam.ipynb): seed 0, n = 20, n_test = 1000,
    d = 30, 3 non-zero coordinates, X ~ N(0, I), noiseless."""
    np.random.seed(0)
    n, n_test, d, r = 20, 1000, 30, 3
    X = np.random.multivariate_normal(np.zeros(d), np.eye(d), n)
    X_test = np.random.multivariate_normal(np.zeros(d), np.eye(d), n_test)
    theta_star = np.random.randn(d)
    theta_star[r:] = 0
    theta_star = np.abs(theta_star) / np.linalg.norm(theta_star)
    train = flows.Dataset(X, X @ theta_star, regression=True)
    return train, flows.Dataset(X_test, X_test @ theta_star, regression=True)


@pytest.mark.parametrize(
    "method, lr_d, u0, printed",
    [  # the notebook's printed test losses after 10**4 + 1 updates, lr = lr_d / d
        (flows.GD(), 5, 0.1, 0.015056044189449159),
        (flows.USAM(0.3), 5, 0.1, 0.018241642036376265),  # n_SAM_GD
        (flows.OneSAM(0.1, convention="reference"), 5, 0.02, 1.5396958089444108e-05),
        (flows.OneSAM(0.6), 10, 0.1, 1.316634050881677e-08),  # one_SAM_GD rho = 0.3
    ],
)
def test_discrete_updates_give_the_reference_codes_printed_test_losses(
    peer_data, method, lr_d, u0, printed
):
    train, test = peer_data
    steps = 10**4 + 1
    traj = flows.iterate(method, train, flows.product_init(u0, 0.0, d=30), lr=lr_d / 30,
                         steps=steps, every=steps, loss="squared")  # fmt: skip
    test_loss = float(flows.objective(traj.theta_end, test, "squared"))
    assert abs(test_loss - printed) <= 1e-10
    assert test_loss == pytest.approx(printed, rel=1e-6)


# --- 4. the kernel-to-rich limit --------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.02, 0.3, 2.0])
def test_one_example_limit_is_the_sinh_closed_form(alpha):
    x, y = np.array([0.5, -1.0, 2.0]), 1.3
    data = flows.Dataset(x[None], [y], regression=True)
    # β_j = 2α² sinh(λ x_j), λ the root of <β, x> = y
    lam = scipy.optimize.brentq(lambda t: np.sum(2 * alpha**2 * np.sinh(t * x) * x) - y, 0, 50,
                                xtol=1e-15, rtol=1e-15)  # fmt: skip
    closed = 2 * alpha**2 * np.sinh(lam * x)
    np.testing.assert_allclose(
        analysis.kernel_rich_limit(data, alpha, model="u2-v2"), closed, rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        analysis.kernel_rich_limit(data, 2 * alpha), closed, rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("alpha", [0.05, 1.0])
def test_gd_flow_of_a_uv_start_ends_at_the_closed_form(alpha):
    x, y = np.array([0.5, -1.0, 2.0]), 1.3
    data = flows.Dataset(x[None], [y], regression=True)
    a = alpha / 2  # u⊙v from (α, 0) is u² − v² from (α/2, α/2)
    lam = scipy.optimize.brentq(lambda t: np.sum(2 * a**2 * np.sinh(t * x) * x) - y, 0, 50,
                                xtol=1e-15, rtol=1e-15)  # fmt: skip
    traj = flows.solve(flows.GD(), data, flows.product_init(alpha, 0.0, d=3), t1=400.0,
                       loss="squared", rtol=1e-12, atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(traj.beta[-1], 2 * a**2 * np.sinh(lam * x), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("alpha", [0.03, 0.3, 3.0])
def test_potential_minimiser_matches_a_constrained_optimiser(alpha):
    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(3, 5)), rng.normal(size=3)
    a2 = alpha**2
    res = scipy.optimize.minimize(
        lambda b: a2 * np.sum(_q(b / a2)), np.linalg.pinv(X) @ y, method="SLSQP",
        jac=lambda b: np.arcsinh(b / a2 / 2),
        constraints=[{"type": "eq", "fun": lambda b: X @ b - y, "jac": lambda b: X}],
        options={"ftol": 1e-16, "maxiter": 1000},
    )  # fmt: skip
    assert res.success
    got = analysis.kernel_rich_limit(flows.Dataset(X, y, regression=True), alpha, model="u2-v2")
    # SLSQP stops on its objective (ftol), which leaves β good to ~1e-7 only; the minimiser is
    # within that of it, interpolates, has no larger potential, and is stationary on the
    # constraint set: the gradient q'(β/α²) = arcsinh(β/2α²) is orthogonal to ker X
    np.testing.assert_allclose(got, res.x, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(X @ got, y, rtol=0, atol=1e-13)
    # (SLSQP's β meets the constraints to ~1e-13 only, which is worth ~1e-14 of potential)
    assert np.sum(_q(got / a2)) <= np.sum(_q(res.x / a2)) * (1 + 1e-12)
    kernel = scipy.linalg.null_space(X)
    np.testing.assert_allclose(kernel.T @ np.arcsinh(got / a2 / 2), 0.0, atol=1e-12)


def test_limit_tends_to_the_minimum_l2_and_l1_interpolators():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(3, 6)), rng.normal(size=3)
    data = flows.Dataset(X, y, regression=True)
    l2 = np.linalg.pinv(X) @ y
    np.testing.assert_allclose(analysis.kernel_rich_limit(data, 1e3), l2, rtol=1e-5, atol=1e-8)
    lp = scipy.optimize.linprog(np.ones(12), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None))
    l1 = np.sum(lp.x)
    # the rich limit: ‖β_α‖₁ → min ‖β‖₁ from above, the gap O(1/log(1/α))
    norms = [np.sum(np.abs(analysis.kernel_rich_limit(data, a))) for a in (1e-2, 1e-4, 1e-6)]
    gaps = [norm / l1 - 1 for norm in norms]
    assert 0 < gaps[2] < gaps[1] < gaps[0] < 1 / np.log(1e4)
    assert gaps[2] < 1 / np.log(1e12)


def test_check_row_passes_and_fails_on_a_wrong_prediction(monkeypatch):
    from analysis import _check

    (row,) = _check.check_regression(quick=True)
    assert row.result == "PASS" and row.claim == "regression", row
    # the minimum-ℓ2 interpolator in place of the potential's minimiser (α = 0.1 is far from
    # the kernel regime): the row must fail
    monkeypatch.setattr(_check, "kernel_rich_limit", lambda d, a: np.linalg.pinv(d.X) @ d.y)
    (row,) = _check.check_regression(quick=True)
    assert row.result == "FAIL", row


# --- refusals ---------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    data = _data()
    theta = flows.product_init(0.1, 0.0, d=5)
    cases = [
        (lambda: flows.Dataset([[1.0, 2.0]], [0.3]), "`y`"),
        (lambda: flows.Dataset([[1.0, 2.0]], [np.nan], regression=True), "`y`"),
        (lambda: flows.Dataset([[1.0, 2.0]], [0.3], regression=1), "`regression`"),
        (lambda: flows.objective(theta, data, "logistic"), "`loss`"),
        (lambda: flows.solve(flows.GD(), data, theta, t1=1.0, loss="logistic"), "`loss`"),
        (lambda: flows.iterate(flows.GD(), data, theta, lr=0.1, steps=1), "`loss`"),
        (lambda: flows.solve(flows.GD(), _data(n=1), theta, t1=1.0, loss="squared",
                             rescaled=True), "`loss`"),  # fmt: skip
        (lambda: flows.solve(flows.LinfSAM(0.1), data, theta, t1=1.0, loss="squared"), "`loss`"),
        (lambda: flows.log_speed("squared", 1.0), "`loss`"),
        (lambda: flows.solve_many(flows.GD(), data, theta, t1=1.0, loss="squared"), "diffrax"),
        (lambda: flows.solve_many(flows.USAM(0.1), flows.single_example(np.ones(5)), theta,
                                  t1=1.0), "diffrax"),  # fmt: skip
        (lambda: flows.solve_many(flows.OneSAM(0.1), flows.single_example(np.ones(5)), theta,
                                  t1=1.0), "diffrax"),  # fmt: skip
        (lambda: flows.OneSAM(0.1, convention="peer"), "`convention`"),
        (lambda: flows.USAM(-0.1), "`rho`"),
        (lambda: flows.product_init(), "`layers`"),
        (lambda: flows.product_init([[0.1, 0.2]], 0.0), "`layers[0]`"),
        (lambda: flows.product_init([0.1, 0.2], [0.0, 0.1, 0.2]), "`layers`"),
        (lambda: flows.product_init(0.1, np.nan, d=2), "`layers[1]`"),
        (lambda: flows.product_init(0.1, 0.0), "`d`"),
        (lambda: analysis.kernel_rich_limit(data, 0.0), "`alpha`"),
        (lambda: analysis.kernel_rich_limit(data, 0.1, model="uu"), "`model`"),
        (lambda: analysis.kernel_rich_limit(_data(n=6), 0.1), "`data`"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=re.escape(name)):
            call()
    with pytest.raises(ValueError, match="`method`"):
        flows.solve_many(flows.USAM(0.1), flows.single_example(np.ones(5)), theta, t1=1.0)
