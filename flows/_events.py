r"""Stopping events and the status each backend reports (one definition each).

A run stops at ``t1`` or at the first event :math:`c(\theta)=0` (see
:func:`flows.solve`); the status codes are :class:`flows.Status`. Both backends
(``flows._diffrax``, ``flows._scipy``) and both kinds of field (smooth and
Filippov) take their conditions, root finder and status mapping from here.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ._methods import _unit
from ._problem import objective
from ._trajectory import Status


class Bisection(optx.Bisection):
    """Bisection that stops when the bracket is small, whatever |c| is then.

    ``optx.Bisection`` (and ``optx.Newton``) also demand |c| < atol, which is
    unattainable where rounding t moves c by more than atol: near a finite-time
    blow-up, or where the interpolant of a step through a collapse at the origin
    wiggles. The bracket [t_prev, t_next] of the step that changed sign always
    holds a root, so halving it to 1e-13 relative locates the event to 1e-13.
    Use it with ``flip=True`` (the condition goes from positive to non-positive):
    sign detection would raise where the condition ends exactly at 0, and for the
    batch members without an event, which diffrax root-finds under ``vmap`` too.
    """

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        f_struct = jax.tree.leaves(f_struct)[0]
        return super().init(_summed(fn), y, args, options, f_struct, aux_struct, tags)

    def step(self, fn, y, args, options, state, tags):
        return super().step(_summed(fn), y, args, options, state, tags)

    def terminate(self, fn, y, args, options, state, tags):
        del fn, args, options, tags
        small = jnp.abs(state.lower - state.upper) < self.atol + self.rtol * jnp.abs(y)
        return small, optx.RESULTS.successful


def _summed(fn):
    """``fn`` with its output summed over its leaves: diffrax root-finds a tuple of conditions
    as the tuple with every condition but the one that fired set to 0 (:func:`diffrax_event`)."""

    def scalar(y, args):
        out, aux = fn(y, args)
        return sum(jax.tree.leaves(out)), aux

    return scalar


#: The event time is located to EVENT_RTOL·|t| + EVENT_ATOL·T, T the run's time span
#: (:func:`diffrax_event`).
EVENT_RTOL = 1e-13
EVENT_ATOL = 1e-20


def diffrax_event(condition, span) -> diffrax.Event:
    r"""A diffrax event at the first downcrossing of 0 by ``condition(t, y, args)``.

    One scalar condition (or a tuple of them, each its own event: ``sol.event_mask`` says which
    fired), positive while the run goes on, located by :class:`Bisection` to
    :math:`10^{-13}|t|+10^{-20}T` (``EVENT_RTOL``, ``EVENT_ATOL``), with :math:`T` =
    ``span`` the run's time span (e.g. :math:`t_1`; traceable; the smallest normal float64 is
    added, so that a span of 0 still terminates). The absolute part is relative to the span so
    that the scale twins of the rescaled flow at :math:`L\ge3`, whose times scale as
    :math:`\lambda^{2-L}` (docs/theory.md §6), locate their events alike: a fixed :math:`10^{-14}`
    would be :math:`3\times10^{-5}` of the escape time at :math:`\lambda=10^{10}`, :math:`L=3`.
    At the analysis layer's budget :math:`T=10^6` it is :math:`10^{-14}`; it takes at most
    :math:`\log_2(10^{20})\approx67` halvings of a bracket within the span.
    """
    atol = EVENT_ATOL * jnp.abs(span) + np.finfo(np.float64).tiny
    conditions = condition if isinstance(condition, tuple) else (condition,)
    cond_fn = tuple(lambda t, y, args, c=c, **kw: c(t, y, args) for c in conditions)
    return diffrax.Event(
        cond_fn if isinstance(condition, tuple) else cond_fn[0],
        root_finder=Bisection(rtol=EVENT_RTOL, atol=atol, flip=True),
        direction=False,
    )


def stop_conditions(data, loss, theta0, options, rescaled):
    r"""The continuous stopping conditions ``c(θ)`` (event when c crosses 0), one place.

    Each is scaled so that one rounding step in t moves it by far less than the
    root finder's tolerance: near a collapse ‖θ‖ moves linearly in t, so the
    collapse condition is linear in ‖θ‖/‖θ₀‖; growth and loss decay are
    exponential in t, so those conditions are logarithms. Returns a list of
    ``(c, direction, status)`` with direction ``-1`` for a downcrossing and
    ``+1`` for an upcrossing.

    The norms are scaled, :math:`\lVert\theta\rVert=s\lVert\theta/s\rVert` with
    :math:`s=\max|\theta|` (``flows._methods._unit``), so that the ratio
    :math:`\lVert\theta\rVert/\lVert\theta_0\rVert` is exact from 1e-300 to 1e300:
    a squared norm underflows to 0 there (a false collapse) or overflows to inf (a
    false escape, at 1e150 already).
    """
    norm0 = _norm(theta0)
    collapse, loss_tol = options.collapse_tol, options.loss_tol
    escape = options.escape(rescaled, theta0.shape[0])  # theta0 is (L, d)
    out = []
    if collapse is not None:
        out.append((lambda y: _norm(y) / norm0 - collapse, -1, Status.COLLAPSED))
    if escape is not None:
        out.append((lambda y: jnp.log(_norm(y) / norm0) - jnp.log(escape), +1, Status.ESCAPED))
    if loss_tol is not None:
        out.append(
            (lambda y: jnp.log(objective(y, data, loss)) - jnp.log(loss_tol), -1, Status.CONVERGED)
        )
    return out


def _norm(theta):
    r""":math:`\lVert\theta\rVert_2` without under- or overflow (a scaled norm)."""
    return _unit(theta)[1]


def status_from_result(result, event_code):
    """The :class:`Status` of a ``diffeqsolve``: ``event_code`` if an event stopped it.

    Reaching t1 is ``ok``, a spent budget ``max_steps``, any other solver failure
    ``nonfinite``.
    """
    return jnp.where(
        result == diffrax.RESULTS.successful,
        Status.OK,
        jnp.where(
            result == diffrax.RESULTS.event_occurred,
            event_code,
            jnp.where(
                result == diffrax.RESULTS.max_steps_reached, Status.MAX_STEPS, Status.NONFINITE
            ),
        ),
    )


def scipy_status(sol, codes, representable=True):
    """The :class:`Status` of a ``solve_ivp`` result whose terminal events have ``codes``.

    Reaching t1 is ``ok``, the first event that fired gives its code, a failure
    or a non-finite final state (``representable`` False: θ or β not finite) is
    ``nonfinite``.
    """
    if sol.status < 0 or not representable or not np.all(np.isfinite(sol.y[:, -1])):
        return Status.NONFINITE
    if sol.status == 0:
        return Status.OK
    fired = [i for i, te in enumerate(sol.t_events) if len(te)]
    return codes[fired[0]]


def step_budget_event(max_steps):
    """A terminal ``solve_ivp`` event that fires once ``max_steps`` steps were taken.

    ``solve_ivp`` has no step budget, but it evaluates events once at the end of
    every step (at increasing t) before it root-finds. The event counts those
    calls; when the budget is spent it becomes the deterministic function
    ``t_mid - t`` (``t_mid`` the middle of the last step), so that the root
    finder sees a sign change and stops the run inside the last step.
    ``budget.state`` keeps the last step's end, ``t_last`` and ``y_last``, and the one
    before, ``t_prev`` and ``y_prev`` (the last state before a failed event search).
    """
    state = {"count": 0, "t_last": -np.inf, "t_mid": None, "y_last": None}
    state.update(t_prev=-np.inf, y_prev=None)

    def budget(t, y):
        if state["t_mid"] is None and t > state["t_last"]:
            state["count"] += 1
            if state["count"] > max_steps:  # the first call is at t0, before any step
                state["t_mid"] = 0.5 * (state["t_last"] + t)
            state["t_prev"], state["y_prev"] = state["t_last"], state["y_last"]
            state["t_last"], state["y_last"] = t, np.array(y)
        return 1.0 if state["t_mid"] is None else state["t_mid"] - t

    budget.terminal, budget.direction, budget.state = True, -1, state
    return budget
