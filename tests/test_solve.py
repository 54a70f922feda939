"""diffrax against scipy, and event times against closed forms (issue 2, test 2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import flows
from tests.helpers import cosine_sigma, lesam_schedule_l2, separable_data, smooth_methods

TOL = dict(rtol=1e-10, atol=1e-12)


def relative_path_error(a, b):
    """max_t ‖β_a(t) − β_b(t)‖ / max_t ‖β_b(t)‖ over the saved path."""
    a, b = np.asarray(a.beta), np.asarray(b.beta)
    return np.max(np.linalg.norm(a - b, axis=-1)) / np.max(np.linalg.norm(b, axis=-1))


@pytest.mark.parametrize("name", list(smooth_methods()))
@pytest.mark.parametrize("depth", [2, 3])
def test_plain_flow_diffrax_matches_scipy(name, depth):
    method = smooth_methods()[name]
    data = separable_data(n=5, d=3, seed=depth)
    theta0 = flows.balanced_init(np.array([0.3, 0.5, 0.7]), depth)
    kw = dict(t1=20.0, ts=np.linspace(0, 20.0, 41), **TOL)
    dx = flows.solve(method, data, theta0, **kw)
    sp = flows.solve(method, data, theta0, backend="scipy", **kw)
    assert dx.status_name == sp.status_name == "ok"
    assert relative_path_error(dx, sp) < 1e-6
    assert dx.n_steps > 0 and sp.n_steps > 0


@pytest.mark.parametrize("name", list(smooth_methods()))
def test_rescaled_flow_diffrax_matches_scipy(name):
    method = smooth_methods()[name]
    data = flows.single_example([1.0, 2.0, 3.0])
    theta0 = flows.balanced_init(0.4, 2, d=3)
    kw = dict(t1=3.0, ts=np.linspace(0, 3.0, 31), rescaled=True, escape_tol=None, **TOL)
    dx = flows.solve(method, data, theta0, **kw)
    sp = flows.solve(method, data, theta0, backend="scipy", solver="Radau", **kw)
    assert dx.status_name == sp.status_name == "ok"
    assert relative_path_error(dx, sp) < 1e-6


@pytest.mark.parametrize("solver", ["kvaerno5", "dopri8"])
def test_other_diffrax_solvers_match_scipy(solver):
    """One stiff (Kvaerno5, ESDIRK) and one high-order explicit run against LSODA."""
    data = separable_data(n=5, d=4, seed=7)
    theta0 = flows.balanced_init(np.array([0.2, 0.4, 0.6, 0.8]), 2)
    kw = dict(t1=30.0, ts=np.linspace(0, 30.0, 31), **TOL)
    method = flows.L2SAM(0.2)
    dx = flows.solve(method, data, theta0, solver=solver, **kw)
    sp = flows.solve(method, data, theta0, backend="scipy", solver="BDF", **kw)
    assert dx.status_name == "ok"
    assert relative_path_error(dx, sp) < 1e-6


# --- events against closed forms (single example, d = 1, balanced, L = 2) --------------
# ℓ2-SAM rescaled: dw/dτ = μ (w − ρ/√2) for w > 0 (docs/theory.md §9 with d = 1), so
# w(τ) = c + (α − c) e^{μτ}, c = ρ/√2; collapse when w = tol·α.
# GD rescaled: dw/dτ = μ w, so w = α e^{μτ}; escape when w = E·α.


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_collapse_time_closed_form(backend):
    mu, alpha, rho, tol = 1.7, 0.2, 0.5, 1e-6
    c = rho / np.sqrt(2)
    tau_star = np.log((c - tol * alpha) / (c - alpha)) / mu
    traj = flows.solve(
        flows.L2SAM(rho),
        flows.single_example([mu]),
        flows.balanced_init(alpha, 2, d=1),
        t1=10.0,
        rescaled=True,
        collapse_tol=tol,
        backend=backend,
        **TOL,
    )
    assert traj.status_name == "collapsed"
    assert abs(float(traj.t_end) - tau_star) < 1e-8 * tau_star
    # the stored path follows the closed form up to the event, and is NaN after it
    w = c + (alpha - c) * np.exp(mu * np.asarray(traj.ts))
    reached = np.asarray(traj.reached)
    np.testing.assert_allclose(np.asarray(traj.thetas)[reached, 0, 0], w[reached], rtol=1e-8)
    assert np.all(np.isnan(np.asarray(traj.thetas)[~reached]))


def test_integrate_from_validated_inputs_is_the_run_of_solve():
    """flows.internal.integrate (solve's run without its checks), from the values solve's
    checks give: the ℓ2-SAM collapse of the closed form above, bit for bit solve's trajectory
    (the solver compiled for the test above is reused)."""
    from flows.internal import check_scalar, integrate

    mu, alpha, rho, tol = 1.7, 0.2, 0.5, 1e-6
    c = rho / np.sqrt(2)
    tau_star = np.log((c - tol * alpha) / (c - alpha)) / mu
    method, data = flows.L2SAM(rho), flows.single_example([mu])
    theta0 = flows.balanced_init(alpha, 2, d=1)
    options = flows.SolverOptions(collapse_tol=tol, **TOL)
    t1 = check_scalar("t1", 10.0, positive=True)
    args = dict(t1=t1, rescaled=True, loss="logistic", options=options)
    traj = integrate(method, data, theta0, ts=None, **args)
    assert traj.status_name == "collapsed"
    assert abs(float(traj.t_end) - tau_star) < 1e-8 * tau_star
    checked = flows.solve(method, data, theta0, **args)
    for a, b in zip(jax.tree.leaves(traj), jax.tree.leaves(checked), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_escape_time_closed_form(backend):
    mu, alpha, escape = 0.8, 0.3, 1e4
    traj = flows.solve(
        flows.GD(),
        flows.single_example([mu]),
        flows.balanced_init(alpha, 2, d=1),
        t1=50.0,
        rescaled=True,
        escape_tol=escape,
        backend=backend,
        **TOL,
    )
    assert traj.status_name == "escaped"
    tau_star = np.log(escape) / mu
    assert abs(float(traj.t_end) - tau_star) < 1e-8 * tau_star


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_converged_time_closed_form(backend):
    """L = 1, exponential loss: β' = μ e^{-μβ}, so the loss e^{-μβ} = 1/(e^{μβ₀} + μ² t)."""
    mu, beta0, loss_tol = 1.3, 0.1, 1e-3
    traj = flows.solve(
        flows.GD(),
        flows.single_example([mu]),
        np.array([[beta0]]),
        t1=1e4,
        loss="exponential",
        loss_tol=loss_tol,
        backend=backend,
        **TOL,
    )
    assert traj.status_name == "converged"
    t_star = (1 / loss_tol - np.exp(mu * beta0)) / mu**2
    assert abs(float(traj.t_end) - t_star) < 1e-7 * t_star


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_step_budget_sets_max_steps(backend):
    traj = flows.solve(
        flows.GD(),
        separable_data(),
        flows.balanced_init(0.5, 2, d=3),
        t1=1e6,
        max_steps=5,
        backend=backend,
    )
    assert traj.status_name == "max_steps"
    assert float(traj.t_end) < 1e6


def test_overflow_is_reported_nonfinite():
    """L = 3 GD rescaled blows up in finite τ (w' = μ w², w = α/(1 − ματ)); no event set."""
    traj = flows.solve(
        flows.GD(),
        flows.single_example([1.0]),
        flows.balanced_init(1.0, 3, d=1),
        t1=2.0,
        rescaled=True,
        escape_tol=None,
    )
    assert traj.status_name in ("nonfinite", "max_steps")
    assert float(traj.t_end) <= 1.0 + 1e-6  # blow-up at τ = 1/(μα) = 1


# LSODA's own global error near the blow-up is ~1e-3 in w (2e-9 in τ) at rtol 1e-10;
# Radau's is 1e-13, so the event location, not the integrator, is what is tested.
@pytest.mark.parametrize("backend, solver", [("diffrax", "tsit5"), ("scipy", "Radau")])
def test_escape_before_finite_time_blowup_closed_form(backend, solver):
    """L = 3 GD rescaled: w' = μ w², w = α/(1 − ματ); ‖θ‖ = E‖θ₀‖ at τ = (1 − 1/E)/(μα).

    Near the blow-up one rounding step in τ moves ‖θ‖ by ~E·eps relative: the event
    must still be located (not reported as a failed root-find).
    """
    mu, alpha, escape = 2.0, 0.5, 1e6
    traj = flows.solve(
        flows.GD(),
        flows.single_example([mu]),
        flows.balanced_init(alpha, 3, d=1),
        t1=5.0,
        rescaled=True,
        escape_tol=escape,
        backend=backend,
        solver=solver,
        **TOL,
    )
    assert traj.status_name == "escaped"
    tau_star = (1 - 1 / escape) / (mu * alpha)
    assert abs(float(traj.t_end) - tau_star) < 1e-9 * tau_star


# --- the unrolled explicit solvers (flows._rk) against diffrax's stage loop ------------


@pytest.mark.parametrize("name", ["tsit5", "dopri5", "dopri8"])
def test_unrolled_solvers_are_diffraxs_method(name):
    """flows' explicit solvers only unroll diffrax's stage loop (same tableau, FSAL
    state, error estimate and interpolation). At a fixed step size they give the
    same states and interpolated values to rounding; adaptively the same runs."""
    import diffrax
    import jax

    own = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8}[name]
    ours_cls = flows.DIFFRAX_SOLVERS[name]
    assert issubclass(ours_cls, own) and ours_cls is not own
    data = flows.single_example([1.0, 2.0, 3.0])
    method = flows.L2SAM(0.3)
    ts = np.linspace(0.0, 2.0, 37)  # mostly inside steps: the interpolant is used

    term = diffrax.ODETerm(
        lambda t, y, args: flows.rescaled_velocity(method, data, "logistic", y, t)
    )

    def fixed(solver):
        sol = diffrax.diffeqsolve(
            term, solver, 0.0, 2.0, 0.05,
            flows.balanced_init(0.4, 2, 3), saveat=diffrax.SaveAt(ts=ts),
        )  # fmt: skip
        return np.asarray(sol.ys), np.asarray(sol.stats["num_steps"])

    (ys_ours, n_ours), (ys_own, n_own) = fixed(ours_cls()), fixed(own())
    assert n_ours == n_own == 40
    np.testing.assert_allclose(ys_ours, ys_own, rtol=1e-13)
    # Adaptive, vmapped, with events: the error estimate is a difference of stages,
    # so rounding moves it (and the step sizes) by ~1e-8 relative, and a step at the
    # accept/reject threshold may go either way; the answers agree to tolerance.
    alphas = np.array([0.05, 0.2, 0.6])  # collapse, escape, escape (ℓ2-SAM, ρ = 0.3)

    def run(solver, alpha):
        return flows.solve(
            flows.L2SAM(0.3), data, flows.balanced_init(alpha, 2, 3), t1=50.0,
            ts=np.linspace(0, 50.0, 26), rescaled=True, solver=solver, **TOL,
        )  # fmt: skip

    ours = jax.vmap(lambda a: run(name, a))(alphas)
    theirs = jax.vmap(lambda a: run(own(), a))(alphas)
    assert [flows.Status.NAMES[int(s)] for s in ours.status] == [
        "collapsed", "escaped", "escaped"
    ]  # fmt: skip
    np.testing.assert_array_equal(ours.status, theirs.status)
    assert np.all(np.abs(ours.n_steps - theirs.n_steps) <= 2 + 0.05 * theirs.n_steps)
    np.testing.assert_allclose(ours.t_end, theirs.t_end, rtol=1e-7)
    np.testing.assert_array_equal(ours.reached, theirs.reached)
    for i in range(alphas.size):  # the saved states before the event
        reached = np.asarray(ours.reached[i])
        a, b = np.asarray(ours.beta[i])[reached], np.asarray(theirs.beta[i])[reached]
        assert np.max(np.abs(a - b)) < 1e-7 * np.max(np.abs(b))


