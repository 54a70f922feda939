"""flows._events: the stopping conditions, the statuses each backend reports, and scipy's step
budget, against values worked out by hand."""

from types import SimpleNamespace

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import flows
from flows._events import scipy_status, status_from_result, step_budget_event, stop_conditions

Status = flows.Status


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (diffrax.RESULTS.successful, Status.OK),
        (diffrax.RESULTS.event_occurred, Status.ESCAPED),  # the event's own code
        (diffrax.RESULTS.max_steps_reached, Status.MAX_STEPS),
        (diffrax.RESULTS.dt_min_reached, Status.NONFINITE),  # any other failure
    ],
)
def test_a_diffrax_result_maps_to_its_status(result, expected):
    assert int(status_from_result(result, Status.ESCAPED)) == int(expected)


def _sol(status, y_end, fired=()):
    t_events = [np.array([1.0]) if i in fired else np.array([]) for i in range(2)]
    return SimpleNamespace(status=status, y=np.array([[0.0, y_end]]), t_events=t_events)


def test_a_solve_ivp_result_maps_to_its_status():
    codes = [Status.COLLAPSED, Status.ESCAPED]
    assert scipy_status(_sol(0, 1.0), codes) == Status.OK
    assert scipy_status(_sol(1, 1.0, fired=(1,)), codes) == Status.ESCAPED
    assert scipy_status(_sol(1, 1.0, fired=(0, 1)), codes) == Status.COLLAPSED  # the first
    assert scipy_status(_sol(-1, 1.0), codes) == Status.NONFINITE  # solve_ivp failed
    assert scipy_status(_sol(0, np.inf), codes) == Status.NONFINITE  # not finite at the end
    assert scipy_status(_sol(0, 1.0), codes, representable=False) == Status.NONFINITE


@pytest.mark.parametrize("budget", [1, 5, 12])
def test_the_step_budget_stops_solve_ivp_in_the_middle_of_its_last_step(budget):
    """dy/dt = 1 in steps of exactly 1 (first_step = max_step = 1): after ``budget`` steps the run
    stops at t = budget - 1/2, the middle of the last one."""
    event = step_budget_event(budget)
    sol = solve_ivp(
        lambda t, y: [1.0], (0.0, 100.0), [0.0], events=[event], max_step=1.0, first_step=1.0
    )
    assert sol.status == 1  # a terminal event
    np.testing.assert_allclose(sol.t_events[0], [budget - 0.5], rtol=1e-14)
    np.testing.assert_allclose(sol.t, [*range(budget), budget - 0.5], rtol=1e-14)
    assert event.state["t_last"] == budget and event.state["t_prev"] == budget - 1


DATA = flows.single_example([1.0, 2.0])


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e150])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_each_stopping_condition_crosses_zero_at_its_threshold(scale, depth):
    """c = 0 exactly where ‖θ‖/‖θ₀‖ reaches collapse_tol or the escape factor, at every magnitude
    of θ₀ (the scaled norm: a squared norm under- or overflows at 1e-300 and 1e150), and where the
    loss reaches loss_tol."""
    theta0 = scale * jnp.asarray(np.linspace(0.5, 1.5, 2 * depth).reshape(depth, 2))
    options = flows.SolverOptions(collapse_tol=1e-3, escape_tol=1e4, loss_tol=0.25)
    conditions = stop_conditions(DATA, "exponential", theta0, options, rescaled=False)
    (collapse, down, s1), (escape, up, s2), (loss, down2, s3) = conditions
    assert (down, up, down2) == (-1, +1, -1)
    assert (s1, s2, s3) == (Status.COLLAPSED, Status.ESCAPED, Status.CONVERGED)
    assert abs(float(collapse(1e-3 * theta0))) < 1e-15
    np.testing.assert_allclose(float(collapse(theta0)), 1 - 1e-3, rtol=1e-14)
    assert abs(float(escape(1e4 * theta0))) < 1e-12
    np.testing.assert_allclose(float(escape(theta0)), -np.log(1e4), rtol=1e-14)
    # the exponential loss is e^{-m}, m = Σ_j μ_j β_j: with every layer but the first at 1,
    # β_j = θ_0j = log(4)/3 and m = (1 + 2) log(4)/3 = log 4, where the loss is 1/4
    theta = np.ones((depth, 2))
    theta[0] = np.log(4.0) / 3.0
    assert abs(float(loss(jnp.asarray(theta)))) < 1e-14


def test_without_thresholds_there_is_no_condition():
    options = flows.SolverOptions(collapse_tol=None, escape_tol=None, loss_tol=None)
    assert stop_conditions(DATA, "logistic", jnp.ones((2, 2)), options, rescaled=True) == []
