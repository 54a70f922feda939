"""The numba engine (flows._engine) and flows.solve_many: its field against the JAX field,
its trajectories against closed forms, a reduced ODE solved by scipy, and diffrax."""

import jax
import numpy as np
import pytest
import scipy.optimize

import flows
from analysis import _reference
from flows import _engine, _rules
from tests.helpers import numpy_perturbation, separable_data


def engine_methods():
    """Every method the engine integrates (every smooth rule with constant parameters)."""
    return {
        "gd": flows.GD(),
        "l2sam": flows.L2SAM(0.3),
        "l2sam_layer": flows.L2SAM(0.3, per_layer=True),
        "linfsam_smooth": flows.LinfSAM(0.2, delta=0.05),
        "lesam": flows.LESAM(0.35, 0.3),
        "lesam_capped": flows.LESAM(5.0, 0.2),
    }


METHODS = engine_methods()
NUMBA = flows.SolverOptions(backend="numba")


def engine_field(method, data, loss, rescaled, thetas):
    """The engine's field at each θ of ``thetas`` (N, L, d)."""
    n, depth, d = thetas.shape
    rows = np.zeros((n, len(_rules.PARAMS)))
    for k, name in enumerate(_rules.PARAMS):
        if name in method.rule_params():
            rows[:, k] = float(method.rule_params()[name])
    out = _engine.fields(
        thetas.reshape(n, -1), rows, kind=method.rule,
        per_layer=bool(getattr(method, "per_layer", False)), X=np.asarray(data.X),
        Y=np.asarray(data.y), loss=_engine.LOSSES[loss], rescaled=rescaled, clock=False,
        L=depth, d=d,
    )  # fmt: skip
    return out.reshape(thetas.shape)


def numpy_rule(method):
    """ε(g) from the test's own NumPy rules (tests.helpers; ρ tanh(g/δ) written here)."""
    if isinstance(method, flows.LinfSAM):
        return lambda g: float(method.rho) * np.tanh(g / float(method.delta))
    return lambda g: numpy_perturbation(method, g)


def loss_grad(theta, X, y, absolute=False):
    """∇L (logistic) in closed form: mean_i ℓ'(m_i) y_i x_ij ∏_{k≠l}θ_kj; with ``absolute``
    the same sum of absolute values (the scale its rounding is relative to)."""
    m = y * (X @ np.prod(theta, axis=0))
    with np.errstate(over="ignore"):  # ℓ' = -0 where e^m overflows
        lp = -1.0 / (1.0 + np.exp(m))
    others = np.stack([np.prod(np.delete(theta, k, axis=0), axis=0) for k in range(len(theta))])
    if absolute:
        return (np.abs(lp) @ np.abs(X) / len(y)) * np.abs(others)
    return ((lp * y) @ X / len(y)) * others


@pytest.mark.parametrize("rescaled", [True, False], ids=["rescaled", "plain"])
@pytest.mark.parametrize("name", list(METHODS))
def test_field_matches_the_jax_field(name, rescaled):
    """The two compilations of one field agree to 1e-14 on random states, L = 1…8: relative
    to the field's size, for the plain flow's sum over examples to the size of its terms (a
    sum that cancels keeps the terms' rounding; logistic loss for that scale), and for
    ℓ'(m) = -e^{-m} times its condition number 1 + |m| (a rounding of m moves e^{-m} by
    |m| times as much)."""
    method = METHODS[name]
    rng = np.random.default_rng(7)
    data = flows.single_example([0.5, 1.0, 2.0, -1.5, 3.0]) if rescaled else separable_data(5, 5)
    field = flows.rescaled_velocity if rescaled else flows.velocity
    for depth in range(1, 9):
        for loss in ("logistic", "exponential"):
            thetas = rng.normal(size=(6, depth, 5)) * rng.uniform(0.2, 2.0, size=(6, 1, 1))
            ours = engine_field(method, data, loss, rescaled, thetas)
            ref = np.asarray(jax.vmap(lambda th: field(method, data, loss, th))(thetas))  # noqa: B023
            scale = np.max(np.abs(ref), axis=(1, 2), keepdims=True)
            if not rescaled and loss == "logistic":
                X, y, eps = np.asarray(data.X), np.asarray(data.y), numpy_rule(method)
                terms = [loss_grad(th + eps(loss_grad(th, X, y)), X, y, True) for th in thetas]
                scale = np.maximum(scale, np.max(terms, axis=(1, 2), keepdims=True))
            if loss == "exponential":
                m = np.asarray(data.y) * (np.prod(thetas, axis=1) @ np.asarray(data.X).T)
                scale = scale * (1 + np.max(np.abs(m), axis=1))[:, None, None]
            np.testing.assert_allclose(ours / scale, ref / scale, rtol=0, atol=1e-14)


