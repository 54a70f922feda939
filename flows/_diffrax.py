r"""The diffrax backend: a smooth flow in one ``diffeqsolve``, a Filippov flow in segments.

Both drivers take ``(field, theta0, ts, t1, options)`` and return a
:class:`~flows.Trajectory`; they are jit- and vmap-able. The integrated state
is θ, or θ and the real-time clock for a rescaled flow that carries it
(``flows._dynamics.Field``), so that the trajectory reports both clocks.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from . import _rk
from ._dynamics import (
    clock_of,
    initial_state,
    is_finite,
    is_representable,
    overflow_headroom,
    theta_of,
)
from ._events import diffrax_event, status_from_result, stop_conditions
from ._trajectory import DenseOutput, Status, make_trajectory

_CONTINUE = -1  # a Filippov segment's status while segments remain
_STOP_TOL = 1e-9  # a stopping condition at most this at an event fired it


def _diffeqsolve(term, solver, s0, t1, y0, args, ts, condition, options, atol, span):
    """One ``diffeqsolve`` from ``s0`` to ``t1`` or the first downcrossing of ``condition``.

    Two sub-saves: the state at ``ts``, and the final state (at t1 or at the
    event), which diffrax would otherwise mix into the ts buffer. ``atol``: the
    run's absolute tolerance (``SolverOptions.atol_for``); ``span``: the run's time
    span, which scales the event location's absolute tolerance (``diffrax_event``).
    """
    return diffrax.diffeqsolve(
        term,
        solver,
        t0=s0,
        t1=t1,
        dt0=None,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(
            subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)], dense=options.dense
        ),
        stepsize_controller=options.controller(atol),
        event=diffrax_event(condition, span),
        max_steps=options.max_steps,
        throw=False,
    )


def _final(sol):
    """``(s_end, y_end, saved)`` of a :func:`_diffeqsolve`."""
    (_, s_end), (saved, y_end) = sol.ts, sol.ys
    return s_end[0], jax.tree.map(lambda a: a[0], y_end), saved


@eqx.filter_jit
def solve_smooth(field, theta0, ts, t1, options):
    """Integrate a smooth field (``flows._dynamics.Field``) with one ``diffeqsolve``."""
    stops = stop_conditions(field.data, field.loss, theta0, options, field.rescaled)
    # One scalar condition g = min_i(-s_i c_i), positive while the run goes on; it
    # crosses 0 downwards at the first event, and is -1 on a state whose θ or β is
    # not finite. β = ∏θ can overflow alone (an escape at |θ| ~ 1e150 and L = 2):
    # its room before overflow is a condition too, so that the event it sets off is
    # read as `nonfinite`, not as the nearest stopping condition (which could be `escaped`
    # at ‖θ‖ = 1.3e4 ‖θ₀‖, short of the threshold 1e6).
    margins_fn = lambda y: jnp.stack(  # noqa: E731
        [-s * c(theta_of(y)) for c, s, _ in stops] + [overflow_headroom(theta_of(y))]
    )

    def condition(t, y, args):
        return jnp.where(is_representable(theta_of(y)), jnp.min(margins_fn(y)), -1.0)

    # A schedule σ(t) stops the run where it falls below 0: an event of its own, whose
    # margin is not compared with the others (it is 0 where an annealing has ended).
    scheduled = field.method.time_dependent
    if scheduled:
        conditions = (lambda t, y, args: field.schedule_margin(t, y), condition)
    else:
        conditions = condition
    y0 = initial_state(theta0, field.clock)
    term = diffrax.ODETerm(lambda s, y, args: field(s, y))
    atol = options.atol_for(theta0)
    sol = _diffeqsolve(
        term, options.solver, 0.0, t1, y0, None, ts, conditions, options, atol, span=t1
    )
    s_end, y_end, saved = _final(sol)
    # which event fired: the condition closest to (or past) zero at the event state
    codes = jnp.array([code for _, _, code in stops] + [Status.NONFINITE])
    event_code = codes[jnp.argmin(margins_fn(y_end))]
    if scheduled:
        event_code = jnp.where(sol.event_mask[0], Status.SIGMA_NEGATIVE, event_code)
    status = status_from_result(sol.result, event_code)
    status = jnp.where(is_representable(theta_of(y_end)), status, Status.NONFINITE)
    return _trajectory(
        field, ts, saved, s_end, y_end,
        status=status,
        n_steps=sol.stats["num_steps"],
        n_rejected=sol.stats["num_rejected_steps"],
        interpolation=(
            DenseOutput.from_diffrax(sol.interpolation, s_end, y0, field.rescaled)
            if options.dense
            else None
        ),
    )  # fmt: skip


def _trajectory(field, ts, saved, s_end, y_end, **kw):
    """The :class:`Trajectory` of a run of ``field`` (smooth or Filippov), both clocks."""
    return make_trajectory(
        ts,
        theta_of(saved),
        field.data,
        field.loss,
        t_end=s_end,
        theta_end=theta_of(y_end),
        t_real=clock_of(saved, ts, field.rescaled),
        t_real_end=clock_of(y_end, s_end, field.rescaled),
        **kw,
    )


def _dense_buffers(term, solver, y0, args, max_steps):
    """Empty buffers for the joined dense output of up to ``2 max_steps`` steps.

    Segments together take fewer than ``max_steps`` steps before the last one
    starts, and the last one at most ``max_steps``.
    """
    state = solver.init(term, 0.0, 1.0, y0, args)
    info = jax.eval_shape(lambda: solver.step(term, 0.0, 1.0, y0, args, state, False)[2])
    n = 2 * max_steps
    infos = jax.tree.map(lambda x: jnp.full((n, *x.shape), jnp.nan, x.dtype), info)
    return jnp.full(n + 1, jnp.inf), jnp.full(n, jnp.inf), infos, jnp.zeros((), jnp.int64)


def _append_dense(buffers, interpolation):
    """Write one segment's dense output after the steps already in ``buffers``.

    The segment's first step starts at the previous one's event time, which
    overwrites that segment's last (nominal) step end in ``starts``.
    """
    starts, ends, infos, size = buffers
    ts, n = interpolation.ts, interpolation.ts_size - 1
    starts = lax.dynamic_update_slice(starts, ts, (size,))
    ends = lax.dynamic_update_slice(ends, ts[1:], (size,))
    infos = jax.tree.map(
        lambda buf, x: lax.dynamic_update_slice(buf, x, (size,) + (0,) * (x.ndim - 1)),
        infos,
        interpolation.infos,
    )
    return starts, ends, infos, size + n


@eqx.filter_jit
def solve_filippov(system, theta0, ts, t1, options):
    r"""Integrate a Filippov ℓ∞-SAM system (``flows._filippov``) in smooth segments.

    A ``lax.while_loop`` over ``diffeqsolve`` calls, each in a fixed mode and ended
    by a switch event, a stopping event or ``t1``; each has the step budget
    ``max_steps``, and the loop stops with ``max_steps`` once the segments together
    spent it. diffrax's own stage-loop solver is used (:func:`flows._rk.looped`).
    The segments are integrated in the run's time unit, :math:`u=s/T` with
    :math:`T` = ``system.for_run(theta0).time_unit`` (a power of 2: the map is exact), so that
    the root finder's, the step controller's and diffrax's own time tolerances are
    relative to the run's scale: at :math:`\rho/\alpha=10^{9}` the events come at
    :math:`s\sim10^{-9}`, below any fixed absolute tolerance, which would miss them.
    With ``dense=True`` the segments' dense outputs are joined into one. Under
    ``vmap`` a lane that has stopped integrates nothing while the others go on.
    """
    solver = _rk.looped(options.solver)
    system = system.for_run(theta0)
    stops = stop_conditions(system.data, system.loss, theta0, options, system.rescaled)
    # Stopping conditions as "positive inside, stop at <= 0" (escape is an upcrossing).
    stops_pos = [(lambda y, c=c, s=s: -s * c(theta_of(y))) for c, s, _ in stops]
    codes = [code for _, _, code in stops]
    scale = system.time_unit
    ts_u, t1_u = ts / scale, t1 / scale

    def velocity(u, y, mode):  # d/du = T d/ds
        return jax.tree.map(lambda a: scale * a, system.velocity(u * scale, y, *mode[:2]))

    term = diffrax.ODETerm(velocity)
    atol = options.atol_for(theta0)

    # One scalar event, the minimum of the switch condition and the stopping
    # conditions, located by bisection (no derivative of the equivalent control is
    # traced); the condition that fired is read off the located state. A
    # non-finite state makes the step controller fail, reported as ``nonfinite``.
    def condition(u, y, mode):
        switch = system.switch_condition(u * scale, theta_of(y), mode)
        return jnp.min(jnp.stack([switch] + [c(y) for c in stops_pos]))

    def segment(carry):
        s0, y, mode, saved, status, steps, rejected, switches, t_slide, ambiguous, dense = carry
        theta = theta_of(y)
        # Every segment starts at s = 0 or at a switch event: choose its mode, and put
        # the weights it holds at 0 there.
        mode, (ok, flagged) = system.decide(s0 * scale, theta, mode)
        theta = system.project(theta, mode)
        y = (theta, y[1]) if isinstance(y, tuple) else theta
        # A stopped lane (under vmap; its carry is kept, see below) slides nowhere, so
        # that it does not send the batch through the sliding branch (_any_lane).
        mode = (mode[0], mode[1] & (status == _CONTINUE), *mode[2:])
        # Under vmap the loop runs this body for every lane until the last one stops
        # and keeps the stopped lanes' old carry, so what a stopped lane integrates
        # here is thrown away. It must not integrate anything: an escape or collapse
        # condition already past 0 fires no new downcrossing, so from its stopping
        # state it would run on toward t1 (an escaped lane of the rescaled flow until
        # it overflows: about 10,600 steps, per later segment of any other lane), work
        # that would dominate a vmapped batch's time. Unvmapped the body only
        # runs while the status is _CONTINUE, where s_stop is t1: nothing changes.
        s_stop = jnp.where(status == _CONTINUE, t1_u, s0)
        sol = _diffeqsolve(
            term,
            solver,
            s0,
            s_stop,
            y,
            mode,
            jnp.clip(ts_u, s0, s_stop),
            condition,
            options,
            atol,
            # The segments' times are in the unit T, the run's own time scale, and so is
            # the event location's absolute tolerance: 1e-20 T, or 1e-20 t1 if shorter
            # (t1/T is twin-invariant but reaches 1e10 at ρ/α = 1e9, where 1e-20 t1/T
            # left the collapse ‖θ‖ 1e-5 past its threshold; the real-time t1 made it
            # 1e21 T at λ = 1e-20, L = 4, where the twins ended max_steps).
            span=jnp.minimum(t1_u, 1.0),
        )
        s_end, y_end, new = _final(sol)
        inside = (ts_u >= s0) & (ts_u <= s_end)
        saved = jax.tree.map(
            lambda a, b: jnp.where(inside.reshape(-1, *([1] * (a.ndim - 1))), a, b), new, saved
        )
        # The event was a stop if a stopping condition is (about) 0 at the located
        # state. It can also be crossed inside the step that overshoots a switching
        # surface (‖θ‖ is not monotone across it) and be missed there; the switch
        # event then lands on the far side, hence "<=". Or if it is the smallest
        # condition, the one that fired: the event is located to 1e-14 in u, which
        # near a blow-up at s ~ 1e-4 leaves the escape condition at 1e-8 (a stop
        # read as a switch, then one more segment).
        values = [c(y_end) for c in stops_pos]
        smallest = jnp.min(
            jnp.stack([system.switch_condition(s_end * scale, theta_of(y_end), mode)] + values)
        )
        event_code = jnp.asarray(_CONTINUE, dtype=jnp.int64)
        for value, code_k in reversed(list(zip(values, codes, strict=True))):
            fired = (value <= _STOP_TOL) | (value == smallest)
            event_code = jnp.where(fired, code_k, event_code)
        code = status_from_result(sol.result, event_code)
        switches = switches + (code == _CONTINUE)
        steps = steps + sol.stats["num_steps"]
        code = jnp.where((code == _CONTINUE) & (steps >= options.max_steps), Status.MAX_STEPS, code)
        # a sliding control that did not solve where the mode was chosen (the end of
        # the run is checked below)
        code = jnp.where(ok, code, Status.SLIDING_FAILED)
        code = jnp.where(is_finite(y_end), code, Status.NONFINITE)
        t_slide = t_slide + jnp.where(jnp.any(mode[1]), s_end - s0, 0.0)
        rejected = rejected + sol.stats["num_rejected_steps"]
        ambiguous = ambiguous | flagged
        if options.dense:
            dense = _append_dense(dense, sol.interpolation)
        return (
            s_end, y_end, mode, saved, code, steps, rejected, switches, t_slide, ambiguous, dense
        )  # fmt: skip

    y0 = initial_state(theta0, system.clock)
    mode0 = system.initial_mode(theta0)
    saved0 = jax.tree.map(lambda a: jnp.broadcast_to(a, (ts.shape[0], *a.shape)), y0)
    zero = jnp.zeros((), dtype=jnp.int64)
    dense0 = _dense_buffers(term, solver, y0, mode0, options.max_steps) if options.dense else None
    carry = (
        jnp.asarray(0.0), y0, mode0, saved0, jnp.asarray(_CONTINUE, dtype=jnp.int64), zero, zero,
        zero, jnp.asarray(0.0), jnp.asarray(False), dense0,
    )  # fmt: skip
    carry = lax.while_loop(lambda c: c[4] == _CONTINUE, segment, carry)
    s_end, y_end, mode, saved, status, steps, rejected, switches, t_slide, ambiguous, dense = carry
    s_end, t_slide = s_end * scale, t_slide * scale  # back from u = s/T (exact)
    ok = system.check(s_end, theta_of(y_end), mode)
    status = jnp.where(ok | (status == Status.NONFINITE), status, Status.SLIDING_FAILED)
    status = jnp.where(is_representable(theta_of(y_end)), status, Status.NONFINITE)
    interpolation = None
    if options.dense:
        starts, ends, infos, size = dense
        interpolation = DenseOutput(
            starts * scale,
            ends * scale,
            infos,
            size,
            s_end,
            y0,
            solver.interpolation_cls,
            system.rescaled,
        )
    return _trajectory(
        system, ts, saved, s_end, y_end, status=status, n_steps=steps, n_rejected=rejected,
        n_switches=switches, t_sliding=t_slide, ambiguous=ambiguous, interpolation=interpolation,
    )  # fmt: skip
