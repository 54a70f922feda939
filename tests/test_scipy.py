r"""The scipy backend (flows/_scipy.py) on exact ℓ∞-SAM: its event root finder at a switching
function with a root of multiplicity L - 1, and what a failure of that root finder ends as."""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import flows

MU3 = jnp.array([1.0, 2.0, 3.0])


def _even_depth_closed_form(alpha, mu, rho, depth, tau):
    r"""Balanced rescaled ℓ∞-SAM at even :math:`L\ge4`, :math:`\alpha<\rho`: :math:`w_j(\tau)`.

    :math:`dw_j/d\tau=\mu_j(w_j-\rho)^{L-1}=-\mu_j(\rho-w_j)^{L-1}` (the module doc of
    tests/test_filippov.py; odd :math:`L-1`), so
    :math:`(\rho-w_j)^{2-L}=(\rho-\alpha)^{2-L}-(L-2)\mu_j\tau` until :math:`w_j` reaches 0 at
    :math:`\tau_j=((\rho-\alpha)^{2-L}-\rho^{2-L})/((L-2)\mu_j)`;
    there it slides (held at 0). Returns ``(w, tau_dead)``, ``w`` of shape (len τ, d).
    """
    mu, tau = np.asarray(mu, dtype=float), np.asarray(tau, dtype=float)[:, None]
    k = depth - 2
    v = np.maximum((rho - alpha) ** -k - k * mu * tau, rho**-k)  # (ρ - w)^(2-L), w ≥ 0
    return rho - v ** (-1.0 / k), ((rho - alpha) ** -k - rho**-k) / (k * mu)


@pytest.mark.parametrize("depth", [4, 6])
def test_scipy_even_depth_balanced_death_closed_form(depth):
    r"""scipy's exact ℓ∞-SAM at even :math:`L\ge4` from a balanced start with
    :math:`\alpha<\rho` (issue 15): every coordinate dies at its closed-form time and
    the run collapses when the last one (μ = 1) does; the diffrax backend agrees.

    Each dying coordinate's switching functions are :math:`h=-\mu w^{L-1}`, a root of
    multiplicity :math:`L-1`: scipy's event root finder raised ``RuntimeError: Failed to
    converge after 100 iterations`` here before the switch was handed to it as
    :math:`\mathrm{sign}(c)|c|^{1/(L-1)}` (``_System.event_condition``).

    Tolerances: at the deaths :math:`|dw/d\tau|=\mu\rho^{L-1}=\mu`, so a time error
    is a state error; the solver keeps the state to ``atol`` = 1e-10·α per step plus
    rtol = 1e-11 relative, over ~100-300 steps: ~3e-8 at most, and 1e-7 is asserted
    for the states and the collapse time. The collapse event
    :math:`\lVert\theta\rVert=10^{-6}\lVert\theta_0\rVert` comes at
    :math:`\tau_c\approx\tau_{last}-8.7\cdot10^{-7}`; scipy's step through the last
    surface steps over it (‖θ‖ is not monotone across it, as at L = 2,
    tests/test_filippov.py,
    ``test_l2_collapse_time_at_large_rho_over_alpha``) and stops at the switch,
    :math:`\tau_{last}`; diffrax locates :math:`\tau_c` (to 1e-7, the state error
    over the speed 1).
    """
    rho, alpha, tol = 1.0, 0.5, flows.SolverOptions().collapse_tol
    w_tol = 1e-7
    data, theta0 = flows.single_example(MU3), flows.balanced_init(alpha, depth, 3)
    _, dead = _even_depth_closed_form(alpha, MU3, rho, depth, [0.0])
    last = float(dead.max())

    def above_collapse(d):  # the collapse event: w_1(τ_last - d) = tol·‖θ₀‖/√L
        w_1 = _even_depth_closed_form(alpha, [1.0], rho, depth, [last - d])[0][0, 0]
        return w_1 - tol * np.sqrt(3.0) * alpha

    tau_c = last - scipy.optimize.brentq(above_collapse, 0.0, 1e-3, xtol=1e-16)
    # the saving times straddle the first two deaths (τ = last/3, last/2)
    ts = jnp.linspace(0.0, 0.99 * last, 34)
    runs = {}
    for backend in ("scipy", "diffrax"):
        tr = flows.solve(
            flows.LinfSAM(rho), data, theta0, t1=10.0, ts=ts, rescaled=True,
            options=flows.SolverOptions(backend=backend, rtol=1e-11),
        )  # fmt: skip
        assert tr.status_name == "collapsed", backend
        assert int(tr.n_switches) == 2, backend  # μ = 3 and μ = 2 die and slide first
        w, _ = _even_depth_closed_form(alpha, MU3, rho, depth, ts)
        for layer in range(depth):
            np.testing.assert_allclose(
                np.asarray(tr.thetas)[:, layer], w, rtol=0, atol=w_tol, err_msg=backend
            )
        runs[backend] = tr
    np.testing.assert_allclose(float(runs["scipy"].t_end), last, rtol=0, atol=w_tol)
    assert tau_c < last - 4 * w_tol  # the two ends are told apart (gap 8.7e-7)
    np.testing.assert_allclose(float(runs["diffrax"].t_end), tau_c, rtol=0, atol=w_tol)
    np.testing.assert_allclose(
        np.asarray(runs["scipy"].thetas), np.asarray(runs["diffrax"].thetas), rtol=0, atol=w_tol
    )
    np.testing.assert_allclose(np.asarray(runs["scipy"].theta_end), 0.0, rtol=0, atol=w_tol)


def test_scipy_event_root_finder_failure_ends_nonfinite(monkeypatch):
    """A ``RuntimeError`` of scipy's event root finder ends the run as ``nonfinite`` at
    the last step before the one that held the event (issue 15), instead of reaching
    the caller; other ``RuntimeError``s are not swallowed."""

    def failing(*args, **kwargs):
        raise RuntimeError("Failed to converge after 100 iterations.")

    data, theta0 = flows.single_example(MU3), flows.balanced_init(0.5, 4, 3)
    run = dict(t1=10.0, rescaled=True, backend="scipy")
    monkeypatch.setattr(scipy.optimize, "brentq", failing)
    tr = flows.solve(flows.LinfSAM(1.0), data, theta0, **run)
    assert tr.status_name == "nonfinite"
    # the first event (μ = 3 dies at τ = 0.5, closed form) was never located: the run
    # ends before it, at a finite state on the closed-form path
    t_end = float(tr.t_end)
    assert 0.0 < t_end < 0.5, t_end
    w, _ = _even_depth_closed_form(0.5, MU3, 1.0, 4, [t_end])
    np.testing.assert_allclose(np.asarray(tr.theta_end), np.broadcast_to(w, (4, 3)), atol=1e-6)
    assert int(tr.n_switches) == 0

    def other(*args, **kwargs):
        raise RuntimeError("not the event search")

    monkeypatch.setattr(scipy.integrate, "solve_ivp", other)
    with pytest.raises(RuntimeError, match="not the event search"):
        flows.solve(flows.LinfSAM(1.0), data, theta0, **run)