@pytest.mark.parametrize("name", list(METHODS))
def test_field_matches_an_independent_numpy_rule(name):
    """The engine's plain field is -∇L(θ + ε), ε from the test's own NumPy rule and ∇L in
    closed form (∂L/∂θ_lj = mean_i ℓ'(m_i) y_i x_ij ∏_{k≠l} θ_kj)."""
    method, eps = METHODS[name], numpy_rule(METHODS[name])
    data = separable_data(4, 3, seed=2)
    X, y = np.asarray(data.X), np.asarray(data.y)
    rng = np.random.default_rng(3)
    for depth in (1, 2, 3, 6):
        theta = rng.uniform(0.3, 1.2, size=(depth, 3))
        expected = -loss_grad(theta + eps(loss_grad(theta, X, y)), X, y)
        ours = engine_field(method, data, "logistic", False, theta[None])[0]
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-15 * np.abs(expected).max())


@pytest.mark.parametrize("depth", range(1, 9))
def test_balanced_l2sam_follows_the_reduced_flow(depth):
    """A balanced ℓ2-SAM start stays balanced: θ(τ) against the reduced ODE in w alone,
    solved by scipy's Radau (analysis._reference.l2sam_flow), at every depth."""
    mu, alpha, rho = np.array([1.0, 2.0, 3.0]), 0.5, 0.3
    ref = _reference.l2sam_flow(mu, alpha, rho, depth, 50.0, w_max=1e2)
    t1 = 0.9 * ref.t[-1]
    ts = np.linspace(0.0, t1, 17)
    traj = flows.solve_many(
        flows.L2SAM(rho), flows.single_example(mu), flows.balanced_init(alpha, depth, 3),
        t1=t1, ts=ts, rescaled=True, options=NUMBA.replace(rtol=1e-12, escape_tol=None),
    )  # fmt: skip
    assert traj.status_name.tolist() == ["ok"]
    w = ref.sol(ts).T  # (T, d)
    got = np.asarray(traj.thetas[0])
    np.testing.assert_allclose(got, np.broadcast_to(w[:, None, :], got.shape), rtol=1e-8)


def test_gd_escape_time_in_closed_form():
    """GD, L = 2, balanced rescaled flow: w_j = α e^{μ_j τ}; the escape ‖θ‖ = 1e6 ‖θ₀‖ is
    at Σ_j e^{2μ_j τ} = 1e12 d (brentq on the closed form)."""
    mu, alpha = np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]), 0.01
    tau = scipy.optimize.brentq(
        lambda t: np.sum(np.exp(2 * mu * t)) - 1e12 * mu.size, 0.0, 50.0, xtol=1e-15
    )
    traj = flows.solve(flows.GD(), flows.single_example(mu), flows.balanced_init(alpha, 2, 6),
                       t1=50.0, rescaled=True, backend="numba")  # fmt: skip
    assert traj.status_name == "escaped"
    assert abs(float(traj.t_end) - tau) <= 1e-9 * tau
    np.testing.assert_allclose(traj.theta_end, np.broadcast_to(alpha * np.exp(mu * tau), (2, 6)),
                               rtol=1e-7)  # fmt: skip


