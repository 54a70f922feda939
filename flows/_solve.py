r"""Integrate a method's flow (or rescaled flow) with diffrax or scipy.

Both backends return the same :class:`~flows.Trajectory`; diffrax is the default
(jit- and vmap-able), scipy's ``solve_ivp`` is the independent reference.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import scipy.integrate

from . import _rk
from ._config import as_float64
from ._dynamics import field, is_finite
from ._methods import AbstractMethod, LinfSAM
from ._problem import Dataset, check_loss, check_theta, objective
from ._trajectory import Status, Trajectory, make_trajectory
from ._validate import check_int, check_scalar, is_traced

# Solver names accepted by ``solve(..., solver=...)``. Tsit5 is the default: away
# from the ℓ∞ switching surfaces these flows are smooth and non-stiff (the
# Jacobian's spectrum is O(‖μ‖·|θ|^{L-2})), so a 5th-order explicit method with
# no linear solves is cheapest per step and vmaps without lockstep linear algebra.
# Kvaerno5 (ESDIRK, L-stable) is the stiff option, for stiff data (widely spread
# feature scales) and for comparisons. The explicit ones are diffrax's, with the
# stage loop unrolled (flows._rk: 2.2x less time per vmapped step, issue 6).
DIFFRAX_SOLVERS = {
    "tsit5": _rk.Tsit5,
    "dopri5": _rk.Dopri5,
    "dopri8": _rk.Dopri8,
    "kvaerno3": diffrax.Kvaerno3,
    "kvaerno5": diffrax.Kvaerno5,
}
SCIPY_SOLVERS = ("LSODA", "Radau", "BDF", "RK45", "DOP853")


def _check_tol(name, value, low, high):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
        raise ValueError(f"`{name}` must be None or a number in ({low}, {high}); got {value!r}.")
    return float(value)


def _check_ts(ts, t1):
    if ts is None:
        return jnp.linspace(0.0, t1, 101)
    ts = as_float64(ts)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"`ts` must be a 1-D array of saving times; got shape {ts.shape}.")
    if not is_traced((ts, t1)):
        tsn = np.asarray(ts)
        if not (
            np.all(np.isfinite(tsn))
            and np.all(np.diff(tsn) >= 0)
            and tsn[0] >= 0
            and tsn[-1] <= float(t1)
        ):
            raise ValueError(
                f"`ts` must be finite, non-decreasing and within [0, t1]; got {tsn!r}."
            )
    return ts


def solve(
    method: AbstractMethod,
    data: Dataset,
    theta0,
    *,
    t1,
    ts=None,
    rescaled: bool = False,
    loss: str = "logistic",
    backend: str = "diffrax",
    solver=None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 100_000,
    collapse_tol: float | None = 1e-6,
    escape_tol: float | None | str = "auto",
    loss_tol: float | None = None,
    dense: bool = False,
) -> Trajectory:
    r"""Integrate :math:`\dot\theta=-\nabla\mathcal L(\theta+\varepsilon(\theta))` from ``theta0``.

    With ``rescaled=True`` (single example only) integrate instead
    :math:`d\theta/d\tau=\nabla_\theta\langle\beta,y\,x\rangle|_{\hat\theta}`, the same
    path on the clock :math:`\tau=\int-\ell'\,dt` (science.md §3); ``t1`` and ``ts``
    are then values of τ.

    The run stops at ``t1`` or at the first event, which sets ``status``:

    * ``collapsed``: :math:`\lVert\theta\rVert\le c\lVert\theta_0\rVert` (c: ``collapse_tol``);
    * ``escaped``: :math:`\lVert\theta\rVert\ge e\lVert\theta_0\rVert` (e: ``escape_tol``);
    * ``converged``: :math:`\mathcal L(\theta)\le` ``loss_tol``;
    * ``max_steps``: ``max_steps`` solver steps were spent;
    * ``nonfinite``: a non-finite state or any other solver failure.

    The thresholds are relative to :math:`\lVert\theta_0\rVert` so that the
    scale invariance :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)` of the
    rescaled flow (science.md §5) is kept exactly. Continuous events are located
    by root-finding on the dense output (diffrax) or by ``solve_ivp``'s event
    location (scipy).

    ``LinfSAM(rho)`` (exact sign) has a discontinuous field and is integrated as a
    Filippov system (issue 3, ``flows._filippov``) by both backends: sign switches
    are located events, motion on a switching surface follows the sliding field,
    and ``n_switches`` and ``t_sliding`` are reported; ``dense=True`` is not
    available for it. ``LinfSAM(rho, delta=...)`` is an ordinary smooth field.

    Arguments:
        method: a method instance (``GD()``, ``L2SAM(rho)``, ...).
        data: a :class:`Dataset`.
        theta0: initial parameters, shape ``(L, d)`` (any, not only balanced).
        t1: final time (> 0).
        ts: saving times in ``[0, t1]``; default 101 equispaced points.
        rescaled: integrate the single-example rescaled flow.
        loss: ``"logistic"`` or ``"exponential"``.
        backend: ``"diffrax"`` (jit/vmap-able) or ``"scipy"`` (reference, not traceable).
        solver: diffrax: a name in ``DIFFRAX_SOLVERS`` (default ``"tsit5"``) or a
            ``diffrax.AbstractSolver``; scipy: a ``solve_ivp`` method name
            (default ``"LSODA"``; implicit methods get the autodiff Jacobian).
        rtol, atol: tolerances of the PID step-size controller / of ``solve_ivp``.
        max_steps: step budget.
        collapse_tol: relative collapse threshold in (0, 1), or None for no event.
        escape_tol: relative escape threshold > 1, or None for no event. The
            default ``"auto"`` means 1e6 for the rescaled flow and no event for the
            plain flow.
        loss_tol: loss threshold > 0, or None (default) for no event.
        dense: keep the solver's dense interpolant (diffrax only), so that
            ``traj.evaluate(t)`` gives θ(t) to solver accuracy anywhere in
            ``[0, t_end]`` (used to locate switch times by root-finding).

    Returns:
        A :class:`Trajectory` with ``status``, ``t_end``, ``n_steps`` and ``n_rejected``
        (and ``n_switches``, ``t_sliding`` for the Filippov ℓ∞-SAM flow).

    >>> import flows
    >>> data = flows.single_example([1.0, 2.0])
    >>> theta0 = flows.balanced_init(0.5, depth=2, d=2)
    >>> traj = flows.solve(flows.L2SAM(0.1), data, theta0, t1=2.0, rescaled=True)
    >>> traj.status_name, traj.thetas.shape
    ('ok', (101, 2, 2))
    """
    if not isinstance(method, AbstractMethod):
        raise ValueError(f"`method` must be a flows method such as flows.GD(); got {method!r}.")
    if not isinstance(data, Dataset):
        raise ValueError(f"`data` must be a flows.Dataset; got {type(data).__name__}.")
    theta0 = check_theta(theta0, data)
    loss = check_loss(loss)
    if not isinstance(dense, bool):
        raise ValueError(f"`dense` must be True or False; got {dense!r}.")
    if not isinstance(rescaled, bool):
        raise ValueError(f"`rescaled` must be True or False; got {rescaled!r}.")
    if rescaled and data.n != 1:
        raise ValueError(
            f"`rescaled=True` needs a single example (n = 1): with n > 1 there is no common "
            f"loss factor to divide out; got n = {data.n}."
        )
    t1 = check_scalar("t1", t1, positive=True)
    ts = _check_ts(ts, t1)
    rtol = _check_tol("rtol", rtol, 0.0, 1.0)
    atol = _check_tol("atol", atol, 0.0, np.inf)
    if rtol is None or atol is None:
        raise ValueError("`rtol` and `atol` must be positive numbers, not None.")
    max_steps = check_int("max_steps", max_steps, minimum=1)
    if isinstance(escape_tol, str) and escape_tol == "auto":
        escape_tol = 1e6 if rescaled else None
    events = dict(
        collapse_tol=_check_tol("collapse_tol", collapse_tol, 0.0, 1.0),
        escape_tol=_check_tol("escape_tol", escape_tol, 1.0, np.inf),
        loss_tol=_check_tol("loss_tol", loss_tol, 0.0, np.inf),
    )
    config = dict(loss=loss, rescaled=rescaled, rtol=rtol, atol=atol, max_steps=max_steps, **events)
    if backend == "diffrax":
        if solver is None:
            solver = "tsit5"
        if isinstance(solver, str):
            if solver not in DIFFRAX_SOLVERS:
                raise ValueError(
                    f"`solver` must be one of {sorted(DIFFRAX_SOLVERS)} or a diffrax "
                    f"solver for backend='diffrax'; got {solver!r}."
                )
            solver = DIFFRAX_SOLVERS[solver]()
        if not isinstance(solver, diffrax.AbstractSolver):
            raise ValueError(
                f"`solver` must be a diffrax solver for backend='diffrax'; got {solver!r}."
            )
        if _is_filippov(method):
            from ._filippov import solve_filippov_diffrax

            if dense:
                raise ValueError("`dense=True` is not supported for the Filippov ℓ∞-SAM flow.")
            solver = _rk.looped(solver)
            return solve_filippov_diffrax(method, data, theta0, ts, t1, solver=solver, **config)
        return _solve_diffrax(method, data, theta0, ts, t1, solver=solver, dense=dense, **config)
    if backend == "scipy":
        solver = "LSODA" if solver is None else solver
        if solver not in SCIPY_SOLVERS:
            raise ValueError(
                f"`solver` must be one of {SCIPY_SOLVERS} for backend='scipy'; got {solver!r}."
            )
        if is_traced((method, data, theta0, ts, t1)):
            raise ValueError(
                "backend='scipy' cannot run under jax.jit/vmap; use backend='diffrax'."
            )
        if dense:
            raise ValueError("`dense` must be False for backend='scipy' (diffrax only).")
        if _is_filippov(method):
            from ._filippov import solve_filippov_scipy

            return solve_filippov_scipy(method, data, theta0, ts, t1, solver=solver, **config)
        return _solve_scipy(method, data, theta0, ts, t1, solver=solver, **config)
    raise ValueError(f"`backend` must be 'diffrax' or 'scipy'; got {backend!r}.")


def _is_filippov(method) -> bool:
    """ℓ∞-SAM with the exact sign is integrated as a Filippov system (issue 3).

    A concrete ``rho == 0`` is GD (a continuous field) and takes the smooth path, so
    that ``LinfSAM(0)`` and ``GD()`` agree exactly.
    """
    if not isinstance(method, LinfSAM) or method.delta is not None:
        return False
    return is_traced(method.rho) or float(method.rho) != 0.0


class _Bisection(optx.Bisection):
    """Bisection that stops when the bracket is small, whatever |c| is then.

    ``optx.Bisection`` (and ``optx.Newton``) also demand |c| < atol, which is
    unattainable where rounding t moves c by more than atol: near a finite-time
    blow-up, or where the interpolant of a step through a collapse at the origin
    wiggles. The bracket [t_prev, t_next] of the step that changed sign always
    holds a root, so halving it to 1e-12 relative locates the event to 1e-12.
    Use it with ``flip=True`` (the condition goes from positive to non-positive):
    sign detection would raise where the condition ends exactly at 0, and for the
    batch members without an event, which diffrax root-finds under ``vmap`` too.
    """

    def terminate(self, fn, y, args, options, state, tags):
        del fn, args, options, tags
        small = jnp.abs(state.lower - state.upper) < self.atol + self.rtol * jnp.abs(y)
        return small, optx.RESULTS.successful


def _event_functions(data, loss, theta0, collapse_tol, escape_tol, loss_tol):
    """The continuous stopping conditions ``c(θ)`` (event when c crosses 0), one place.

    Each is scaled so that one rounding step in t moves it by far less than the
    root finder's tolerance: near a collapse ‖θ‖ moves linearly in t, so the
    collapse condition is linear in ‖θ‖/‖θ₀‖; growth and loss decay are
    exponential in t, so those conditions are logarithms. Returns a list of
    ``(c, direction, status)`` with direction ``-1`` for a downcrossing and
    ``+1`` for an upcrossing.
    """
    norm0 = jnp.linalg.norm(theta0)
    out = []
    if collapse_tol is not None:
        out.append((lambda y: jnp.linalg.norm(y) / norm0 - collapse_tol, -1, Status.COLLAPSED))
    if escape_tol is not None:
        out.append(
            (lambda y: jnp.log(jnp.linalg.norm(y) / norm0) - np.log(escape_tol), +1, Status.ESCAPED)
        )
    if loss_tol is not None:
        out.append(
            (lambda y: jnp.log(objective(y, data, loss)) - np.log(loss_tol), -1, Status.CONVERGED)
        )
    return out


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


@eqx.filter_jit
def _solve_diffrax(
    method,
    data,
    theta0,
    ts,
    t1,
    *,
    solver,
    loss,
    rescaled,
    rtol,
    atol,
    max_steps,
    collapse_tol,
    escape_tol,
    loss_tol,
    dense,
):
    f = field(method, data, loss, rescaled)
    events = _event_functions(data, loss, theta0, collapse_tol, escape_tol, loss_tol)
    # One scalar condition g = min_i(-s_i c_i), positive while the run goes on; it
    # crosses 0 downwards at the first event, and is -1 on a non-finite state.
    margins_fn = lambda y: jnp.stack([-s * c(y) for c, s, _ in events] + [jnp.inf])  # noqa: E731

    def cond(t, y, args, **kw):
        return jnp.where(is_finite(y), jnp.min(margins_fn(y)), -1.0)

    event = diffrax.Event(
        cond, root_finder=_Bisection(rtol=1e-12, atol=1e-14, flip=True), direction=False
    )
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
    controller = diffrax.PIDController(
        rtol=rtol, atol=atol, pcoeff=0.4, icoeff=0.3 if implicit else 1.0
    )
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, args: f(t, y)),
        solver,
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=theta0,
        # Two sub-saves: the state at the requested ts, and the final state (at t1
        # or at the event), which diffrax would otherwise mix into the ts buffer.
        saveat=diffrax.SaveAt(
            subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)], dense=dense
        ),
        stepsize_controller=controller,
        event=event,
        max_steps=max_steps,
        throw=False,
    )
    (_, t_end), (thetas, theta_end) = sol.ts, sol.ys
    t_end, theta_end = t_end[0], theta_end[0]
    # which event fired: the condition closest to (or past) zero at the event state
    codes = jnp.array([code for _, _, code in events] + [Status.NONFINITE])
    event_code = codes[jnp.argmin(margins_fn(theta_end))]
    status = status_from_result(sol.result, event_code)
    status = jnp.where(is_finite(theta_end), status, Status.NONFINITE)
    return make_trajectory(
        ts,
        thetas,
        data,
        loss,
        status=status,
        t_end=t_end,
        theta_end=theta_end,
        n_steps=sol.stats["num_steps"],
        n_rejected=sol.stats["num_rejected_steps"],
        interpolation=sol.interpolation if dense else None,
    )


def _step_budget_event(max_steps):
    """A terminal ``solve_ivp`` event that fires once ``max_steps`` steps were taken.

    ``solve_ivp`` has no step budget, but it evaluates events once at the end of
    every step (at increasing t) before it root-finds. The event counts those
    calls; when the budget is spent it becomes the deterministic function
    ``t_mid - t`` (``t_mid`` the middle of the last step), so that the root
    finder sees a sign change and stops the run inside the last step.
    """
    state = {"count": 0, "t_last": -np.inf, "t_mid": None}

    def budget(t, y):
        del y
        if state["t_mid"] is None and t > state["t_last"]:
            state["count"] += 1
            if state["count"] > max_steps:  # the first call is at t0, before any step
                state["t_mid"] = 0.5 * (state["t_last"] + t)
            state["t_last"] = t
        return 1.0 if state["t_mid"] is None else state["t_mid"] - t

    budget.terminal, budget.direction = True, -1
    return budget


@eqx.filter_jit
def _flat_field(method, data, t, y, *, shape, loss, rescaled):
    return field(method, data, loss, rescaled)(t, y.reshape(shape)).ravel()


@eqx.filter_jit
def _flat_jacobian(method, data, t, y, *, shape, loss, rescaled):
    return jax.jacfwd(
        lambda z: _flat_field(method, data, t, z, shape=shape, loss=loss, rescaled=rescaled)
    )(y)


def _solve_scipy(
    method,
    data,
    theta0,
    ts,
    t1,
    *,
    solver,
    loss,
    rescaled,
    rtol,
    atol,
    max_steps,
    collapse_tol,
    escape_tol,
    loss_tol,
):
    shape = theta0.shape
    kw = dict(shape=shape, loss=loss, rescaled=rescaled)
    # solve_ivp passes t as a Python float, which filter_jit would treat as static
    # and recompile for at every new t (30-60 s per solve; issue 6): pass an array.
    fun = lambda t, y: np.asarray(_flat_field(method, data, np.asarray(t), y, **kw))  # noqa: E731
    jac = lambda t, y: np.asarray(_flat_jacobian(method, data, np.asarray(t), y, **kw))  # noqa: E731

    scipy_events, codes = [], []
    for c, direction, code in _event_functions(
        data, loss, theta0, collapse_tol, escape_tol, loss_tol
    ):
        c = jax.jit(c)
        ev = lambda t, y, c=c: float(c(y.reshape(shape)))  # noqa: E731
        ev.terminal, ev.direction = True, direction
        scipy_events.append(ev)
        codes.append(code)
    scipy_events.append(_step_budget_event(max_steps))
    codes.append(Status.MAX_STEPS)

    implicit = solver in ("LSODA", "Radau", "BDF")
    sol = scipy.integrate.solve_ivp(
        fun,
        (0.0, float(t1)),
        np.asarray(theta0).ravel(),
        method=solver,
        rtol=rtol,
        atol=atol,
        jac=jac if implicit else None,
        events=scipy_events,
        dense_output=True,
    )
    theta_end = sol.y[:, -1]
    t_end = sol.t[-1]
    if sol.status == 0:
        status = Status.OK
    elif sol.status == 1:
        fired = [i for i, te in enumerate(sol.t_events) if len(te)]
        status = codes[fired[0]]
    else:
        status = Status.NONFINITE
    if not np.all(np.isfinite(theta_end)):
        status = Status.NONFINITE
    tsn = np.asarray(ts)
    thetas = np.full((tsn.shape[0], *shape), np.nan)
    inside = tsn <= t_end
    if inside.any():
        thetas[inside] = sol.sol(tsn[inside]).T.reshape(-1, *shape)
    return make_trajectory(
        tsn,
        jnp.asarray(thetas),
        data,
        loss,
        status=status,
        t_end=t_end,
        theta_end=jnp.asarray(theta_end.reshape(shape)),
        n_steps=len(sol.t) - 1,
        n_rejected=-1,
    )
