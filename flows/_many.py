r"""Many trajectories of one method at once: :func:`solve_many`."""

import jax
import jax.numpy as jnp
import numpy as np

from . import _rules
from ._config import release_compiled_when_crowded
from ._dynamics import real_time
from ._methods import LESAM, AbstractMethod
from ._options import SolverOptions, auto_atol
from ._problem import Dataset, beta, loss_arguments, loss_fn
from ._solve import check_problem, check_ts
from ._trajectory import Trajectory
from ._validate import MAX_WORKERS, as_array, check_int, check_scalar

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


def solve_many(
    method: AbstractMethod,
    data: Dataset,
    theta0,
    *,
    t1,
    ts=None,
    rescaled: bool = False,
    loss: str = "logistic",
    params=None,
    options: SolverOptions | None = None,
    workers: int | None = None,
) -> Trajectory:
    r"""Integrate many trajectories of one method: starts and parameters per trajectory.

    Trajectory :math:`n` integrates the flow of :func:`flows.solve` (the rescaled flow with
    ``rescaled=True``) from ``theta0[n]`` with the method's parameters, those named in
    ``params`` taken as ``params[name][n]``. The answers are those of :func:`flows.solve`
    with the same options: the numba engine runs diffrax's algorithm step for step.

    Backends (``options.backend``):

    * ``"numba"`` (default here): one compiled adaptive loop per trajectory on the CPU, no
      lockstep between trajectories, trajectories side by side in SIMD lanes, threads
      over the batch. The fastest on a CPU, for GD, ℓ2-SAM (global or per layer),
      smoothed ℓ∞-SAM (``LinfSAM(rho, delta)``) and LE-SAM with a constant σ.
      Not traceable (no ``jax.grad``), no dense output.
    * ``"diffrax"``: ``jax.vmap`` of :func:`flows.solve`, for every method (the exact ℓ∞
      sign, LE-SAM schedules), for an accelerator, and for dense output.

    Arguments:
        method: a flows method; its numeric fields are the defaults of ``params``.
        data: a :class:`Dataset` (one example for ``rescaled=True``).
        theta0: the starts, shape ``(N, L, d)``, or ``(L, d)`` for one start shared by
            every trajectory.
        t1, ts, rescaled, loss: as :func:`flows.solve`; ``ts`` is shared.
        params: None, or a mapping from parameter names of the method (``rho``, ``delta``,
            ``sigma``, ``rho_max``, ``eps``) to a number or an array of shape ``(N,)``.
        options: a :class:`SolverOptions` (default ``SolverOptions(backend="numba")``).
        workers: threads of the numba engine, an integer in [1, 4096] (``MAX_WORKERS``;
            default: every core).

    Returns:
        A :class:`Trajectory` whose arrays have a leading axis of length N.

    >>> import flows, numpy as np
    >>> data = flows.single_example([1.0, 2.0])
    >>> theta0 = np.stack([flows.balanced_init(a, 2, 2) for a in (0.1, 0.5)])
    >>> many = flows.solve_many(flows.L2SAM(0.1), data, theta0, t1=2.0, rescaled=True)
    >>> one = flows.solve(flows.L2SAM(0.1), data, theta0[1], t1=2.0, rescaled=True)
    >>> bool(np.allclose(many.thetas[1], one.thetas, rtol=1e-12, atol=0))
    True
    """
    release_compiled_when_crowded()
    loss = check_problem(method, data, loss, rescaled)
    if options is None:
        options = SolverOptions(backend="numba")
    if not isinstance(options, SolverOptions):
        raise ValueError(f"`options` must be None or a flows.SolverOptions; got {options!r}.")
    theta0 = _check_starts(theta0, data)
    values = _check_params(method, params, theta0.shape[0])
    n = max([theta0.shape[0]] + [v.shape[0] for v in values.values()])
    theta0 = np.broadcast_to(theta0, (n, *theta0.shape[1:]))
    t1 = float(check_scalar("t1", t1, positive=True))
    ts = np.asarray(check_ts(ts, t1), np.float64)
    if workers is not None:
        workers = check_int("workers", workers, minimum=1, maximum=MAX_WORKERS)
    if options.backend == "numba":
        return run_numba(method, data, theta0, ts, t1, rescaled, loss, values, options, workers)
    if options.backend == "diffrax":
        return _diffrax(method, data, theta0, ts, t1, rescaled, loss, values, options)
    raise ValueError(f"`options.backend` must be 'numba' or 'diffrax'; got {options.backend!r}.")


