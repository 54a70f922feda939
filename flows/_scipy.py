r"""The scipy backend (``solve_ivp``): the independent, eager reference.

Both drivers take ``(field, theta0, ts, t1, options)`` like the diffrax ones
(``flows._diffrax``) and return a :class:`~flows.Trajectory`. The state is
flattened to a vector; for the rescaled flow it ends with the clock state
(``flows._dynamics``). Implicit methods get the autodiff Jacobian.

Every run ends within its budget: ``solve_ivp`` has no step budget of its own,
so steps are counted by an event (``flows._events.step_budget_event``) and the
calls of the field and its Jacobian are counted here, ``CALLS_PER_STEP`` per step
of the budget, and at most ``CALLS_PER_STUCK_STEP`` for one step; LSODA can call the
field for ever without finishing a step (e.g. it never leaves t = 0 on ℓ2-SAM at
ρ = 1e300). A spent call budget ends the run with ``max_steps`` at the last completed
step; there is no dense output then, so the saving times after t = 0 are NaN.
``NONFINITE_CALLS`` consecutive non-finite field values end it as ``nonfinite``, and
so does a failure of ``solve_ivp``'s event root finder (``brentq``'s ``RuntimeError``,
"Failed to converge"; a solver failure), at the last step before the one that held the
event. The Filippov switch is handed to it with a simple root
(``flows._filippov._System.event_condition``), where it converges.
"""

import traceback
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate

from ._dynamics import clock_of, initial_state, is_representable, theta_of
from ._events import scipy_status, step_budget_event, stop_conditions
from ._trajectory import Status, make_trajectory

_STOP_TOL = 1e-9  # a stopping condition at most this at an event fired it (as diffrax)
# Field and Jacobian calls allowed per step of the budget: Radau's Newton loop takes
# up to 3 x 6 field calls per try, and a step may be tried a few times.
CALLS_PER_STEP = 50
# Field and Jacobian calls allowed without completing a step: a step that takes more
# is stuck (LSODA at L2SAM(1e300) never finishes its first one: bounded by the
# per-step budget alone, it would make max_steps * CALLS_PER_STEP calls first).
CALLS_PER_STUCK_STEP = 2000
NONFINITE_CALLS = 200  # consecutive non-finite field values that end a run