def test_new_tolerances_reuse_the_compiled_solver():
    """SolverOptions.dynamic: rtol, atol, collapse_tol and escape_tol are arguments of the
    compiled solver, not constants in it. A run with new values compiles nothing, and each
    value reaches the solver: the collapse time is that of its own closed form (the ℓ2-SAM
    case of test_collapse_time_closed_form), and a looser rtol takes fewer steps."""
    import jax

    compiled = []

    def listen(event, duration, fun_name=None, **_):
        if event.endswith("backend_compile_duration") and "solve_smooth" in str(fun_name):
            compiled.append(fun_name)

    jax.monitoring.register_event_duration_secs_listener(listen)
    mu, alpha, rho = 1.3, 0.25, 0.6
    c = rho / np.sqrt(2)
    data, theta0 = flows.single_example([mu]), flows.balanced_init(alpha, 2, d=1)
    runs = {}
    for tol, rtol, atol in [(1e-3, 1e-10, 1e-13), (1e-6, 1e-10, 1e-14), (1e-4, 1e-6, 1e-9)]:
        traj = flows.solve(
            flows.L2SAM(rho), data, theta0, t1=10.0, rescaled=True, collapse_tol=tol,
            escape_tol=1e3 / tol, rtol=rtol, atol=atol,
        )  # fmt: skip
        tau_star = np.log((c - tol * alpha) / (c - alpha)) / mu
        assert traj.status_name == "collapsed"
        assert abs(float(traj.t_end) - tau_star) < 1e-6 * tau_star, (tol, rtol)
        runs[tol] = int(traj.n_steps)
    assert len(compiled) <= 1, compiled  # the first run's, if this worker had none yet
    assert runs[1e-4] < runs[1e-6]  # rtol 1e-6 against 1e-10 on a longer run


