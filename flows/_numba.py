r"""The numba backend: :func:`flows.solve` and :func:`flows.solve_many` on the per-trajectory
engine (:mod:`flows._engine`), which methods and losses it runs, and its raw runs for the
analysis (:func:`engine_run`). The engine itself (numba) is imported on the first run.
"""

import jax.numpy as jnp
import numpy as np

from . import _rules
from ._dynamics import real_time
from ._methods import LESAM, AbstractMethod
from ._options import auto_atol
from ._problem import beta, loss_arguments, loss_fn
from ._trajectory import Trajectory

#: The rules of :mod:`flows._rules` that the numba engine integrates.
ENGINE_RULES = (_rules.GD, _rules.L2, _rules.LINF_SMOOTH, _rules.LE)
#: The losses that the numba engine integrates.
ENGINE_LOSSES = ("logistic", "exponential")


def engine_supports(method: AbstractMethod) -> bool:
    """True when the numba engine integrates ``method``: one of its rules with constant
    parameters (not the exact ℓ∞ sign, a Filippov system, nor an LE-SAM schedule; not
    unnormalised or per-example SAM)."""
    if method.rule not in ENGINE_RULES or method.per_example:
        return False
    return not (isinstance(method, LESAM) and method.time_dependent)


def _param_rows(method, values, n):
    """(N, 5) rows of the rule's parameters (flows._rules.PARAMS), ``values`` overriding."""
    rows = np.zeros((n, len(_rules.PARAMS)))
    for k, name in enumerate(_rules.PARAMS):
        default = method.rule_params().get(name)
        column = values.get(name, None if default is None else np.asarray(default, float))
        if column is not None:
            rows[:, k] = column
    return rows


def _atols(options, theta0):
    if isinstance(options.atol, str):
        return auto_atol(np.max(np.abs(theta0.reshape(theta0.shape[0], -1)), axis=1), np)
    return np.full(theta0.shape[0], float(options.atol))


def run_numba(method, data, theta0, ts, t1, rescaled, loss, values, options, workers):
    """The numba engine on validated inputs: ``theta0`` (N, L, d) and ``ts`` NumPy arrays,
    ``values`` the checked ``params``; refuses (naming ``method``) a method it cannot run."""

    if not engine_supports(method):
        raise ValueError(
            "`method` must be GD, L2SAM, LinfSAM(rho, delta) or LESAM with a constant "
            f"sigma for backend='numba'; got {method!r}: use backend='diffrax'."
        )
    if loss not in ENGINE_LOSSES:
        raise ValueError(
            f"`loss` must be one of {list(ENGINE_LOSSES)} for backend='numba'; got {loss!r}: "
            "use backend='diffrax' (or 'scipy')."
        )

    n, depth, d = theta0.shape
    clock = options.clock(method, rescaled)
    off = lambda v: 0.0 if v is None else float(v)  # noqa: E731
    out = engine_run(
        method, values, data, theta0, ts=ts, t1=t1, rescaled=rescaled, loss=loss,
        options=options, atols=_atols(options, theta0), collapse=off(options.collapse_tol),
        workers=workers,
    )  # fmt: skip
    saved, y_end = out["saved"], out["y_end"]
    thetas = saved[..., : depth * d].reshape(n, ts.shape[0], depth, d)
    if clock:
        t_real, t_real_end = real_time(saved[..., depth * d :]), real_time(y_end[:, depth * d :])
    else:
        t_real = np.full(saved.shape[:2], np.nan) if rescaled else np.broadcast_to(ts, (n, ts.size))
        t_real_end = np.full(n, np.nan) if rescaled else out["t_end"]
    theta_end = y_end[:, : depth * d].reshape(n, depth, d)
    return _batch(
        ts, thetas, data, loss, out["status"], out["t_end"], theta_end, out["n_steps"],
        out["n_rejected"], t_real, t_real_end,
    )  # fmt: skip