class _Spent(Exception):
    """Raised inside ``solve_ivp`` to end a run; ``status`` says why."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class _Flat(eqx.Module):
    """Flatten a state (θ, or (θ, c)) to a vector and back."""

    shape: tuple = eqx.field(static=True)
    clock: bool = eqx.field(static=True)

    def ravel(self, y):
        if self.clock:
            return jnp.concatenate([y[0].ravel(), y[1]])
        return y.ravel()

    def unravel(self, z):
        theta = z[: int(np.prod(self.shape))].reshape(self.shape)
        return (theta, z[-2:]) if self.clock else theta


@eqx.filter_jit
def _flat_call(fn, flat, s, z, *args):
    return flat.ravel(fn(s, flat.unravel(z), *args))


@eqx.filter_jit
def _flat_jacobian(fn, flat, s, z, *args):
    return jax.jacfwd(lambda x: _flat_call(fn, flat, s, x, *args))(z)


def _stop_events(data, loss, theta0, options, rescaled, flat):
    """``solve_ivp`` events for the stopping conditions, and their status codes."""
    events, codes, fns = [], [], []
    for c, direction, code in stop_conditions(data, loss, theta0, options, rescaled):
        c = jax.jit(c)
        ev = lambda s, z, c=c: float(c(theta_of(flat.unravel(z))))  # noqa: E731
        ev.terminal, ev.direction = True, direction
        events.append(ev)
        codes.append(code)
        fns.append((c, direction, code))
    return events, codes, fns


def _saved(sol, ts, s0, s_end, flat, out):
    """Write the dense solution at the saving times in ``[s0, s_end]`` into ``out``.

    A run without dense output (a spent call budget) or without a step (one that
    failed at once, e.g. LSODA's illegal input) writes nothing.
    """
    inside = (ts >= s0) & (ts <= s_end)
    if inside.any() and sol.sol is not None and len(sol.t) > 1:
        out[inside] = sol.sol(ts[inside]).T
    return out


def _trajectory(ts, out, flat, data, loss, rescaled, s_end, z_end, **kw):
    ys = jax.vmap(flat.unravel)(jnp.asarray(out))
    y_end = flat.unravel(jnp.asarray(z_end))
    return make_trajectory(
        ts,
        theta_of(ys),
        data,
        loss,
        t_end=s_end,
        theta_end=theta_of(y_end),
        t_real=clock_of(ys, jnp.asarray(ts), rescaled),
        t_real_end=clock_of(y_end, jnp.asarray(s_end), rescaled),
        **kw,
    )


def _solve_ivp(fun, jac, s0, t1, z0, events, options, atol, max_steps):
    """``solve_ivp`` from ``s0`` with the events ``events`` and the step budget
    ``max_steps`` (its event is appended last; see the module docstring).

    A run ended by the call budget or by a non-finite field returns a result with
    ``status`` -2 and ``sol = None``, its last state the last completed step's; one
    whose event root finder failed the same, ``nonfinite``, at the step before.
    """
    implicit = options.solver in ("LSODA", "Radau", "BDF")
    budget = step_budget_event(max_steps)
    calls = {"n": 0, "bad": 0, "step": 0, "here": 0}
    limit = CALLS_PER_STEP * max_steps

    def count():
        calls["n"] += 1
        if budget.state["count"] != calls["step"]:  # a step was completed since
            calls["step"], calls["here"] = budget.state["count"], 0
        calls["here"] += 1
        if calls["n"] > limit or calls["here"] > CALLS_PER_STUCK_STEP:
            raise _Spent(Status.MAX_STEPS)

    def counted_fun(s, z):
        count()
        v = fun(s, z)
        calls["bad"] = 0 if np.all(np.isfinite(v)) else calls["bad"] + 1
        if calls["bad"] >= NONFINITE_CALLS:
            raise _Spent(Status.NONFINITE)
        return v

    def counted_jac(s, z):
        count()
        return jac(s, z)

    try:
        return scipy.integrate.solve_ivp(
            counted_fun,
            (float(s0), float(t1)),
            z0,
            method=options.solver,
            rtol=options.rtol,
            atol=atol,
            jac=counted_jac if implicit and jac is not None else None,
            events=[*events, budget],
            dense_output=True,
        )
    except _Spent as spent:
        return _ended(budget.state, "last", s0, z0, spent.status, len(events))
    except RuntimeError as error:
        if not _in_event_search(error):
            raise
        # the step that holds the event is not kept: its end may lie past the surface
        return _ended(budget.state, "prev", s0, z0, Status.NONFINITE, len(events))


def _in_event_search(error):
    """Whether ``error`` was raised in ``solve_ivp``'s event root finder (``brentq``)."""
    frames = traceback.extract_tb(error.__traceback__)
    return any(frame.name == "solve_event_equation" for frame in frames)


def _ended(state, which, s0, z0, status, n_events):
    """The result of a run ended with ``status`` at the step ``state[t_<which>]``
    of the step budget's event (``t_last`` or ``t_prev``), or at ``s0`` before any."""
    t_end, y_end = state["t_" + which], state["y_" + which]
    if y_end is None:
        t_end, y_end = float(s0), np.asarray(z0)
    steps = state["count"] - (1 if which == "last" else 2)
    return SimpleNamespace(
        t=np.array([float(t_end)]), y=np.asarray(y_end)[:, None], status=-2, sol=None,
        spent=status, t_events=[np.empty(0)] * (n_events + 1), n_steps=max(steps, 0),
    )  # fmt: skip


def _n_steps(sol):
    """The steps a run took (a spent run keeps only its last state)."""
    return getattr(sol, "n_steps", len(sol.t) - 1)


def _status(sol, codes, theta_end):
    """The run's status: the spent budget's, or ``scipy_status`` (θ and β finite)."""
    if getattr(sol, "spent", None) is not None:
        return sol.spent
    return scipy_status(sol, codes, bool(is_representable(jnp.asarray(theta_end))))


def _atols(atol, size, clock):
    """``solve_ivp``'s absolute tolerance per component: ``atol``, and no error control on the
    clock's excess part o (its last component; :func:`flows._options.error_norm`)."""
    if not clock:
        return atol
    atols = np.full(size, atol)
    atols[-1] = np.inf
    return atols


def solve_smooth(field, theta0, ts, t1, options):
    """Integrate a smooth field with one ``solve_ivp`` (the reference)."""
    flat = _Flat(theta0.shape, field.clock)
    fn = lambda s, y: field(s, y)  # noqa: E731
    # solve_ivp passes t as a Python float, which filter_jit would treat as static
    # and recompile for at every new t: pass an array.
    fun = lambda s, z: np.asarray(_flat_call(fn, flat, np.asarray(s), z))  # noqa: E731
    jac = lambda s, z: np.asarray(_flat_jacobian(fn, flat, np.asarray(s), z))  # noqa: E731
    events, codes, _ = _stop_events(field.data, field.loss, theta0, options, field.rescaled, flat)
    if field.method.time_dependent:  # σ(t) falling below 0 stops the run (as diffrax)
        margin = jax.jit(lambda s, z: field.schedule_margin(s, flat.unravel(z)))
        on_sigma = lambda s, z: float(margin(np.asarray(s), z))  # noqa: E731
        on_sigma.terminal, on_sigma.direction = True, -1
        events, codes = [on_sigma, *events], [Status.SIGMA_NEGATIVE, *codes]
    codes.append(Status.MAX_STEPS)
    z0 = np.asarray(flat.ravel(initial_state(theta0, field.clock)))
    atol = _atols(float(options.atol_for(theta0)), z0.size, field.clock)
    sol = _solve_ivp(fun, jac, 0.0, t1, z0, events, options, atol, options.max_steps)
    tsn = np.asarray(ts)
    out = np.full((tsn.shape[0], z0.size), np.nan)
    out[tsn == 0] = z0
    out = _saved(sol, tsn, 0.0, sol.t[-1], flat, out)
    theta_end = theta_of(flat.unravel(jnp.asarray(sol.y[:, -1])))
    return _trajectory(
        tsn, out, flat, field.data, field.loss, field.rescaled, sol.t[-1], sol.y[:, -1],
        status=_status(sol, codes, theta_end), n_steps=_n_steps(sol), n_rejected=-1,
    )  # fmt: skip


def _velocity(s, y, system, sigma, sliding):
    """A Filippov system's velocity in a mode, with the system an argument of the
    compiled :func:`_flat_call`, not a constant of a closure (a compiled trace is then
    never tied to one run's ρ or units)."""
    return system.velocity(s, y, sigma, sliding)


@eqx.filter_jit
def _call(sys, name, *args):
    """``sys.name(*args)``, compiled once per system shape."""
    return getattr(sys, name)(*args)


def solve_filippov(system, theta0, ts, t1, options):
    r"""The Filippov flow of ``flows._diffrax.solve_filippov``, eagerly, with ``solve_ivp``.

    The independent reference: the segments are ``solve_ivp`` runs whose events
    (the switch condition and the stopping conditions) are located by scipy; only
    the mode logic (``decide``) and the fields are shared. ``n_rejected`` is -1
    (scipy does not report it). As there, the segments are integrated in the run's
    time unit :math:`u=s/T` (``system.for_run``, a power of 2), so that
    ``solve_ivp``'s time tolerances (its event root finder's ``xtol`` is an absolute
    4 eps) are relative to the run's scale.
    """
    flat = _Flat(theta0.shape, system.clock)
    stop_events, stop_codes, stops = _stop_events(
        system.data, system.loss, theta0, options, system.rescaled, flat
    )
    tsn = np.asarray(ts)
    system = _call(system, "for_run", theta0)
    scale = float(system.time_unit)
    tsu, t1u = tsn / scale, float(t1) / scale
    z = np.asarray(flat.ravel(initial_state(theta0, system.clock)))
    atol = _atols(float(options.atol_for(theta0)), z.size, system.clock)
    out = np.full((tsn.shape[0], z.size), np.nan)
    out[tsn == 0] = z
    s, mode = 0.0, system.initial_mode(theta0)  # s: the time in the unit T (u)
    status, steps, switches, t_slide, ambiguous = None, 0, 0, 0.0, False
    while status is None:
        theta = theta_of(flat.unravel(jnp.asarray(z)))
        mode, (ok, flagged) = _call(system, "decide", jnp.asarray(s * scale), theta, mode)
        # the weights the mode holds at 0 are put there (flows._filippov._System.project)
        projected = np.asarray(_call(system, "project", theta, mode)).ravel()
        z = np.concatenate([projected, np.asarray(z)[projected.size :]])
        ambiguous = ambiguous or bool(flagged)
        if not bool(ok):  # where the mode is chosen (the end of the run: below)
            status = Status.SLIDING_FAILED
            break

        def fun(u, z_, mode=mode):  # d/du = T d/ds
            return scale * np.asarray(
                _flat_call(_velocity, flat, np.asarray(u * scale), z_, system, *mode[:2])
            )

        def on_switch(u, z_, mode=mode):
            theta_ = theta_of(flat.unravel(jnp.asarray(z_)))
            # a simple root for brentq (_System.event_condition)
            return float(_call(system, "event_condition", jnp.asarray(u * scale), theta_, mode))

        on_switch.terminal, on_switch.direction = True, -1
        events = [on_switch, *stop_events]
        budget = max(options.max_steps - steps, 1)
        sol = _solve_ivp(fun, None, s, t1u, z, events, options, atol, budget)
        s_end = float(sol.t[-1])
        out = _saved(sol, tsu, s, s_end, flat, out)
        steps += _n_steps(sol)
        if np.any(mode[1]):
            t_slide += s_end - s
        s, z = s_end, sol.y[:, -1]
        theta = theta_of(flat.unravel(jnp.asarray(z)))
        code = _status(sol, [None, *stop_codes, Status.MAX_STEPS], theta)
        stopped = [k for c, d, k in stops if float(-d * c(theta)) <= _STOP_TOL]
        if code in (Status.OK, Status.NONFINITE):
            status = code
        elif stopped:
            status = stopped[0]
        elif code is not None:
            status = code
        elif steps >= options.max_steps:
            status = Status.MAX_STEPS
        else:
            switches += 1
        if status is not None and status != Status.NONFINITE:
            if not bool(_call(system, "check", jnp.asarray(s * scale), theta, mode)):
                status = Status.SLIDING_FAILED
    return _trajectory(
        tsn, out, flat, system.data, system.loss, system.rescaled, s * scale, z, status=status,
        n_steps=steps,
        n_rejected=-1, n_switches=switches, t_sliding=t_slide * scale, ambiguous=ambiguous,
    )  # fmt: skip