MU3 = [1.0, 2.0, 3.0]


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_a_schedule_falling_below_zero_stops_the_run_where_it_does(backend):
    """σ(t) = 0.35 cos t read on the real clock of the rescaled flow: the τ grid [0, 0.5] that
    flows.solve checks before the run sees only σ > 0, the real time passes π/2 at τ ≈ 0.35.
    The run must stop there, status sigma_negative, t_real_end = π/2 (the root of cos), with a
    warning naming the time; never `ok` (it read the negative σ as a radius before)."""
    method = flows.LESAM(lambda t: 0.35 * jnp.cos(t), 0.3)
    data, theta0 = flows.single_example(MU3), flows.balanced_init(0.4, 2, 3)
    with pytest.warns(UserWarning, match=r"sigma\(t\) < 0 at t = 1\.5707963"):
        traj = flows.solve(method, data, theta0, t1=0.5, rescaled=True, backend=backend)
    assert traj.status_name == "sigma_negative"
    assert float(traj.t_real_end) == pytest.approx(np.pi / 2, rel=1e-9)
    assert 0 < float(traj.t_end) < 0.5
    assert np.all(np.isnan(np.asarray(traj.thetas)[~np.asarray(traj.reached)]))


def test_a_schedule_negative_at_the_start_of_a_continued_run_stops_it_there():
    """A run whose schedule starts where σ < 0 (a pass continued at real time 2 > π/2) stops at
    once, sigma_negative, under jax.jit too (the start is checked as a selection)."""
    method = flows.LESAM(lambda t: 0.35 * jnp.cos(t), 0.3)
    data, theta0 = flows.single_example(MU3), flows.balanced_init(0.4, 2, 3)

    @jax.jit
    def status(t0):
        return flows.solve(method.started_at(t0), data, theta0, t1=0.1, rescaled=True).status

    assert [flows.Status.NAMES[int(status(t0))] for t0 in (2.0, 0.0)] == ["sigma_negative", "ok"]