def test_l2sam_collapse_time_in_closed_form():
    """ℓ2-SAM, L = 2, d = 1: dw/dτ = μ(w − ρ/√2), so for α < ρ/√2 the collapse
    w = 1e-6 α comes at τ = log((c − 1e-6 α)/(c − α))/μ, c = ρ/√2."""
    mu, alpha, rho = 2.0, 0.3, 1.0
    c = rho / np.sqrt(2)
    tau = np.log((c - 1e-6 * alpha) / (c - alpha)) / mu
    traj = flows.solve(flows.L2SAM(rho), flows.single_example([mu]),
                       flows.balanced_init(alpha, 2, 1), t1=10.0, rescaled=True,
                       backend="numba")  # fmt: skip
    assert traj.status_name == "collapsed"
    assert abs(float(traj.t_end) - tau) <= 1e-9 * tau


def test_loss_tol_time_in_closed_form():
    """GD, L = 1, plain flow, one example: dm/dt = ‖μ‖²/(1 + e^m), so m + e^m grows by ‖μ‖²t;
    the loss log(1 + e^{-m}) reaches ℓ* at m* = −log(e^{ℓ*} − 1)."""
    mu, loss_tol = np.array([1.0, 2.0]), 1e-3
    m0 = mu @ np.full(2, 0.1)
    m_star = -np.log(np.expm1(loss_tol))
    t_star = (m_star + np.exp(m_star) - m0 - np.exp(m0)) / (mu @ mu)
    traj = flows.solve(flows.GD(), flows.single_example(mu), np.full((1, 2), 0.1),
                       t1=2 * t_star, loss_tol=loss_tol, backend="numba", rtol=1e-12,
                       atol=1e-14)  # fmt: skip
    assert traj.status_name == "converged"
    assert abs(float(traj.t_end) - t_star) <= 1e-9 * t_star


def state_error(a, b):
    """max over saved times of |θ_a − θ_b| / max|θ_b(t)|, where b reached (NaN alike)."""
    a, b = np.asarray(a.thetas), np.asarray(b.thetas)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    reached = ~np.isnan(b[..., 0, 0])
    scale = np.max(np.abs(b[reached]), axis=(1, 2), keepdims=True)
    return np.max(np.abs(a[reached] - b[reached]) / scale)


def assert_same_runs(ours, ref, conditioning=0.0):
    """Statuses, step counts, t_end (1e-9 relative) and the saved states relative to max|θ(t)|
    (1e-9, or 4 × ``conditioning``: how far the reference itself moves when θ₀ moves by a few
    ulps, for a flow that amplifies rounding) of two batched trajectories. Step counts are
    equal where the flow does not amplify rounding, else within 5 %: the error estimate
    cancels to ~1e-8 of the stages, and where an accept/reject decision is that close a
    rounding decides it (diffrax's own count moves by 2 of 84 under a 1e-15 change of θ₀ for
    smoothed ℓ∞-SAM's plain flow)."""
    assert ours.status_name.tolist() == ref.status_name.tolist()
    if conditioning <= 1e-9:
        np.testing.assert_array_equal(ours.n_steps, ref.n_steps)
    else:
        assert np.all(np.abs(np.asarray(ours.n_steps - ref.n_steps)) <= 0.05 * ref.n_steps)
    np.testing.assert_allclose(ours.t_end, ref.t_end, rtol=1e-9)
    assert state_error(ours, ref) <= max(1e-9, 4 * conditioning)


