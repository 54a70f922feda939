r"""ℓ∞-SAM as a Filippov system (flows/_filippov.py, issue 3), against closed forms and discrete
runs.

Closed forms (docs/theory.md §11, single example :math:`\{(\mu,+1)\}`, balanced
:math:`w^{(l)}(0)=\alpha>0`, rescaled clock τ). Every gradient component has the sign
of :math:`-\prod_{l'\ne l}w^{(l')}_j`, so :math:`\hat w_j=w_j-\rho\,\mathrm{sign}(w_j)^{L-1}` and
:math:`dw_j/d\tau=\mu_j(w_j-\rho s_j)^{L-1}`:

* :math:`L=2`: :math:`w_j(\tau)=\rho+(\alpha_j-\rho)e^{\mu_j\tau}` while :math:`w_j>0`. For
  :math:`\alpha_j<\rho` it reaches 0 at :math:`\tau_j=\ln(\rho/(\rho-\alpha_j))/\mu_j`; there
  both layers' surfaces meet, the vector field points back from either side (it is
  :math:`\mu_j(w_j\mp\rho)`), and the Filippov solution stays at 0 (equivalent control
  :math:`u=0`).
* :math:`L=3`: :math:`s_j=1`, :math:`dw_j/d\tau=\mu_j(w_j-\rho)^2`, so
  :math:`w_j(\tau)=\rho-1/(1/(\rho-\alpha_j)+\mu_j\tau)`: for :math:`\alpha_j<\rho`,
  :math:`w_j\uparrow\rho` and :math:`\beta_j\to\rho^3` (odd depth: no death); for
  :math:`\alpha_j>\rho` it blows up at :math:`\tau_j=1/(\mu_j(\alpha_j-\rho))`, the first blow-up
  being :math:`j^*=\arg\max_{\alpha_j>\rho}\mu_j(\alpha_j-\rho)^{L-2}`.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import flows

RHO = 0.5
MU3 = jnp.array([1.0, 2.0, 3.0])


def _l2_closed_form(alpha, mu, rho, tau):
    """L = 2 balanced rescaled ℓ∞-SAM: w_j(τ), with the dead coordinates held at 0."""
    alpha, mu, tau = np.asarray(alpha), np.asarray(mu), np.asarray(tau)[:, None]
    w = rho + (alpha - rho) * np.exp(mu * tau)
    return np.where((alpha < rho) & (w <= 0), 0.0, w)


def _solve_l2(alpha, t1, ts, **kw):
    data = flows.single_example(MU3)
    theta0 = flows.balanced_init(jnp.asarray(alpha), depth=2)
    ts = jnp.linspace(0.0, t1, 41) if ts is None else ts  # one shape: one compilation
    return flows.solve(flows.LinfSAM(RHO), data, theta0, t1=t1, ts=ts, rescaled=True, **kw)


# --- 1. single example, L = 2 ------------------------------------------------------


def test_l2_dies_stays_grows_closed_form():
    alpha = np.array([0.3, 0.5, 0.7])  # below, at, above rho
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = _solve_l2(alpha, 2.0, ts)
    assert traj.status_name == "ok"
    w = np.asarray(traj.thetas)  # (T, 2, 3)
    np.testing.assert_array_equal(w[:, 0], w[:, 1])  # balanced stays balanced
    expected = _l2_closed_form(alpha, MU3, RHO, ts)
    np.testing.assert_allclose(w[:, 0], expected, rtol=1e-7, atol=1e-9)
    tau_dead = np.log(RHO / (RHO - alpha[0])) / MU3[0]
    dead = np.asarray(ts) > tau_dead
    # Dead at a finite time and held there exactly (no drift, no chattering).
    assert np.all(np.abs(w[dead, :, 0]) < 1e-12)
    assert np.ptp(w[dead, :, 0]) < 1e-14
    np.testing.assert_array_equal(w[:, :, 1], RHO)  # alpha = rho stays put
    assert np.all(np.diff(w[:, 0, 2]) > 0)
    # One located event (both layers of coordinate 0 reach their surfaces together);
    # sliding from tau_dead to the end.
    assert int(traj.n_switches) == 1
    np.testing.assert_allclose(float(traj.t_sliding), 2.0 - tau_dead, rtol=1e-9)


def test_l2_limit_is_minor_coordinate_where_gd_picks_major():
    # Only the minor coordinate starts above rho: C2 predicts e_1; GD predicts e_d.
    alpha = np.array([0.9, 0.4, 0.45])
    traj = _solve_l2(alpha, 30.0, None)
    assert traj.status_name == "escaped"
    beta = np.asarray(traj.theta_end).prod(axis=0)
    assert np.argmax(np.abs(beta)) == 0
    np.testing.assert_allclose(beta[1:], 0.0, atol=1e-20)
    tau_end = float(traj.t_end)
    w_end = _l2_closed_form(alpha, MU3, RHO, [tau_end])[0]
    np.testing.assert_allclose(np.asarray(traj.theta_end[0]), w_end, rtol=1e-6, atol=1e-12)
    gd = flows.solve(
        flows.GD(), flows.single_example(MU3), flows.balanced_init(jnp.asarray(alpha), 2),
        t1=30.0, rescaled=True,
    )  # fmt: skip
    assert np.argmax(np.abs(np.asarray(gd.theta_end).prod(axis=0))) == 2


def test_scipy_reference_agrees():
    """The eager solve_ivp segment loop (independent integrator and event location)."""
    alpha = np.array([0.3, 0.5, 0.7])
    ts = jnp.linspace(0.0, 2.0, 41)
    ref = _solve_l2(alpha, 2.0, ts, backend="scipy", solver="Radau")
    assert ref.status_name == "ok" and int(ref.n_switches) == 1
    np.testing.assert_allclose(
        np.asarray(ref.thetas[:, 0]), _l2_closed_form(alpha, MU3, RHO, ts), rtol=1e-7, atol=1e-9
    )
    tau_dead = np.log(RHO / (RHO - alpha[0])) / MU3[0]
    np.testing.assert_allclose(float(ref.t_sliding), 2.0 - tau_dead, rtol=1e-8)


def test_vmap_over_alpha_grid_matches_single_runs():
    """A limit map over (alpha_1, alpha_2) is one vmapped call."""
    grid = jnp.array([[0.3, 0.5, 0.7], [0.9, 0.4, 0.45]])
    ts = jnp.linspace(0.0, 2.0, 41)
    batch = jax.vmap(lambda a: _solve_l2(a, 2.0, ts))(grid)
    for i, alpha in enumerate(np.asarray(grid)):
        np.testing.assert_allclose(
            np.asarray(batch.thetas[i, :, 0]),
            _l2_closed_form(alpha, MU3, RHO, ts),
            rtol=1e-7,
            atol=1e-9,
        )
    np.testing.assert_array_equal(np.asarray(batch.n_switches), [1, 2])


# --- 2. L = 3 ----------------------------------------------------------------------


def _l3_closed_form(alpha, mu, rho, tau):
    alpha, mu, tau = np.asarray(alpha), np.asarray(mu), np.asarray(tau)[:, None]
    return rho - 1.0 / (1.0 / (rho - alpha) + mu * tau)


def test_l3_odd_depth_beta_tends_to_rho_cubed():
    alpha = np.array([0.1, 0.3, 0.45])
    data = flows.single_example(MU3)
    ts = jnp.linspace(0.0, 200.0, 21)
    traj = flows.solve(
        flows.LinfSAM(RHO), data, flows.balanced_init(jnp.asarray(alpha), 3),
        t1=200.0, ts=ts, rescaled=True, rtol=1e-10, atol=1e-12,
    )  # fmt: skip
    assert traj.status_name == "ok"
    assert int(traj.n_switches) == 0  # no weight ever reaches a surface
    w = _l3_closed_form(alpha, MU3, RHO, ts)
    # Global error ~ 2e-9 here (4.5e-7 at the default rtol=1e-8: solver accuracy).
    np.testing.assert_allclose(np.asarray(traj.beta), w**3, rtol=1e-7)
    # beta_j increases to rho^3 (it never dies, unlike even depth): 1/tau convergence.
    beta = np.asarray(traj.beta)
    assert np.all(np.diff(beta, axis=0) > 0) and np.all(beta < RHO**3)
    # 0 < rho^3 - beta_j < 3 rho^2 (rho - w_j) < 3 rho^2 / (mu_j tau) -> 0.
    assert np.all(RHO**3 - beta[-1] < 3 * RHO**2 / (np.asarray(MU3) * float(ts[-1])))


def test_l3_limit_is_first_blow_up_jstar():
    mu = jnp.array([0.3, 2.0, 3.0])
    alpha = np.array([0.9, 0.7, 0.62])  # mu*(alpha - rho) = 0.12, 0.4, 0.36
    j_star = int(np.argmax(np.where(alpha > RHO, np.asarray(mu) * (alpha - RHO), -np.inf)))
    assert j_star == 1  # neither the largest alpha nor the largest mu
    traj = flows.solve(
        flows.LinfSAM(RHO), flows.single_example(mu), flows.balanced_init(jnp.asarray(alpha), 3),
        t1=10.0, ts=jnp.linspace(0.0, 10.0, 21), rescaled=True, rtol=1e-10, atol=1e-12,
        escape_tol=1e6,  # 1e-6 τ* before the blow-up, far above the solver's error
    )  # fmt: skip
    assert traj.status_name == "escaped"
    assert np.argmax(np.abs(np.asarray(traj.theta_end).prod(axis=0))) == j_star
    tau_blow = 1.0 / (float(mu[j_star]) * (alpha[j_star] - RHO))
    assert tau_blow - 1e-3 < float(traj.t_end) < tau_blow


# --- 3. discrete -> Filippov flow ------------------------------------------------


def _filippov_vs_discrete(rho, data, theta0, t1, n_list, n_grid):
    """Max error over a common time grid between iterates (lr = t1/N) and the flow."""
    ts = jnp.linspace(0.0, t1, n_grid + 1)
    flow = flows.solve(
        flows.LinfSAM(rho), data, theta0, t1=t1, ts=ts, collapse_tol=None, max_steps=4000
    )
    assert flow.status_name == "ok"
    errors, runs = [], []
    for n in n_list:
        it = flows.iterate(flows.LinfSAM(rho), data, theta0, lr=t1 / n, steps=n, every=1)
        thetas = np.asarray(it.thetas)
        runs.append(thetas)
        errors.append(np.abs(thetas - np.asarray(flow.thetas)[:: n_grid // n]).max())
    return flow, np.array(errors), runs


def test_discrete_converges_to_filippov_flow_at_order_one():
    # One coordinate, unbalanced: w1 crosses its surface (w2 > rho), then slides on
    # w1 = 0 while w2 decreases through (0, rho), then both are held at 0.
    data = flows.single_example([1.5])
    theta0 = jnp.array([[-0.2], [0.9]])
    t1, n_grid = 4.0, 4000
    n_list = [250, 400, 500, 800, 1000, 2000, 4000]
    flow, errors, runs = _filippov_vs_discrete(RHO, data, theta0, t1, n_list, n_grid)
    assert int(flow.n_switches) == 3
    np.testing.assert_allclose(np.asarray(flow.theta_end), 0.0, atol=1e-12)
    etas = t1 / np.array(n_list)
    slope = np.polyfit(np.log(etas), np.log(errors), 1)[0]
    # Order 1; where the surface is crossed inside an Euler step scatters the
    # constant, hence the fit over 7 step sizes.
    assert 0.8 < slope < 1.4, (slope, errors)
    assert errors[-1] < 1e-3
    # The iterates chatter in a band around the sliding state 0 whose width
    # shrinks like eta; the flow sits at its centre and does not chatter.
    widths, centres = [], []
    for n, thetas in zip(n_list, runs, strict=True):
        tail = thetas[int(0.9 * n) :, :, 0]
        assert np.all(tail.min(axis=0) < 0) and np.all(tail.max(axis=0) > 0)
        widths.append(np.ptp(tail, axis=0).max())
        centres.append(np.abs(tail.mean(axis=0)).max())
    widths, centres = np.array(widths), np.array(centres)
    # Near 0 one update moves a weight by at most eta * mu * rho * (-l') <= eta*mu*rho
    # (times 1 + |w|/rho ~ 1), so the band lies in [-eta*mu*rho, eta*mu*rho].
    etas = t1 / np.array(n_list)
    assert np.all(widths <= 2 * etas * 1.5 * RHO * 1.01), widths / etas
    assert np.all(centres < 0.5 * widths) and np.all(widths > 0)


# --- 4. bounded work ----------------------------------------------------------------


def test_steps_bounded_once_sliding():
    alpha = jnp.array([0.3, 0.5, 0.45])  # two coordinates die, one stays at rho
    steps = [int(_solve_l2(alpha, t1, None).n_steps) for t1 in (10.0, 100.0, 1000.0)]
    assert steps[0] < 100
    assert steps[1] - steps[0] <= 5 and steps[2] - steps[1] <= 5, steps


# --- 5. multi-example data, curved switching surfaces -----------------------------


def test_multi_example_curved_surfaces_filippov_vs_discrete():
    # dL/dw1_j = w2_j r_j(beta), r_j = mean_i l'(m_i) y_i x_ij: the surface r_2 = 0 is
    # curved in theta. Feature 2 first hurts (r_2 > 0), then helps once example 1
    # is fitted by feature 1, so r_2 changes sign while all weights stay positive.
    data = flows.Dataset([[1.0, -1.5], [0.1, 1.0]], [1, 1])
    theta0 = flows.balanced_init(0.5, depth=2, d=2)
    rho, t1, n_saved = 0.2, 6.0, 60
    ts = jnp.linspace(0.0, t1, n_saved + 1)
    flow = flows.solve(
        flows.LinfSAM(rho), data, theta0, t1=t1, ts=ts, collapse_tol=None, rtol=1e-11,
        atol=1e-13,
    )  # fmt: skip
    assert flow.status_name == "ok"
    assert np.all(np.asarray(flow.thetas) > 0.1)  # no hyperplane surface is met
    grad = jax.grad(flows.objective)
    assert grad(theta0, data)[0, 1] > 0 > grad(flow.theta_end, data)[0, 1]
    # Both of coordinate 2's sign components flip together (both equal sign r_2), and
    # on the surface d/dt dL/dθ has the same sign under either perturbation: the
    # motion crosses it, with no sliding.
    i = int(np.argmax(np.asarray([grad(th, data)[0, 1] for th in flow.thetas]) < 0))
    theta = flow.thetas[i]
    for side in (1.0, -1.0):
        u = jnp.sign(grad(theta, data)).at[:, 1].set(side)
        velocity = -grad(theta + rho * u, data)
        hdot = jax.jvp(lambda th: grad(th, data), (theta,), (velocity,))[1]
        assert np.all(np.asarray(hdot[:, 1]) < 0)
    assert int(flow.n_switches) == 1 and float(flow.t_sliding) == 0.0
    n_list = np.array([600, 1200, 2400, 4800, 9600, 19200])
    errors = []
    for n in n_list:
        it = flows.iterate(flows.LinfSAM(rho), data, theta0, lr=t1 / n, steps=n, every=n // n_saved)
        errors.append(np.abs(np.asarray(it.thetas) - np.asarray(flow.thetas)).max())
    errors = np.array(errors)
    # Order 1; where the surface is crossed inside a step scatters the constant.
    slope = np.polyfit(np.log(t1 / n_list), np.log(errors), 1)[0]
    assert 0.8 < slope < 1.4, (slope, errors)
    assert errors[-1] < 3e-5, errors


# --- the regularised variant ---------------------------------------------------------


def test_regularised_converges_to_filippov_as_delta_to_zero():
    alpha = jnp.array([0.3, 0.5, 0.7])
    ts = jnp.linspace(0.0, 1.0, 41)
    exact = _solve_l2(alpha, 1.0, ts)
    errors = []
    for delta in (1e-1, 1e-2, 1e-3):
        reg = flows.solve(
            flows.LinfSAM(RHO, delta=delta), flows.single_example(MU3),
            flows.balanced_init(alpha, 2), t1=1.0, ts=ts, rescaled=True,
        )  # fmt: skip
        assert reg.status_name == "ok"
        errors.append(float(jnp.max(jnp.abs(reg.thetas - exact.thetas))))
    errors = np.array(errors)
    assert np.all(errors[:-1] / errors[1:] > 5), errors  # ~ linear in delta


def test_delta_validation():
    for bad in (0.0, -1e-3, np.inf):
        with pytest.raises(ValueError, match="delta"):
            flows.LinfSAM(0.1, delta=bad)
    assert flows.LinfSAM(0.1).delta is None


def test_dense_output_across_segments_closed_form():
    """``dense=True`` joins the segments' interpolants (issue 11): θ(τ) anywhere, including
    inside the step cut short by the death event and on the sliding segment after it."""
    alpha = np.array([0.3, 0.5, 0.7])
    traj = _solve_l2(alpha, 2.0, None, dense=True)
    assert traj.status_name == "ok" and int(traj.n_switches) == 1
    tau_dead = np.log(RHO / (RHO - alpha[0])) / MU3[0]
    taus = np.concatenate(
        [np.linspace(0.0, 2.0, 97), tau_dead + np.array([-1e-6, -1e-9, 0.0, 1e-9, 1e-6])]
    )
    w = np.asarray(jax.vmap(traj.evaluate)(taus))  # (T, 2, 3)
    expected = _l2_closed_form(alpha, MU3, RHO, taus)
    np.testing.assert_allclose(w[:, 0], expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(w[:, 1], expected, rtol=1e-7, atol=1e-9)
    # it agrees with the saved states, and is NaN outside [0, t_end] like diffrax's
    saved = np.asarray(jax.vmap(traj.evaluate)(traj.ts))
    np.testing.assert_allclose(saved, np.asarray(traj.thetas), rtol=1e-12, atol=1e-15)
    assert np.all(np.isnan(np.asarray(traj.evaluate(2.5))))


def _reduced_l2_plain_flow(mu, alpha, rho, ts, dead_rule):
    r"""Balanced L = 2 plain ℓ∞-SAM flow, reduced by hand to :math:`w_j` (w_j > 0).

    :math:`\hat w_j=w_j-\rho` on both layers, so
    :math:`\dot w_j=\mu_j(w_j-\rho)/(1+e^{\hat m})` with
    :math:`\hat m=\sum_j\mu_j(w_j-\rho)^2`. A coordinate that reaches 0 stays there and
    its layers chatter; in phase (``"in-phase"``) :math:`\hat w^{(1)}_j\hat w^{(2)}_j=\rho^2`,
    with independent signs (``"independent"``) :math:`\pm\rho^2`, the loss factor averaged.
    """

    def field(_, w):
        alive = w > 0
        m_alive = np.sum(np.where(alive, mu * (w - rho) ** 2, 0.0))
        m_dead = np.sum(np.where(alive, 0.0, mu * rho**2))
        if dead_rule == "in-phase":
            factor = 1 / (1 + np.exp(m_alive + m_dead))
        else:
            factor = 0.5 / (1 + np.exp(m_alive + m_dead)) + 0.5 / (1 + np.exp(m_alive - m_dead))
        return np.where(alive, mu * (w - rho) * factor, 0.0)

    def death(_, w):
        return w[0]

    death.terminal = True
    kw = dict(rtol=1e-12, atol=1e-14, dense_output=True)
    first = scipy.integrate.solve_ivp(field, (0, ts[-1]), alpha, events=death, **kw)
    t_death, w = first.t[-1], first.y[:, -1].copy()
    w[0] = 0.0
    second = scipy.integrate.solve_ivp(field, (t_death, ts[-1]), w, **kw)
    out = np.array([first.sol(t) if t <= t_death else second.sol(t) for t in ts])
    out[ts > t_death, 0] = 0.0
    return t_death, out


def test_dead_coordinate_chatters_in_phase_and_keeps_the_discrete_clock():
    # Coordinate 1 dies (both layers at 0) at t ~ 4.7 while coordinate 2 grows. Its
    # layers' signs then chatter; from a balanced start in phase (the discrete map
    # keeps w1 = w2), so it still adds mu_1 rho^2 to the perturbed margin: the plain
    # flow's clock depends on it. Independent signs would move w_2 by ~0.035.
    mu, alpha, t1 = np.array([1.0, 2.0]), np.array([0.3, 0.7]), 8.0
    data, theta0 = flows.single_example(mu), flows.balanced_init(jnp.asarray(alpha), 2)
    ts = np.linspace(0.0, t1, 41)
    flow = flows.solve(
        flows.LinfSAM(RHO), data, theta0, t1=t1, ts=jnp.asarray(ts), rtol=1e-11, atol=1e-13,
        collapse_tol=None,
    )  # fmt: skip
    assert flow.status_name == "ok" and int(flow.n_switches) == 1
    assert not bool(flow.ambiguous)  # balanced: the layers die together
    t_death, in_phase = _reduced_l2_plain_flow(mu, alpha, RHO, ts, "in-phase")
    _, independent = _reduced_l2_plain_flow(mu, alpha, RHO, ts, "independent")
    assert abs(float(flow.t_sliding) - (t1 - t_death)) < 1e-8
    np.testing.assert_allclose(np.asarray(flow.thetas), np.stack([in_phase] * 2, 1), atol=1e-8)
    gap = np.abs(in_phase - independent).max()
    assert gap > 0.03
    errors = []
    for n in (640, 1280, 2560, 5120):
        it = flows.iterate(flows.LinfSAM(RHO), data, theta0, lr=t1 / n, steps=n, every=n // 40)
        errors.append(np.abs(np.asarray(it.thetas) - np.asarray(flow.thetas)).max())
    errors = np.array(errors)
    assert np.all(np.abs(errors[:-1] / errors[1:] - 2) < 0.1), errors  # order 1
    assert errors[-1] < 0.01 * gap, (errors, gap)


# --- issue 11: any number of sliding coordinates, partly dead, curved, stiff, flags --


def _discrete_errors(rho, data, theta0, t1, n_list, flow):
    """Max error of the iterates (η = t1/N, N doubling) at the flow's equispaced saving
    times, after checking that it halves with η (order 1)."""
    n_saved = flow.ts.shape[0] - 1
    errors = []
    for n in n_list:
        it = flows.iterate(flows.LinfSAM(rho), data, theta0, lr=t1 / n, steps=n, every=n // n_saved)
        errors.append(np.abs(np.asarray(it.thetas) - np.asarray(flow.thetas)).max())
    errors = np.array(errors)
    assert np.all(np.abs(errors[:-1] / errors[1:] - 2) < 0.3), errors  # order 1
    return errors


def _richardson(values):
    """Order-1 extrapolation of a quantity at η, η/2, η/4 to η → 0, and the ratio of
    successive differences (2 at order 1)."""
    v = np.asarray(values)
    return 2 * v[-1] - v[-2], (v[-3] - v[-2]) / (v[-2] - v[-1])


def test_many_dead_coordinates_keep_the_in_phase_product():
    """Five dead coordinates at once (issue 11, defect 1): each chatters in phase, so
    β̂_j = ρ² on all of them and the sixth coordinate's clock follows the iterates'.
    Before, those past the 4th got β̂_j = 0 (w₆(6) = 1.13060 against the limit 1.1089)."""
    mu, rho, t1 = np.arange(1.0, 7.0), 0.2, 6.0
    alpha = np.array([0.02] * 5 + [0.5])
    data, theta0 = flows.single_example(mu), flows.balanced_init(jnp.asarray(alpha), 2)
    flow = flows.solve(
        flows.LinfSAM(rho), data, theta0, t1=t1, ts=jnp.array([0.0, t1]), collapse_tol=None
    )
    assert flow.status_name == "ok" and int(flow.n_switches) == 5
    assert not bool(flow.ambiguous)
    np.testing.assert_array_less(np.abs(np.asarray(flow.theta_end)[:, :5]), 1e-12)
    w6 = []
    for n in (1200, 2400, 4800):
        it = flows.iterate(flows.LinfSAM(rho), data, theta0, lr=t1 / n, steps=n, every=n)
        w6.append(float(it.thetas[-1, 0, 5]))
    limit, ratio = _richardson(w6)
    assert abs(ratio - 2) < 0.3, w6  # order 1
    assert abs(float(flow.theta_end[0, 5]) - limit) < 1e-5, (float(flow.theta_end[0, 5]), w6)


def _reduced_partly_dead(depth, mu, rho, a0, b0, c0, ts):
    r"""Plain flow at depth L ≥ 3, coordinate 1 = (a, a, b, …, b) (two layers a, L − 2
    layers b) with a < ρ < b, coordinate 2 = (c, …, c).

    All gradients have the sign of :math:`-\prod_{l'\ne l}w`, so :math:`\hat w=w-\rho`:
    :math:`\dot a=q\mu_1(a-\rho)(b-\rho)^{L-2}`, :math:`\dot b=q\mu_1(a-\rho)^2(b-\rho)^{L-3}`,
    :math:`\dot c=q\mu_2(c-\rho)^{L-1}`, :math:`q=1/(1+e^{\hat m})`. Once a = 0 the two zero
    layers chatter in phase (:math:`\hat w_1\hat w_2=\rho^2`) and the live layers keep
    :math:`\hat w=b-\rho` (their gradients :math:`\propto a^2` keep their sign):
    :math:`\dot b=q\mu_1\rho^2(b-\rho)^{L-3}`,
    :math:`\hat m=\mu_1\rho^2(b-\rho)^{L-2}+\mu_2(c-\rho)^L`.
    """
    k = depth - 2  # live layers of coordinate 1

    def field(_, z):
        a, b, c = z
        pa = (a - rho) ** 2 if a > 0 else rho**2  # ŵ₁ŵ₂ (in phase once a = 0)
        q = 1 / (1 + np.exp(mu[0] * pa * (b - rho) ** k + mu[1] * (c - rho) ** depth))
        da = q * mu[0] * (a - rho) * (b - rho) ** k if a > 0 else 0.0
        return [da, q * mu[0] * pa * (b - rho) ** (k - 1), q * mu[1] * (c - rho) ** (depth - 1)]

    def death(_, z):
        return z[0]

    death.terminal = True
    kw = dict(rtol=1e-12, atol=1e-14, dense_output=True)
    first = scipy.integrate.solve_ivp(field, (0, ts[-1]), [a0, b0, c0], events=death, **kw)
    t_death, z = first.t[-1], first.y[:, -1].copy()
    z[0] = 0.0
    second = scipy.integrate.solve_ivp(field, (t_death, ts[-1]), z, **kw)
    out = np.array([first.sol(t) if t <= t_death else second.sol(t) for t in ts])
    out[ts > t_death, 0] = 0.0
    a, b, c = out.T
    first_coordinate = np.stack([a, a] + [b] * k, 1)
    return t_death, np.stack([first_coordinate, np.stack([c] * depth, 1)], 2)  # (T, L, 2)


@pytest.mark.parametrize("depth", [3, 4])
def test_partly_dead_coordinate_at_depth_three_and_four(depth):
    """Two of a coordinate's L layers die together (issue 11, defect 4): they chatter in
    phase, while the other layers' signs are held (their gradients ∝ w₁w₂ ≥ 0), so
    β̂ = ρ²(b − ρ)^(L−2). Against a reduced ODE (scipy) and discrete runs at order 1."""
    mu, rho, t1 = np.array([1.0, 0.5]), 0.5, 8.0
    a0, b0, c0 = 0.2, 0.9, 0.7
    theta0 = jnp.array([[a0, c0], [a0, c0]] + [[b0, c0]] * (depth - 2))
    data = flows.single_example(mu)
    ts = np.linspace(0.0, t1, 33)
    flow = flows.solve(
        flows.LinfSAM(rho), data, theta0, t1=t1, ts=jnp.asarray(ts), collapse_tol=None,
        rtol=1e-11, atol=1e-13,
    )  # fmt: skip
    assert flow.status_name == "ok" and not bool(flow.ambiguous)
    t_death, expected = _reduced_partly_dead(depth, mu, rho, a0, b0, c0, ts)
    assert 1.0 < t_death < 0.8 * t1
    np.testing.assert_allclose(np.asarray(flow.thetas), expected, atol=1e-8)
    np.testing.assert_allclose(float(flow.t_sliding), t1 - t_death, atol=1e-8)
    errors = _discrete_errors(rho, data, theta0, t1, (800, 1600, 3200), flow)
    assert errors[-1] < 5e-3, errors


def test_two_coordinates_slide_on_curved_surfaces_with_dense_output():
    """Non-separable data (n = 4): the flow ends sliding on ∂L/∂β₁ = ∂L/∂β₂ = 0, two
    curved surfaces at once (issue 11, defect 4), where the iterates converge at
    order 1; the joined dense output serves ``analysis.switch_times`` (defect 3)."""
    import analysis

    X = np.array([[1.0, 0.3], [-0.5, 1.0], [0.4, -0.8], [-0.6, -0.2]])
    data = flows.Dataset(X, np.ones(4))
    theta0 = flows.balanced_init(np.array([0.9, 0.8]), 2)
    rho, t1 = 0.05, 20.0
    ts = jnp.linspace(0.0, t1, 41)
    flow = flows.solve(
        flows.LinfSAM(rho), data, theta0, t1=t1, ts=ts, collapse_tol=None, rtol=1e-10,
        atol=1e-12, dense=True,
    )  # fmt: skip
    assert flow.status_name == "ok" and not bool(flow.ambiguous)
    r = jax.grad(lambda b: flows.objective(b[None], data))(flows.beta(flow.theta_end))
    assert np.all(np.abs(np.asarray(r)) < 1e-10) and float(flow.t_sliding) > 1.0
    np.testing.assert_array_less(0.5, np.asarray(flow.theta_end))  # weights far from 0
    errors = _discrete_errors(rho, data, theta0, t1, (2000, 4000, 8000), flow)
    assert errors[-1] < 3e-5, errors
    saved = np.asarray(jax.vmap(flow.evaluate)(ts))
    np.testing.assert_allclose(saved, np.asarray(flow.thetas), rtol=1e-12, atol=1e-15)
    # β_1 > β_2 at every saved time: the joined dense output shows no switch either
    b = np.asarray(flows.beta(flow.thetas))
    assert np.all(b[:, 0] > b[:, 1])
    switches = analysis.switch_times(flow)
    assert switches.sequence == [0] and np.asarray(switches.times).size == 0


def test_switch_time_after_a_death_on_the_joined_dense_output():
    """L = 2, one example: w_j = ρ + (α_j − ρ)e^{μ_jτ} until w_j = 0 (then held). Coordinate 1
    dies at τ_d = ln(ρ/(ρ − α_1))/μ_1 (the flow slides from there: a joined dense output);
    3 overtakes 2 later, at (α_2 − ρ)e^{μ_2τ} = (α_3 − ρ)e^{μ_3τ}: τ = ln 3 here."""
    import analysis

    alpha = np.array([0.3, 1.1, 0.7])
    traj = _solve_l2(alpha, 2.0, None, dense=True, rtol=1e-10, atol=1e-12)
    assert traj.status_name == "ok" and int(traj.n_switches) == 1
    tau_dead = np.log(RHO / (RHO - alpha[0])) / MU3[0]
    tau_switch = np.log((alpha[1] - RHO) / (alpha[2] - RHO)) / float(MU3[2] - MU3[1])
    assert 0 < tau_dead < tau_switch and tau_switch == pytest.approx(np.log(3.0), rel=1e-15)
    np.testing.assert_allclose(float(traj.t_sliding), 2.0 - tau_dead, rtol=1e-8)
    switches = analysis.switch_times(traj)
    assert switches.sequence == [1, 2]
    np.testing.assert_allclose(switches.times, [tau_switch], rtol=1e-8)


def test_stiff_solver_filippov_closed_form():
    """The Kvaerno5 (ESDIRK) Filippov path (issue 11, defect 4) against the L = 2 closed form."""
    alpha = np.array([0.3, 0.5, 0.7])
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = _solve_l2(alpha, 2.0, ts, solver="kvaerno5", rtol=1e-10, atol=1e-12)
    assert traj.status_name == "ok" and int(traj.n_switches) == 1
    expected = _l2_closed_form(alpha, MU3, RHO, ts)
    np.testing.assert_allclose(np.asarray(traj.thetas[:, 0]), expected, rtol=1e-7, atol=1e-9)
    tau_dead = np.log(RHO / (RHO - alpha[0])) / MU3[0]
    np.testing.assert_allclose(float(traj.t_sliding), 2.0 - tau_dead, rtol=1e-8)


def test_unbalanced_dead_coordinate_is_flagged_and_warned():
    """Layers that die at different times (issue 11, defect 5): the discrete iterates slip
    between sign phases and have no η → 0 limit (w₂(8) = 1.977, 2.009, 1.968, 1.983,
    1.969 for η = 8/1280 … 8/20480, see flows._filippov), so the flow says so."""
    data = flows.single_example([1.0, 2.0])
    theta0 = jnp.array([[0.3, 0.7], [0.15, 0.7]])
    with pytest.warns(UserWarning, match="ambiguous"):
        flow = flows.solve(flows.LinfSAM(RHO), data, theta0, t1=8.0, collapse_tol=None)
    assert flow.status_name == "ok" and bool(flow.ambiguous)
    np.testing.assert_allclose(np.asarray(flow.theta_end[:, 0]), 0.0, atol=1e-12)


def _enumerated_sliding_field(theta, data, rho, sigma, sliding, vbar):
    r"""Filippov's sliding field by brute force: :math:`\sum_\xi P(\xi)\,(-\nabla\mathcal
    L(\theta+\rho u_\xi))` over every sign pattern ξ of the sliding coordinates, independent,
    :math:`P(\xi_j=\pm1)=(1\pm\bar v_j)/2`, the layers of one coordinate in phase
    (:math:`u_{lj}=\xi_j` on S: all weights ≥ 0 here, so every orientation is +1)."""
    grad = jax.jit(jax.grad(flows.objective))
    cols = np.flatnonzero(np.any(sliding, axis=0))
    total = np.zeros(theta.shape)
    for xi in itertools.product([1.0, -1.0], repeat=cols.size):
        full = np.zeros(theta.shape[1])
        full[cols] = xi
        p = np.prod((1.0 + np.array(xi) * vbar[cols]) / 2)
        u = np.where(sliding, full[None, :], sigma)
        total -= p * np.asarray(grad(theta + rho * u, data))
    return total


def test_sliding_expectation_exact_for_any_number_of_in_phase_dead_coordinates():
    """The sliding field F = E_ξ f(θ, u_ξ) (issue 11, defect 1) against enumeration of all
    2^6 sign patterns: four sliding live coordinates (their products depend on ξ_j, all
    enumerated) and two dead ones chattering in phase (β̂_j = ρ² on both sides), six in
    all, past the four vertices the old rule averaged. A fifth sign-dependent coordinate
    is not enumerated: the mode is reported ambiguous (flows.solve warns)."""
    from flows._filippov import MAX_ENUMERATED, system

    rho, d = 0.2, 7
    data = flows.Dataset(np.array([np.arange(1.0, d + 1), np.linspace(1.5, 0.5, d)]), [1, 1])
    w = np.linspace(0.3, 1.5, d)
    # coordinates 5 and 6 dead, 7 live and not sliding
    theta = jnp.asarray(np.stack([w, w + 0.1])).at[:, 4:6].set(0.0)
    sys = system(flows.LinfSAM(rho), data, "logistic", False, theta.shape)
    sigma = jnp.where(sys.h(theta) >= 0, 1.0, -1.0)
    vbar = np.array([0.3, -0.5, 0.1, 0.7, 0.4, -0.6, 0.0])
    v = jnp.broadcast_to(jnp.asarray(vbar), theta.shape)
    sliding = np.zeros(theta.shape, bool)
    sliding[0, :4] = True  # one layer of each of the live coordinates 1-4
    sliding[:, 4:6] = True  # both layers of the dead ones
    assert MAX_ENUMERATED == 4
    field, _, ambiguous = sys._expectation(theta, sigma, jnp.asarray(sliding), v)
    expected = _enumerated_sliding_field(theta, data, rho, sigma, sliding, vbar)
    np.testing.assert_allclose(np.asarray(field), expected, rtol=1e-12, atol=1e-15)
    assert not bool(ambiguous)
    # the dead coordinates' ξ matters to the field only through E[ξ] (it drops out of q)
    assert np.abs(expected[:, 4:6]).max() > 1e-3
    # a fifth sign-dependent coordinate (layer 1 of coordinate 7) overflows the vertices
    sliding[0, 6] = True
    assert bool(sys._expectation(theta, sigma, jnp.asarray(sliding), v)[2])


def test_sliding_control_residual_is_checked():
    """The Newton solve for the sliding control reports whether ḣ_S = 0 was met (issue 11,
    defect 6). One sliding component of a live coordinate: solvable. Both layers of a
    live coordinate with unequal weights share one control but give two independent
    equations: no solution, and ``ok`` is False (a run stops with ``sliding_failed``)."""
    from flows._filippov import system

    data = flows.single_example([1.0, 2.0])
    theta = jnp.array([[0.3, 0.7], [0.6, 0.7]])
    sys = system(flows.LinfSAM(RHO), data, "logistic", False, theta.shape)
    sigma = jnp.where(sys.h(theta) >= 0, 1.0, -1.0)
    one = jnp.zeros(theta.shape, bool).at[0, 0].set(True)
    v, _, ok = sys.equivalent_control(0.0, theta, sigma, one)
    hdot = sys.hdot(theta, sys.field(0.0, theta, sigma, one, v))
    assert bool(ok) and abs(float(hdot[0, 0])) < 1e-12
    both = one.at[1, 0].set(True)
    _, _, ok = sys.equivalent_control(0.0, theta, sigma, both)
    assert not bool(ok)
    assert flows.Status.NAMES[flows.Status.SLIDING_FAILED] == "sliding_failed"


# --- issue 10: no Newton solve where nothing slides; weights pinned at 0; boundaries -----


def test_no_newton_solve_where_nothing_slides(monkeypatch):
    """The sliding control's Newton solve (and SVD) runs only where some component slides,
    and under vmap only where some lane slides; a lane's answer does not depend on which
    branch its batch took. The solves are counted by a host callback in the Newton branch."""
    from flows._filippov import MAX_ENUMERATED, _System

    calls = []

    class Counting(_System):
        def _newton(self, *args):
            jax.debug.callback(lambda: calls.append(None))
            return super()._newton(*args)

    def counting(method, data, loss, rescaled, shape, clock=False):
        n = min(MAX_ENUMERATED, int(shape[-1]))
        return Counting(method, data, loss, rescaled, n, clock and rescaled)

    monkeypatch.setattr(flows._solve, "system", counting)
    ts = jnp.linspace(0.0, 2.0, 41)
    grow, slide = np.array([0.6, 0.7, 0.8]), np.array([0.3, 0.5, 0.45])
    single = jax.jit(lambda a: _solve_l2(a, 2.0, ts))
    batch = jax.jit(jax.vmap(lambda a: _solve_l2(a, 2.0, ts)))
    alone = single(jnp.asarray(grow))
    assert alone.status_name == "ok" and int(alone.n_switches) == 0
    np.testing.assert_allclose(
        np.asarray(alone.thetas[:, 0]), _l2_closed_form(grow, MU3, RHO, ts), rtol=1e-7
    )
    both = batch(jnp.asarray([grow, 1.1 * grow]))
    jax.block_until_ready(both.thetas)
    assert calls == []  # never slid: no Newton solve, single or batched
    mixed = batch(jnp.asarray([grow, slide]))
    jax.block_until_ready(mixed.thetas)
    assert len(calls) > 0  # lane 1 slides (two coordinates die): the batch solves
    for k, alpha in enumerate((grow, slide)):
        ref = single(jnp.asarray(alpha))
        for name in ("status", "n_steps", "n_switches", "t_end", "t_sliding", "thetas"):
            np.testing.assert_array_equal(getattr(mixed, name)[k], getattr(ref, name))


def _dead_in_turn(depth, mu, alpha, rho):
    r"""Uniform balanced α < ρ, rescaled: the closed-form τ at which each coordinate dies
    and at which the last one, :math:`\mu_1` (the slowest), reaches the collapse threshold
    :math:`\lVert\theta\rVert=10^{-6}\lVert\theta_0\rVert` (the others exactly 0).

    :math:`L=2`: :math:`\rho-w=(\rho-\alpha)e^{\mu\tau}`; :math:`L=4`: with :math:`\delta=\rho-w`,
    :math:`\dot\delta=\mu\delta^3`, :math:`\delta^{-2}=(\rho-\alpha)^{-2}-2\mu\tau`.
    """
    mu = np.asarray(mu)
    w_end = 1e-6 * np.sqrt(mu.size) * alpha  # ‖θ‖ = √L w₁, ‖θ₀‖ = √(L d) α

    def tau(gap, m):  # the τ at which ρ - w reaches `gap`
        if depth == 2:
            return np.log(gap / (rho - alpha)) / m
        return ((rho - alpha) ** -2 - gap**-2) / (2 * m)

    return tau(rho, mu), tau(rho - w_end, mu[0])


@pytest.mark.parametrize("depth", [2, 4])
def test_dead_coordinates_are_pinned_at_zero_with_a_tiny_atol(depth):
    """Five coordinates die in turn (the largest μ first) at the analysis' tolerances,
    atol = 1e-30. Each dead weight is held at exactly 0: its sliding velocity is a
    rounding error (~1e-16 ρ) that such a step controller cannot follow on a weight the
    event left at ~1e-14, and the solve used to spend all 16,384 steps at τ = 0.46 (L = 2)
    or 0.15–0.64 (L = 4, α = 0.15–0.59). L = 4: every layer at 0, the chatter is free."""
    mu, alpha, rho = np.arange(1.0, 6.0), 0.5, 1.0
    tr = flows.solve(
        flows.LinfSAM(rho), flows.single_example(mu), flows.balanced_init(alpha, depth, 5),
        t1=1e6, rescaled=True, rtol=1e-11, atol=1e-30, max_steps=16384, collapse_tol=1e-6,
    )  # fmt: skip
    deaths, collapse = _dead_in_turn(depth, mu, alpha, rho)
    assert tr.status_name == "collapsed" and int(tr.n_switches) == 4
    assert int(tr.n_steps) < 500
    np.testing.assert_allclose(float(tr.t_end), collapse, rtol=1e-9)
    np.testing.assert_allclose(float(tr.t_sliding), collapse - deaths[-1], rtol=1e-8)
    np.testing.assert_array_equal(np.asarray(tr.theta_end)[:, 1:], 0.0)


def test_forced_zero_weight_is_pinned_with_a_tiny_atol():
    r"""One layer at 0 (L = 2, d = 1, rescaled, unbalanced): ẇ₁ = 0 is forced by the sliding
    of w₂'s sign (u₂ = -w₂/ρ), while w₂ falls at the rate μρ. Before the fix, atol = 1e-30
    stalled the solve at τ = 0.17 (max_steps). Closed form: with x = w₁ - ρ, y = w₂ + ρ,
    ẋ = μy, ẏ = μx until w₁ = 0; then w₂ = w₂(τ₁) - μρ(τ - τ₁) to the collapse."""
    import scipy.optimize

    mu, rho = 1.5, RHO
    theta0 = jnp.array([[-0.2], [0.4]])
    x0, y0 = -0.2 - rho, 0.4 + rho
    x = lambda t: x0 * np.cosh(mu * t) + y0 * np.sinh(mu * t)  # noqa: E731
    tau1 = scipy.optimize.brentq(lambda t: x(t) + rho, 0.0, 1.0, xtol=1e-15)
    w2 = y0 * np.cosh(mu * tau1) + x0 * np.sinh(mu * tau1) - rho
    assert 0 < w2 < rho  # sliding, not crossing
    collapse = tau1 + (w2 - 1e-6 * np.sqrt(0.2)) / (mu * rho)
    for atol in ("auto", 1e-30):
        tr = flows.solve(
            flows.LinfSAM(rho), flows.single_example([mu]), theta0, t1=5.0, rescaled=True,
            atol=atol, rtol=1e-11, max_steps=4000,
        )  # fmt: skip
        assert tr.status_name == "collapsed" and int(tr.n_switches) == 1, atol
        assert int(tr.n_steps) < 100, atol
        np.testing.assert_allclose(float(tr.t_end), collapse, rtol=1e-10)
        np.testing.assert_allclose(float(tr.t_sliding), collapse - tau1, rtol=1e-9)
        assert float(tr.theta_end[0, 0]) == 0.0


def test_first_step_past_the_blow_up_is_retried_smaller():
    """Exact ℓ∞-SAM at L = 4 from α = 37.46ρ blows up at τ* = 7.5e-5, inside diffrax's first
    step (0.01): the overflowing step's error estimate is NaN, from which diffrax proposed a
    NaN step and the run ended `nonfinite` at τ = 0 (flows._options.FiniteController).
    Closed form: δ_j = w_j - ρ, δ⁻² = δ₀⁻² - 2μ_jτ; the escape is at ‖θ‖ = 10‖θ₀‖."""
    import scipy.optimize

    mu, rho, alpha = np.arange(1.0, 6.0), 1.0, 37.46
    w = lambda t: rho + ((alpha - rho) ** -2 - 2 * mu * t) ** -0.5  # noqa: E731
    blow_up = (alpha - rho) ** -2 / (2 * mu[-1])
    escape = scipy.optimize.brentq(
        lambda t: np.sqrt(np.sum(w(t) ** 2)) - 10 * np.sqrt(mu.size) * alpha,
        0.0, blow_up * (1 - 1e-12), xtol=1e-20, rtol=1e-15,
    )  # fmt: skip
    tr = flows.solve(
        flows.LinfSAM(rho), flows.single_example(mu), flows.balanced_init(alpha, 4, 5),
        t1=1e6, rescaled=True, rtol=1e-11, atol=1e-30, escape_tol=10.0,
    )  # fmt: skip
    assert tr.status_name == "escaped" and int(tr.n_switches) == 0
    np.testing.assert_allclose(float(tr.t_end), escape, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(tr.theta_end[0]), w(escape), rtol=1e-8)


@pytest.mark.parametrize("depth", [2, 3])
def test_alpha_c_sides_are_the_closed_form(depth):
    """Both sides of α_c = ρ on the flow itself (uniform start ρ(1 ∓ 1e-3), μ = (1, …, 5)):
    w_j − ρ = (α − ρ)e^{μ_jτ} at L = 2, 1/(1/(α − ρ) − μ_jτ) at L = 3. Below ρ, L = 2 collapses
    at the closed-form τ (the weights die, largest μ first) and L = 3 stalls, every w_j creeping
    up to ρ; above ρ both escape where ‖w(τ)‖ = 1e6 ‖w(0)‖ (brentq on the closed form)."""
    rho, eps, mu, esc = 0.3, 1e-3, np.arange(1.0, 6.0), 1e6
    data = flows.single_example(mu)

    def w(alpha, tau):
        z0 = alpha - rho
        return rho + (z0 * np.exp(mu * tau) if depth == 2 else 1 / (1 / z0 - mu * tau))

    below, above = rho * (1 - eps), rho * (1 + eps)
    solve = lambda alpha, t1: flows.solve(  # noqa: E731
        flows.LinfSAM(rho), data, flows.balanced_init(alpha, depth, 5), t1=t1, rescaled=True,
        escape_tol=esc, rtol=1e-10,
    )  # fmt: skip
    lo = solve(below, 20.0)
    if depth == 2:
        tau_c, _ = _l2_collapse_window(below, rho, mu, flows.SolverOptions().collapse_tol)
        assert lo.status_name == "collapsed"
        np.testing.assert_allclose(float(lo.t_end), tau_c, rtol=1e-8)
    else:
        assert lo.status_name == "ok" and float(lo.t_end) == 20.0
        np.testing.assert_allclose(lo.theta_end[0], w(below, 20.0), rtol=1e-9)
    # above: the fastest coordinate's blow-up bounds the search (L = 3), none at L = 2
    end = 50.0 if depth == 2 else (1 - 1e-12) / (mu.max() * (above - rho))
    tau_e = scipy.optimize.brentq(
        lambda t: np.linalg.norm(w(above, t)) - esc * np.sqrt(5) * above, 0.0, end, xtol=1e-15
    )
    hi = solve(above, 2 * tau_e)
    assert hi.status_name == "escaped"
    # At L = 3 the escape comes 3e-7 before the pole τ* = 1/(μ_5(α − ρ)), whose position
    # carries the relative error of z = w − ρ: the solver keeps w to rtol 1e-10, so z to
    # 1e-10·α/(α − ρ) = 1e-7 (measured: 9.9e-8). At L = 2 nothing amplifies it.
    rtol = 1e-8 if depth == 2 else 10 * 1e-10 * above / (above - rho)
    np.testing.assert_allclose(float(hi.t_end), tau_e, rtol=rtol)


# --- issue 15: the run's own time scale (large ρ/α, scale twins) -----------------


def _l2_collapse_window(alpha, rho, mu, tol):
    r"""L = 2 balanced rescaled ℓ∞-SAM with :math:`\alpha<\rho` (closed form): the time
    :math:`\tau_c` at which :math:`\lVert\theta\rVert/\lVert\theta_0\rVert` falls to ``tol``,
    and :math:`\tau_{last}=\ln(\rho/(\rho-\alpha))/\min\mu` at which the last weight dies.

    :math:`w_j=\alpha-(\rho-\alpha)\,\mathrm{expm1}(\mu_j\tau)` while positive, then 0 (it
    slides there); written with expm1/log1p, exact at :math:`\rho/\alpha=10^{20}`.
    """
    mu = np.asarray(mu, dtype=float)
    norm0 = np.sqrt(mu.size) * alpha

    def ratio(tau):
        w = np.maximum(alpha - (rho - alpha) * np.expm1(mu * tau), 0.0)
        return np.sqrt(np.sum(w**2)) / norm0

    last = np.log1p(alpha / (rho - alpha)) / mu.min()
    tau_c = scipy.optimize.brentq(lambda t: ratio(t) - tol, 0.0, last, xtol=1e-15 * last)
    return tau_c, last


LARGE_RATIOS = {
    "diffrax": [1e2, 1e4, 1e6, 1e8, 1e9, 1e10, 1e14, 1e20],
    "scipy": [1e2, 1e8, 1e10, 1e20],
}


@pytest.mark.parametrize("backend", ["diffrax", "scipy"])
def test_l2_collapse_time_at_large_rho_over_alpha(backend):
    r"""Exact ℓ∞-SAM collapses at the closed-form time at every :math:`\rho/\alpha` up to
    1e20 (issue 15: from 1e8 the events came at :math:`\tau\lesssim10^{-9}`, below the
    drivers' absolute time tolerances, and runs ended ``ok`` with θ frozen at θ₀).

    The collapse event is :math:`\lVert\theta\rVert=10^{-6}\lVert\theta_0\rVert` (the default
    ``collapse_tol``), at :math:`\tau_c`, just before the last weight dies at
    :math:`\tau_{last}` (relative gap ~1.7e-6). diffrax locates :math:`\tau_c`; scipy's
    step through the last surface overshoots it (‖θ‖ is not monotone across it), so its
    run stops at the switch event, :math:`\tau_{last}`, there read as the collapse.
    """
    alpha, tol = 0.5, flows.SolverOptions().collapse_tol
    data, theta0 = flows.single_example(MU3), flows.balanced_init(alpha, 2, 3)
    for ratio in LARGE_RATIOS[backend]:
        rho = alpha * ratio
        tau_c, last = _l2_collapse_window(alpha, rho, MU3, tol)
        tr = flows.solve(flows.LinfSAM(rho), data, theta0, t1=10.0, rescaled=True, backend=backend)
        assert tr.status_name == "collapsed", ratio
        t_end = float(tr.t_end)
        assert tau_c * (1 - 1e-9) <= t_end <= last * (1 + 1e-9), (ratio, t_end, tau_c, last)
        if backend == "diffrax":
            np.testing.assert_allclose(t_end, tau_c, rtol=1e-8, err_msg=f"ρ/α = {ratio:g}")
        norm = np.linalg.norm(np.asarray(tr.theta_end)) / np.linalg.norm(np.asarray(theta0))
        assert norm <= tol * (1 + 1e-6), ratio
        assert int(tr.n_switches) == 2, ratio  # μ = 3 and μ = 2 die and slide first


# (ρ at λ = 1, α per coordinate at λ = 1, depth, τ1, solver rtol, λs, expected status,
# relative tolerance of θ_end/λ): L = 2 and L = 4 slide at 0 (two coordinates die
# before the collapse); L = 3 escapes.
LINF_TWINS = {
    "L2": (1.0, 0.5, 2, 10.0, 1e-8, [1e-150, 1e-20, 1e20, 1e150], "collapsed", 1e-8),
    # Near the blow-up a time error δτ moves θ_3 by μθ_3δτ: the event bracket of
    # 1e-13 τ gives θ_end to μθ_3τ·1e-13 ≈ 2e-7 (t_end is still compared to 1e-8).
    "L3": (0.5, [0.3, 0.7, 1.2], 3, 10.0, 1e-8, [1e-20, 1e20], "escaped", 1e-6),
    # the default rtol leaves the event times at L = 4 to 5e-8 (solver noise)
    "L4": (1.0, 0.5, 4, 10.0, 1e-11, [1e-20, 1e20], "collapsed", 1e-8),
}
SCIPY_TWINS = ["L2", "L3", "L4"]


def _linf_twin(rho, alpha, depth, tau1, rtol, lam, backend):
    # escape at 1e6 ‖θ₀‖: the default at L = 3 (1e10, 1e-10 τ* before the blow-up) ends where
    # θ_end itself is conditioned as 1/(τ* - τ) and the twins' states differ by 1e-4
    theta0 = flows.balanced_init(np.asarray(alpha) * lam, depth, 3)
    return flows.solve(
        flows.LinfSAM(rho * lam), flows.single_example(MU3), theta0,
        t1=tau1 / lam ** (depth - 2), rescaled=True,
        options=flows.SolverOptions(backend=backend, rtol=rtol, escape_tol=1e6),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "backend"),
    [(n, "diffrax") for n in LINF_TWINS] + [(n, "scipy") for n in SCIPY_TWINS],
)
def test_linf_scale_twins(name, backend):
    r"""Scale twins of exact ℓ∞-SAM (issue 15): :math:`(\alpha,\rho)\mapsto(\lambda\alpha,
    \lambda\rho)` maps the rescaled flow as :math:`\theta\mapsto\lambda\theta`,
    :math:`\tau\mapsto\tau/\lambda^{L-2}` (docs/theory.md §6), so the status, the number of
    switches, the scaled end time and sliding time, and :math:`\theta_{end}/\lambda` agree
    with the λ = 1 run from 1e-150 to 1e150. Before the drivers' tolerances were made
    relative to the run's scales, λ = 1e20 at L = 2 read the first switch as the
    collapse (``collapsed`` at τ = 0.23 with ‖θ‖ = 0.49‖θ₀‖, against 0.69 and 1e-6),
    λ = 1e-20 at L = 3 ended ``max_steps`` and λ = 1e20 at L = 4 ended ``ok``.
    """
    rho, alpha, depth, tau1, rtol, lams, status, theta_rtol = LINF_TWINS[name]
    ref = _linf_twin(rho, alpha, depth, tau1, rtol, 1.0, backend)
    assert ref.status_name == status
    assert int(ref.n_switches) == (0 if depth == 3 else 2)
    scale = max(np.max(alpha), float(np.max(np.abs(ref.theta_end))))
    for lam in lams if backend == "diffrax" else [lams[0], lams[-1]]:
        tr = _linf_twin(rho, alpha, depth, tau1, rtol, lam, backend)
        msg = f"λ = {lam}"
        assert tr.status_name == ref.status_name, msg
        assert int(tr.n_switches) == int(ref.n_switches), msg
        clock = lam ** (depth - 2)
        np.testing.assert_allclose(
            float(tr.t_end) * clock, float(ref.t_end), rtol=1e-8, err_msg=msg
        )
        np.testing.assert_allclose(
            float(tr.t_sliding) * clock, float(ref.t_sliding), rtol=1e-8, err_msg=msg
        )
        np.testing.assert_allclose(
            np.asarray(tr.theta_end) / lam,
            ref.theta_end,
            rtol=0,
            atol=theta_rtol * scale,
            err_msg=msg,
        )