def test_iterate_stops_before_the_first_step_with_a_negative_budget():
    """Discrete updates read σ(kη): with σ = 0.35 cos t and η = 0.1, steps 0..15 (t ≤ 1.5 < π/2)
    are taken and step 16 (t = 1.6 > π/2) is not."""
    method = flows.LESAM(lambda t: 0.35 * jnp.cos(t), 0.3)
    traj = flows.iterate(method, flows.single_example(MU3), flows.balanced_init(0.4, 2, 3),
                         lr=0.1, steps=30)  # fmt: skip
    assert traj.status_name == "sigma_negative" and int(traj.n_steps) == 16
    assert float(traj.t_end) == pytest.approx(1.6, rel=1e-15)
    assert np.array_equal(np.asarray(traj.theta_end), np.asarray(traj.thetas[16]))
    assert np.all(np.isnan(np.asarray(traj.thetas[17:])))


def test_an_untraceable_schedule_is_refused_naming_sigma():
    with pytest.raises(ValueError, match="`sigma` must be a JAX-traceable function"):
        flows.LESAM(lambda t: 0.1 * float(t), 0.3)
    with pytest.raises(ValueError, match="`sigma` must return a real scalar"):
        flows.LESAM(lambda t: jnp.stack([t, t]), 0.3)


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_a_tiny_atol_passes_the_real_clocks_cap(backend):
    """atol = 1.2e-31 on the cosine schedule: the real clock reaches its rate cap e^30 at
    τ ≈ 0.65, where its excess part starts from exactly 0 with a kink; error-controlled, the
    steps shrank to 0 there and the run ended max_steps. It must escape (‖θ‖ = 10‖θ₀‖) at the τ
    of the hand-written flow (tests/helpers.lesam_schedule_l2; brentq on its dense output)."""
    method, alpha = flows.LESAM(cosine_sigma, 0.3), 0.5
    data, theta0 = flows.single_example(MU3), flows.balanced_init(alpha, 2, 3)
    norm0 = np.linalg.norm(np.full(3, alpha))
    ref = lesam_schedule_l2(MU3, alpha, 0.3, cosine_sigma, t_max=10.0, w_max=10 * norm0)
    tau = scipy.optimize.brentq(
        lambda s: np.linalg.norm(ref.sol(s)[:-1]) - 10 * norm0, 0.0, ref.t[-1], xtol=1e-14
    )
    traj = flows.solve(method, data, theta0, t1=10.0, rescaled=True, escape_tol=10.0,
                       atol=1.2e-31, rtol=1e-10, backend=backend, max_steps=20_000)  # fmt: skip
    assert traj.status_name == "escaped" and float(traj.t_real_end) == np.inf
    assert float(traj.t_end) == pytest.approx(tau, rel=1e-7)