def _check_starts(theta0, data):
    theta0 = np.asarray(as_array("theta0", theta0, "an (N, L, d) or (L, d) array of numbers"))
    if theta0.ndim == 2:
        theta0 = theta0[None]
    if theta0.ndim != 3 or theta0.shape[1] < 1 or theta0.shape[2] != data.d:
        raise ValueError(
            f"`theta0` must have shape (N, L, d) or (L, d) with d = {data.d} and L >= 1; "
            f"got shape {theta0.shape}."
        )
    if theta0.shape[0] < 1 or not np.all(np.isfinite(theta0)):
        raise ValueError("`theta0` must hold at least one start, every entry finite.")
    return theta0.astype(np.float64)


def _check_params(method, params, n):
    """``params`` as a dict of float64 arrays of shape (1,) or (N,), each checked."""
    if params is None:
        return {}
    if not hasattr(params, "items"):
        raise ValueError(f"`params` must be None or a mapping name -> values; got {params!r}.")
    known = method.rule_params() if method.rule is not None else {}
    out = {}
    for name, value in params.items():
        if name not in known or callable(known[name]) or known[name] is None:
            names = sorted(k for k, v in known.items() if v is not None and not callable(v))
            raise ValueError(
                f"`params` must name numeric parameters of {type(method).__name__}, one of "
                f"{names}; got {name!r}."
            )
        arr = np.atleast_1d(np.asarray(as_array(f"params[{name!r}]", value), np.float64))
        positive = _rules.SIGNS[name] == "positive"
        nonnegative = _rules.SIGNS[name] == "nonnegative"
        if arr.ndim != 1 or (arr.shape[0] not in (1, n) and n != 1):
            raise ValueError(
                f"`params[{name!r}]` must be a number or an array of shape (N,) = ({n},); "
                f"got shape {arr.shape}."
            )
        bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0) if nonnegative else False)
        if np.any(bad):
            sign = "> 0" if positive else ">= 0"
            raise ValueError(f"`params[{name!r}]` must be finite and {sign}; got {value!r}.")
        out[name] = arr
    sizes = {v.shape[0] for v in out.values()} - {1}
    if len(sizes) > 1:
        raise ValueError(f"`params` arrays must share one length N; got lengths {sorted(sizes)}.")
    return out


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
    weight far above atol however far it decays; ``r0``
    (with ``logs``): on the arc-length clock of :func:`flows._engine._log_field` with that
    floor (``t1`` then a budget of arc length; ``t_end`` and the switch times are τ)."""
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


def _diffrax(method, data, theta0, ts, t1, rescaled, loss, values, options):
    from ._solve import solve

    n = theta0.shape[0]
    names = list(values)
    columns = [jnp.asarray(np.broadcast_to(values[k], (n,))) for k in names]

    def one(theta, *vals):
        m = method
        for name, v in zip(names, vals, strict=True):
            m = _replace(m, name, v)
        return solve(m, data, theta, t1=t1, ts=jnp.asarray(ts), rescaled=rescaled, loss=loss,
                     options=options)  # fmt: skip

    return jax.vmap(one)(jnp.asarray(theta0), *columns)


def _replace(method, name, value):
    import equinox as eqx

    return eqx.tree_at(lambda m: getattr(m, name), method, value)