@pytest.mark.parametrize("rescaled", [True, False], ids=["rescaled", "plain"])
@pytest.mark.parametrize("name", list(METHODS))
def test_trajectories_match_diffrax(name, rescaled):
    """The engine runs diffrax's algorithm: same statuses, step counts, events and states
    (to 1e-9 relative, or to the reference's own spread under a few-ulp change of θ₀ where
    the flow amplifies rounding more: per-layer ℓ2-SAM's plain flow, 2.5e-9), at L = 3 (every
    depth is checked against the reduced flow above)."""
    method = METHODS[name]
    data = flows.single_example([1.0, 2.0, 3.0]) if rescaled else separable_data(4, 3)
    rng = np.random.default_rng(5)
    for depth in (3,):
        theta0 = rng.uniform(0.2, 0.6, size=(4, depth, 3))
        kw = dict(t1=30.0, ts=np.linspace(0.0, 30.0, 31), rescaled=rescaled)
        ours = flows.solve_many(method, data, theta0, **kw)
        ref = flows.solve_many(method, data, theta0, options=flows.SolverOptions(), **kw)
        moved = flows.solve_many(method, data, theta0 * (1 + 1e-15), options=flows.SolverOptions(),
                                 **kw)  # fmt: skip
        assert set(ref.status_name.tolist()) <= {"ok", "escaped", "collapsed"}
        assert_same_runs(ours, ref, conditioning=state_error(moved, ref))


def test_phase_diagram_points_match_diffrax():
    """64 points of the (α, ρ) plane (ℓ2-SAM, L = 2, d = 5, τ ≤ 200): every status, the
    event times and the saved states agree with vmapped diffrax."""
    rng = np.random.default_rng(0)
    rho = 10 ** rng.uniform(-2, 0, 64)
    alpha = rho * 10 ** rng.uniform(-1.5, 0.5, 64)
    theta0 = np.broadcast_to(alpha[:, None, None], (64, 2, 5))
    data = flows.single_example(np.arange(1.0, 6.0))
    kw = dict(t1=200.0, ts=np.linspace(0.0, 200.0, 64), rescaled=True, params={"rho": rho})
    ours = flows.solve_many(flows.L2SAM(1.0), data, theta0, **kw)
    ref = flows.solve_many(flows.L2SAM(1.0), data, theta0, options=flows.SolverOptions(), **kw)
    assert set(ours.status_name.tolist()) == {"collapsed", "escaped"}
    assert_same_runs(ours, ref)


def test_lanes_and_threads_do_not_change_answers():
    """Each trajectory is its own loop: alone, among 37 others, on 1 or 2 threads, the same
    numbers bit for bit."""
    rho = np.linspace(0.05, 1.0, 37)
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = flows.balanced_init(0.3, 3, 3)
    kw = dict(t1=20.0, ts=np.linspace(0.0, 20.0, 9), rescaled=True)
    many = flows.solve_many(flows.L2SAM(1.0), data, theta0, params={"rho": rho}, **kw)
    two = flows.solve_many(flows.L2SAM(1.0), data, theta0, params={"rho": rho}, workers=2, **kw)
    np.testing.assert_array_equal(many.thetas, two.thetas)
    for k in (0, 17, 36):
        alone = flows.solve(flows.L2SAM(rho[k]), data, theta0, backend="numba", **kw)
        np.testing.assert_array_equal(many.thetas[k], alone.thetas)
        assert float(many.t_end[k]) == float(alone.t_end)


@pytest.mark.parametrize("mask", [{0}, {0, 1, 2}], ids=["one-core", "three-cores"])
def test_default_threads_follow_the_cpu_affinity_mask(monkeypatch, mask):
    """``workers=None`` runs one thread per core of the process's affinity mask (a batch
    system's share), not one per core of the machine (``os.cpu_count()``)."""
    import os

    from flows._engine import _run

    pools = []

    class Recorded(_run.ThreadPoolExecutor):
        def __init__(self, n):
            pools.append(n)
            super().__init__(n)

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(mask), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(_run, "ThreadPoolExecutor", Recorded)
    rho = np.linspace(0.05, 1.0, 600)  # 600 runs: more chunks than threads either way
    data = flows.single_example([1.0, 2.0, 3.0])
    flows.solve_many(flows.L2SAM(1.0), data, flows.balanced_init(0.3, 2, 3), params={"rho": rho},
                     t1=1.0, ts=np.array([1.0]), rescaled=True)  # fmt: skip
    assert pools == ([] if len(mask) == 1 else [len(mask)])