def engine_run(method, values, data, theta0, *, ts, t1, rescaled, loss, options, atols, collapse,
               escape=None, workers=None, tracking=None, logs=False, r0=None):
    r"""The numba engine's raw run of every start ``theta0`` (N, L, d), unchecked: the rows of
    :func:`flows._engine.run_many` (``t1``, ``atols``, ``collapse`` and ``escape`` a number or
    one per trajectory; ``escape`` None: that of ``options``; ``values`` the per-trajectory rule
    parameters of :func:`solve_many`'s ``params``; ``tracking`` as
    :func:`flows._engine.run_many`). The analysis's compiled runs call it pass after pass
    (:func:`analysis._drive.drive`); ``atols`` None: those of
    ``options`` (``"auto"``: relative to each start). ``logs``: integrate :math:`u=\log\theta`
    (every θ >= 0, no clock) under θ's error control, atol + rtol·θ, which is relative for every
    weight far above atol however far it decays; ``r0`` (with ``logs``): on the arc-length
    clock of :func:`flows._engine._vector_field._log_field` with that floor (``t1`` then a
    budget of arc length; ``t_end`` and the switch times are τ)."""
    from . import _engine

    if atols is None:
        atols = _atols(options, theta0)

    n, depth, d = theta0.shape
    clock = options.clock(method, rescaled)
    y0s = theta0.reshape(n, depth * d)
    if clock:
        y0s = np.concatenate([y0s, np.zeros((n, 2))], axis=1)
    if r0 is not None:  # τ, carried on the arc-length clock
        y0s = np.concatenate([y0s, np.zeros((n, 1))], axis=1)
    solver = options.solver if isinstance(options.solver, str) else "tsit5"
    if escape is None:
        escape = options.escape(rescaled, depth)
        escape = 0.0 if escape is None else float(escape)
    return _engine.run_many(
        y0s, _param_rows(method, values, n), atols, ts, t1,
        solver=_engine.SOLVERS[solver], kind=method.rule,
        per_layer=bool(getattr(method, "per_layer", False)), X=np.asarray(data.X),
        Y=np.asarray(data.y), loss=_engine.LOSSES[loss], rescaled=rescaled, clock=clock,
        L=depth, d=d, rtol=options.rtol, max_steps=options.max_steps, collapse=collapse,
        escape=escape,
        loss_tol=0.0 if options.loss_tol is None else float(options.loss_tol), threads=workers,
        tracking=tracking, logs=logs, r0=r0,
    )  # fmt: skip


def engine_velocity(method, values, data, theta, *, rescaled, loss):
    r"""The engine's vector field at each state ``theta`` (N, L, d), unchecked: :math:`d\theta/dt`
    of :func:`flows.velocity`, or :math:`d\theta/d\tau` of :func:`flows.rescaled_velocity`
    (``rescaled``), for an engine method (:func:`engine_supports`) with the per-state rule
    parameters ``values`` (as :func:`engine_run`); a NumPy array (N, L, d)."""
    from . import _engine

    n, depth, d = theta.shape
    out = _engine.fields(
        theta.reshape(n, depth * d), _param_rows(method, values, n), kind=method.rule,
        per_layer=bool(getattr(method, "per_layer", False)), X=np.asarray(data.X),
        Y=np.asarray(data.y), loss=_engine.LOSSES[loss], rescaled=rescaled, clock=False,
        L=depth, d=d,
    )  # fmt: skip
    return out.reshape(n, depth, d)


def _batch(ts, thetas, data, loss, status, t_end, theta_end, n_steps, n_rejected, t_real,
           t_real_end):
    """A batched :class:`Trajectory` (leading axis N) from the engine's arrays."""
    n = thetas.shape[0]
    t_end = jnp.asarray(t_end)
    ts_b = jnp.broadcast_to(jnp.asarray(ts), (n, ts.shape[0]))
    reached = ts_b <= t_end[:, None]
    b = beta(jnp.asarray(thetas))
    zero = jnp.zeros(n, jnp.int64)
    return Trajectory(
        ts=ts_b,
        thetas=jnp.asarray(thetas),
        beta=b,
        loss=jnp.mean(loss_fn(loss, loss_arguments(b @ data.X.T, data, loss)), axis=-1),
        status=jnp.asarray(status, jnp.int64),
        t_end=t_end,
        theta_end=jnp.asarray(theta_end),
        n_steps=jnp.asarray(n_steps, jnp.int64),
        n_rejected=jnp.asarray(n_rejected, jnp.int64),
        n_switches=zero,
        t_sliding=jnp.zeros(n),
        t_real=jnp.where(reached, jnp.asarray(t_real), jnp.nan),
        t_real_end=jnp.asarray(t_real_end, jnp.float64),
        ambiguous=jnp.zeros(n, bool),
    )