@pytest.mark.parametrize(
    ("solver", "max_steps", "status"), [("tsit5", 7, "max_steps"), ("dopri5", 100_000, "escaped")]
)
def test_step_budget_and_dopri5_match_diffrax(solver, max_steps, status):
    """The same steps: the same count, the same end. The error estimate Σ_r e_r k_r cancels
    to about 1e-8 of the stages, so a rounding of the field moves the next step size by about
    1e-8 relative (the step ends, not the solution, which agrees to 1e-12)."""
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = flows.balanced_init(0.2, 2, 3)
    kw = dict(t1=30.0, rescaled=True, solver=solver, max_steps=max_steps)
    ours = flows.solve(flows.L2SAM(0.1), data, theta0, backend="numba", **kw)
    ref = flows.solve(flows.L2SAM(0.1), data, theta0, **kw)
    assert ours.status_name == ref.status_name == status
    assert int(ours.n_steps) == int(ref.n_steps)
    np.testing.assert_allclose(float(ours.t_end), float(ref.t_end), rtol=1e-7)
    np.testing.assert_allclose(ours.thetas, ref.thetas, rtol=1e-12)


def test_bad_input_is_refused_by_name():
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(0.5, 2, 2)
    with pytest.raises(ValueError, match="backend='diffrax'"):
        flows.solve_many(flows.LinfSAM(0.1), data, theta0, t1=1.0)
    with pytest.raises(ValueError, match="backend='diffrax'"):
        flows.solve(flows.LESAM(lambda t: 0.1 + 0 * t, 0.3), data, theta0, t1=1.0,
                    backend="numba")  # fmt: skip
    with pytest.raises(ValueError, match="`params` must name"):
        flows.solve_many(flows.L2SAM(0.1), data, theta0, t1=1.0, params={"sigma": 1.0})
    with pytest.raises(ValueError, match=r"`params\['rho'\]` must be finite and >= 0"):
        flows.solve_many(flows.L2SAM(0.1), data, theta0, t1=1.0, params={"rho": [0.1, -1.0]})
    with pytest.raises(ValueError, match="`theta0` must have shape"):
        flows.solve_many(flows.L2SAM(0.1), data, np.ones((3, 2, 5)), t1=1.0)
    with pytest.raises(ValueError, match="`workers`"):
        flows.solve_many(flows.L2SAM(0.1), data, theta0, t1=1.0, workers=0)
    with pytest.raises(ValueError, match="`dense` must be False"):
        flows.SolverOptions(backend="numba", dense=True)
    with pytest.raises(ValueError, match="`solver` must be one of"):
        flows.SolverOptions(backend="numba", solver="dopri8")
    with pytest.raises(ValueError, match="cannot run under jax.jit"):
        jax.jit(lambda a: flows.solve(flows.GD(), data, flows.balanced_init(a, 2, 2), t1=1.0,
                                      backend="numba").t_end)(0.5)  # fmt: skip


def test_a_start_below_loss_tol_has_converged_at_zero():
    """L(θ₀) = log(1 + e^{-m₀}) with m₀ = Σ μ_j α² = 1.5 (α = 0.5): 0.2014 < 0.6, so the run
    is converged at t = 0; a start above (α = 0.1, m₀ = 0.06) runs as diffrax runs it."""
    data = flows.single_example([1.0, 2.0, 3.0])
    assert abs(np.log1p(np.exp(-1.5)) - 0.2014) < 1e-4
    theta0 = np.stack([flows.balanced_init(a, 2, 3) for a in (0.5, 0.1)])
    ts = np.linspace(0.0, 5.0, 6)
    ours = flows.solve_many(flows.GD(), data, theta0, t1=5.0, ts=ts,
                            options=NUMBA.replace(loss_tol=0.6))  # fmt: skip
    assert ours.status_name.tolist()[0] == "converged"
    assert float(ours.t_end[0]) == 0.0 and int(ours.n_steps[0]) == 0
    np.testing.assert_array_equal(ours.theta_end[0], theta0[0])
    np.testing.assert_array_equal(ours.thetas[0, 0], theta0[0])
    assert np.all(np.isnan(ours.thetas[0, 1:]))
    ref = flows.solve(flows.GD(), data, theta0[1], t1=5.0, ts=ts, loss_tol=0.6)
    assert ours.status_name[1] == ref.status_name == "converged"
    np.testing.assert_allclose(float(ours.t_end[1]), float(ref.t_end), rtol=1e-9)


def _linear_escape(mu, alpha, escape):
    r"""GD at L = 1 is :math:`\dot w=\mu` (docs/theory.md §12): :math:`w=\alpha+\mu\tau`, and
    :math:`\lVert w\rVert=E\lVert w_0\rVert` at the positive root of
    :math:`\lVert\mu\rVert^2\tau^2+2\alpha\textstyle\sum\mu\,\tau+d\alpha^2(1-E^2)=0`."""
    a, b, c = mu @ mu, 2 * alpha * mu.sum(), mu.size * alpha**2 * (1 - escape**2)
    return (-b + np.sqrt(b * b - 4 * a * c)) / (2 * a)


@pytest.mark.parametrize("backend", ["numba", "diffrax"])
def test_event_is_located_to_the_bisections_tolerance(backend):
    """The flow is linear, so every Runge–Kutta step and its interpolant are exact to rounding
    and the event time's error is the root finder's alone: the bisection to 1e-13 relative
    (flows._events.EVENT_RTOL, the engine's copy) puts it within 3e-13 of the closed form."""
    mu, alpha = np.array([1.0, 2.0, 3.0]), 0.4
    for escape in (10.0, 1e3):
        tr = flows.solve(flows.GD(), flows.single_example(mu), np.full((1, 3), alpha), t1=1e6,
                         rescaled=True, escape_tol=escape, backend=backend)  # fmt: skip
        assert tr.status_name == "escaped"
        tau = _linear_escape(mu, alpha, escape)
        assert abs(float(tr.t_end) - tau) <= 3e-13 * tau


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_real_time_clock_in_closed_form(loss):
    r"""The clock of the rescaled flow (``real_time=True``) on the engine: GD at L = 1 has
    :math:`m=m_0+\lVert\mu\rVert^2\tau`, and :math:`dt/d\tau=1/(-\ell'(m))` is :math:`1+e^m`
    (logistic) or :math:`e^m` (exponential), so
    :math:`t=[\tau]+(e^{m}-e^{m_0})/\lVert\mu\rVert^2`; diffrax agrees."""
    mu, alpha = np.array([1.0, 2.0, 3.0]), 0.4
    tau = _linear_escape(mu, alpha, 10.0)
    m0, s = alpha * mu.sum(), mu @ mu
    t_real = (tau if loss == "logistic" else 0.0) + (np.exp(m0 + s * tau) - np.exp(m0)) / s
    for backend in ("numba", "diffrax"):
        tr = flows.solve(flows.GD(), flows.single_example(mu), np.full((1, 3), alpha), t1=1e6,
                         rescaled=True, escape_tol=10.0, real_time=True, loss=loss, rtol=1e-12,
                         backend=backend)  # fmt: skip
        assert tr.status_name == "escaped"
        np.testing.assert_allclose(float(tr.t_real_end), t_real, rtol=1e-9)


@pytest.mark.parametrize(
    "name, depth, loss, solver",
    [("l2sam", 2, "exponential", "tsit5"), ("lesam", 4, "logistic", "dopri5"),
     ("gd", 5, "exponential", "dopri5"), ("linfsam_smooth", 6, "logistic", "tsit5"),
     ("l2sam_layer", 7, "exponential", "dopri5")],
)  # fmt: skip
def test_trajectories_match_diffrax_at_other_depths_losses_and_solvers(name, depth, loss, solver):
    """As :func:`test_trajectories_match_diffrax`, at L = 2, 4, 5, 6, 7, for both losses and
    both tableaus (rescaled, one example)."""
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = np.random.default_rng(depth).uniform(0.2, 0.6, size=(3, depth, 3))
    kw = dict(t1=30.0, ts=np.linspace(0.0, 30.0, 31), rescaled=True, loss=loss)
    ours = flows.solve_many(METHODS[name], data, theta0,
                            options=flows.SolverOptions(backend="numba", solver=solver), **kw)
    ref = flows.solve_many(METHODS[name], data, theta0,
                           options=flows.SolverOptions(solver=solver), **kw)  # fmt: skip
    moved = flows.solve_many(METHODS[name], data, theta0 * (1 + 1e-15),
                             options=flows.SolverOptions(solver=solver), **kw)  # fmt: skip
    assert set(ref.status_name.tolist()) <= {"ok", "escaped", "collapsed"}
    assert_same_runs(ours, ref, conditioning=state_error(moved, ref))


# z: both signs, 0, the margins where e^{-z} underflows or ℓ' leaves the normal numbers
# (log_speed only there), and where e^{|z|} overflows
LOSS_Z = [-800.0, -40.0, -1.0, -1e-9, 0.0, 1e-9, 0.5, 1.0, 30.0, 300.0, 700.0]
LOSS_Z_FAR = [745.5, 800.0, 1e5]


def _mp_losses(loss, z):
    """(ℓ(z), ℓ'(z), log(-ℓ'(z))) at 60 digits: ℓ = log(1 + e^{-z}) or e^{-z}, from their
    definitions in mpmath (no logaddexp form), rounded once to float64."""
    import mpmath

    with mpmath.workdps(60):
        zm = mpmath.mpf(z)
        if loss == "logistic":
            value = mpmath.log1p(mpmath.exp(-zm))
            slope = -1 / (1 + mpmath.exp(zm))
        else:
            value = mpmath.exp(-zm)
            slope = -mpmath.exp(-zm)
        return float(value), float(slope), float(mpmath.log(-slope))


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_the_losses_written_once_agree_with_their_definitions_in_both_backends(loss):
    """flows._problem's losses, written once, run by JAX (flows.loss_fn, loss_derivative,
    log_speed) and compiled into the engine (flows._engine._vector_field): ℓ, ℓ' and log(-ℓ') of
    each backend against mpmath's values of the definitions: ℓ and log(-ℓ') to 4 ulps, ℓ' to
    4 ulps of max(1, |z|) (it is e^{-z-ℓ(z)}, whose argument is rounded to ulps of |z|);
    overflow gives inf in both, and log(-ℓ') is finite and exact also where ℓ' underflows."""
    from flows._engine import _vector_field as engine

    code = _engine.LOSSES[loss]
    for z in LOSS_Z + LOSS_Z_FAR:
        value, slope, log_speed = _mp_losses(loss, z)
        expected = [log_speed] if z in LOSS_Z_FAR else [value, slope, log_speed]
        jax_got = [float(flows.log_speed(loss, z))]
        numba_got = [engine._log_speed(code, z)]
        if z not in LOSS_Z_FAR:
            jax_got = [float(flows.loss_fn(loss, z)), float(flows.loss_derivative(loss, z))]
            jax_got += [float(flows.log_speed(loss, z))]
            numba_got = [engine._loss(code, z), engine._loss_derivative(code, z)]
            numba_got += [engine._log_speed(code, z)]
        ulps = 4 * np.finfo(float).eps * np.array([1.0, max(1.0, abs(z)), 1.0])[-len(expected):]
        for got in (jax_got, numba_got):
            for g, want, tol in zip(got, expected, ulps, strict=True):
                assert g == want or abs(g - want) <= tol * abs(want), (loss, z, got, expected)
