r"""Integrate a method's flow (or rescaled flow) with diffrax or scipy.

Both backends return the same :class:`~flows.Trajectory`; diffrax is the default
(jit- and vmap-able), scipy's ``solve_ivp`` is the independent reference.
"""

import importlib
import os
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _diffrax
from ._config import cacheable_checks, release_compiled_when_crowded
from ._dynamics import Field
from ._filippov import system
from ._methods import LESAM, AbstractMethod, LinfSAM
from ._numba import run_numba
from ._options import SolverOptions, solver_options
from ._problem import Dataset, check_classification_loss, check_loss_data, check_theta, objective
from ._trajectory import Status, Trajectory
from ._validate import as_array, check_scalar, is_traced


def _backend(name: str):
    """The backend module; scipy's (and scipy.integrate, a slow import) is loaded on first use."""
    return _diffrax if name == "diffrax" else importlib.import_module("._scipy", __package__)


def check_problem(method, data, loss, rescaled) -> str:
    """Check the problem of :func:`solve` and :func:`flows.solve_many`; return the loss name."""
    if not isinstance(method, AbstractMethod):
        raise ValueError(f"`method` must be a flows method such as flows.GD(); got {method!r}.")
    if not isinstance(data, Dataset):
        raise ValueError(f"`data` must be a flows.Dataset; got {type(data).__name__}.")
    loss = check_loss_data(loss, data)
    if not isinstance(rescaled, bool):
        raise ValueError(f"`rescaled` must be True or False; got {rescaled!r}.")
    if rescaled:
        check_classification_loss(loss, "rescaled=True (it divides out -ℓ' > 0)")
    if _is_filippov(method):
        check_classification_loss(
            loss, "the exact ℓ∞ sign (a Filippov system); for the squared loss use "
            "LinfSAM(rho, delta) or flows.iterate"
        )
    if rescaled and data.n != 1:
        raise ValueError(
            f"`rescaled=True` needs a single example (n = 1): with n > 1 there is no common "
            f"loss factor to divide out; got n = {data.n}."
        )
    return loss


def default_ts(t1):
    """The default saving times of a run to ``t1``: 101 equispaced points of ``[0, t1]``."""
    return jnp.linspace(0.0, t1, 101)


def check_ts(ts, t1):
    if ts is None:
        return default_ts(t1)
    ts = as_array("ts", ts, what="a 1-D array of saving times")
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"`ts` must be a 1-D array of saving times; got shape {ts.shape}.")
    message = "`ts` must be finite, non-decreasing and within [0, t1]"
    if is_traced((ts, t1)):
        # Checked here, with a raising check: the solver's own check is traced as NaN
        # (see flows._config.cacheable_checks).
        bad = ~jnp.all(jnp.isfinite(ts)) | jnp.any(jnp.diff(ts) < 0) | (ts[0] < 0) | (ts[-1] > t1)
        return eqx.error_if(ts, bad, message)
    tsn = np.asarray(ts)
    finite = np.all(np.isfinite(tsn))
    if not (finite and np.all(np.diff(tsn) >= 0) and tsn[0] >= 0 and tsn[-1] <= float(t1)):
        raise ValueError(f"{message}; got {tsn!r}.")
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
    options: SolverOptions | None = None,
    **overrides,
) -> Trajectory:
    r"""Integrate :math:`\dot\theta=-\nabla\mathcal L(\theta+\varepsilon(\theta))` from ``theta0``.

    With ``rescaled=True`` (single example only) integrate instead
    :math:`d\theta/d\tau=\nabla_\theta\langle\beta,y\,x\rangle|_{\hat\theta}`, the same
    path on the clock :math:`\tau=\int-\ell'\,dt` (docs/theory.md §4); ``t1`` and ``ts``
    are then values of τ.

    The run stops at ``t1`` or at the first event, which sets ``status``:

    * ``collapsed``: :math:`\lVert\theta\rVert\le c\lVert\theta_0\rVert` (c: ``collapse_tol``);
    * ``escaped``: :math:`\lVert\theta\rVert\ge e\lVert\theta_0\rVert` (e: ``escape_tol``);
    * ``converged``: :math:`\mathcal L(\theta)\le` ``loss_tol``;
    * ``max_steps``: ``max_steps`` solver steps were spent;
    * ``nonfinite``: a state whose θ or :math:`\beta=\prod_l\theta^{(l)}` is not
      finite, a field that keeps giving NaN or inf at (or just past) the state, or
      any other solver failure.

    The thresholds (and the default ``atol``) are relative to the problem's own
    scale, :math:`\lVert\theta_0\rVert`, and the norms are computed without
    squaring (no under- or overflow from 1e-300 to 1e300), so that the
    scale invariance :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)` of the
    rescaled flow (docs/theory.md §6) is kept exactly. Continuous events are located
    by root-finding on the dense output (diffrax) or by ``solve_ivp``'s event
    location (scipy).

    ``LinfSAM(rho)`` (exact sign) has a discontinuous field and is integrated as a
    Filippov system (docs/theory.md §7, ``flows._filippov``) by both backends: sign
    switches are located events, motion on a switching surface follows the sliding
    field, and ``n_switches`` and ``t_sliding`` are reported; ``dense=True`` joins
    the segments' dense outputs. Where the Filippov selection is ambiguous
    (``traj.ambiguous``) a ``UserWarning`` is issued (concrete inputs only); a
    failed sliding-control solve stops the run with status ``sliding_failed``.
    ``LinfSAM(rho, delta=...)`` is an ordinary smooth field.

    The rescaled flow of a time-dependent rule (an LE-SAM schedule σ(t)) carries
    the real time along and reads the rule there (``traj.t_real``; for other rules
    on request, ``SolverOptions(real_time=True)``). A schedule that falls below 0 stops
    the run where it does (an event, located like the others; or at the start), with
    status ``sigma_negative`` and ``t_real_end`` that time; a concrete run also warns.

    Arguments:
        method: a method instance (``GD()``, ``L2SAM(rho)``, ...).
        data: a :class:`Dataset`.
        theta0: initial parameters, shape ``(L, d)`` (any, not only balanced).
        t1: final time (> 0).
        ts: saving times in ``[0, t1]``; default 101 equispaced points.
        rescaled: integrate the single-example rescaled flow.
        loss: ``"logistic"``, ``"exponential"`` or ``"squared"`` (real targets: a
            ``Dataset(..., regression=True)``; not with ``rescaled`` nor the exact ℓ∞ sign).
        options: a :class:`SolverOptions`: backend (``"diffrax"``, the default here;
            ``"scipy"``, the independent reference; ``"numba"``, the CPU engine of
            :func:`flows.solve_many`), solver, tolerances, step budget, event thresholds,
            dense output. Default: its defaults.
        overrides: fields of :class:`SolverOptions` as keywords (``backend="scipy"``,
            ``rtol=1e-10``, ``max_steps=...``, ``loss_tol=...``, ``dense=True``, ...), applied
            to ``options``; a name that is not a field is refused (``ValueError``).

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
    release_compiled_when_crowded()
    loss = check_problem(method, data, loss, rescaled)
    theta0 = check_theta(theta0, data)
    t1 = check_scalar("t1", t1, positive=True)
    ts = check_ts(ts, t1)
    options = solver_options(options, overrides)
    _check_schedule(method, t1, rescaled)
    check_dense_size(options, method, theta0, rescaled)
    if options.backend != "diffrax" and is_traced((method, data, theta0, ts, t1)):
        raise ValueError(
            f"backend={options.backend!r} cannot run under jax.jit/vmap; use backend='diffrax'."
        )
    traj = integrate(
        method, data, theta0, t1=t1, ts=ts, rescaled=rescaled, loss=loss, options=options
    )
    if not is_traced(traj.ambiguous) and bool(np.any(np.asarray(traj.ambiguous))):
        warnings.warn(
            "ℓ∞-SAM: the Filippov selection is ambiguous on this run (a coordinate whose "
            "layers died at different times, where the discrete iterates have no η → 0 "
            "limit, or more sign-dependent sliding coordinates than are enumerated); the "
            "flow keeps the in-phase selection. See Trajectory.ambiguous.",
            stacklevel=2,
        )
    if not is_traced(traj.status) and np.any(np.asarray(traj.status) == Status.SIGMA_NEGATIVE):
        warnings.warn(
            f"LE-SAM: the schedule sigma(t) < 0 at t = {float(traj.t_real_end):.10g} (real "
            "time): the rule has no budget there, and the run stopped at that time with status "
            "'sigma_negative'.",
            stacklevel=2,
        )
    return traj


def integrate(method, data, theta0, *, t1, ts, rescaled, loss, options) -> Trajectory:
    r"""The run of :func:`solve` from validated inputs, unchecked (traceable).

    Integrates the same flow with the same events and returns the same :class:`Trajectory`,
    bit for bit; it is what :func:`solve` calls once its checks pass, and what code that has
    already validated its inputs at its own public edge calls inside a compiled loop (the
    analysis's runs, pass after pass). Nothing is checked here; in particular neither the
    schedule's values nor the size of a dense output (:func:`check_dense_size`), and nothing
    warns: a concrete caller reads ``traj.ambiguous`` and ``traj.status`` itself.

    Arguments:
        method: a flows method.
        data: a :class:`Dataset` (one example if ``rescaled``).
        theta0: float64 array ``(L, d)``, finite.
        t1: final time, > 0 (a float64 scalar, traced or not).
        ts: saving times in ``[0, t1]``, non-decreasing; None: 101 equispaced points.
        rescaled: integrate the single-example rescaled flow.
        loss: ``"logistic"``, ``"exponential"`` or ``"squared"``.
        options: a built :class:`SolverOptions`; ``backend="numba"`` needs concrete inputs.
    """
    if ts is None:
        ts = default_ts(t1)
    if options.backend == "numba":
        theta0, ts = np.asarray(theta0)[None], np.asarray(ts)
        many = run_numba(method, data, theta0, ts, float(t1), rescaled, loss, {}, options, None)
        return jax.tree.map(lambda a: a[0], many)
    driver = _backend(options.backend)
    clock = options.clock(method, rescaled)
    if options.backend == "diffrax":
        options = options.dynamic()  # a new tolerance does not compile the solver again
    with cacheable_checks():  # the inputs are checked: the solver's executable can be cached
        if _is_filippov(method):
            sys = system(method, data, loss, rescaled, theta0.shape, clock)
            traj = driver.solve_filippov(sys, theta0, ts, t1, options)
        else:
            field = Field(method, data, loss, rescaled, clock)
            traj = driver.solve_smooth(field, theta0, ts, t1, options)
    return _stopped_at_start(traj, theta0, *_start_stop(method, theta0, data, loss, options))


def _start_stop(method, theta0, data, loss, options):
    r"""``(stopped, status)`` of a run that must stop at its start, or ``(None, None)``.

    * ``sigma_negative``: a schedule with :math:`\sigma(0)<0` (the time the rule reads at
      the start is 0; a continued run's schedule is shifted, :meth:`flows.LESAM.started_at`).
      Its event fires only where σ crosses 0 during the run.
    * ``converged``: :math:`\mathcal L(\theta_0)\le` ``loss_tol``. The loss event fires where
      the loss crosses ``loss_tol`` downwards, which a run that starts below it never does.
    """
    stops = []
    if method.time_dependent:
        stops.append((method.schedule_margin(0.0) <= 0, Status.SIGMA_NEGATIVE))
    if options.loss_tol is not None:
        stops.append((objective(theta0, data, loss) <= options.loss_tol, Status.CONVERGED))
    if not stops:
        return None, None
    stopped, status = stops[-1][0], jnp.asarray(stops[-1][1])
    for flag, code in reversed(stops[:-1]):  # the first one listed wins
        stopped, status = stopped | flag, jnp.where(flag, code, status)
    return stopped, status


def _stopped_at_start(traj: Trajectory, theta0, at_start, status) -> Trajectory:
    r"""The run of a start that must stop at once (:func:`_start_stop`): ``status`` at 0.

    Such a run stopped at once: ``t_end = t_real_end = 0``, ``theta_end = θ₀``, no steps, no
    saved state after 0 and a dense output reduced to the point 0. Applied as a selection,
    so that it holds under ``jax.jit``/``jax.vmap`` too.
    """
    if at_start is None or (not is_traced(at_start) and not bool(at_start)):
        return traj
    kept = ~at_start | (traj.ts <= 0.0)  # saved times the run reached

    def pick(stopped, ran):
        return jnp.where(at_start, jnp.asarray(stopped, dtype=jnp.result_type(ran)), ran)

    def mask(x):
        return jnp.where(kept.reshape(kept.shape + (1,) * (x.ndim - 1)), x, jnp.nan)

    zero = jnp.zeros((), jnp.float64)
    out = eqx.tree_at(
        lambda t: (t.thetas, t.beta, t.loss, t.t_real, t.status, t.t_end, t.theta_end),
        traj,
        (
            mask(traj.thetas), mask(traj.beta), mask(traj.loss), mask(traj.t_real),
            pick(status, traj.status), pick(zero, traj.t_end),
            pick(theta0, traj.theta_end),
        ),
    )  # fmt: skip
    out = eqx.tree_at(
        lambda t: (t.t_real_end, t.n_steps, t.n_rejected, t.n_switches, t.t_sliding, t.ambiguous),
        out,
        (
            pick(zero, traj.t_real_end), pick(0, traj.n_steps), pick(0, traj.n_rejected),
            pick(0, traj.n_switches), pick(zero, traj.t_sliding), pick(False, traj.ambiguous),
        ),
    )  # fmt: skip
    if traj.interpolation is not None:
        dense = traj.interpolation
        out = eqx.tree_at(
            lambda t: (t.interpolation.size, t.interpolation.s_end),
            out,
            (pick(0, dense.size), pick(zero, dense.s_end)),
        )
    return out


#: Times at which a schedule σ(t) is checked before a run, spread over [0, t1].
SCHEDULE_CHECKS = 1025


def _check_schedule(method, t1, rescaled=False):
    r"""An LE-SAM schedule σ(t) must give a number >= 0 (finite at the ends) before a run.

    (That it can be traced is checked where it is given, :func:`flows._methods.check_schedule`.)
    It is evaluated under ``jax.vmap`` on :data:`SCHEDULE_CHECKS` times spread over
    :math:`[0, t_1]` (the real clock of a plain run; for a rescaled run, whose real time is
    not known in advance, the same values of the clock): a schedule negative at one of them
    is refused naming ``sigma``, and so is one that is not finite at 0 or :math:`t_1`.
    Between and beyond these times the run itself stops where σ falls below 0 (status
    ``sigma_negative``, located by its event; :meth:`flows.LESAM.schedule_margin`).
    """
    if not isinstance(method, LESAM) or not callable(method.sigma) or is_traced((method.sigma, t1)):
        return
    del rescaled  # the same times: see the docstring
    times = np.linspace(0.0, float(t1), SCHEDULE_CHECKS)
    values = np.asarray(jax.vmap(method.sigma)(jnp.asarray(times)), dtype=float)
    for i in (0, -1):
        if not np.isfinite(values[i]):
            raise ValueError(
                f"`sigma` must return a finite number >= 0 at every time; "
                f"sigma({times[i]:g}) = {values[i]!r}."
            )
    negative = np.flatnonzero(values < 0)
    if negative.size:
        i = negative[0]
        raise ValueError(
            f"`sigma` must return a finite number >= 0 at every time; sigma({times[i]:g}) = "
            f"{values[i]:g} < 0 (checked at {SCHEDULE_CHECKS} times in [0, {float(t1):g}])."
        )


def _memory_bytes() -> int:
    """The memory of the default device (an accelerator's limit, else the host's RAM)."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_dense_size(options, method, theta0, rescaled: bool) -> None:
    """Refuse a dense output larger than the device's memory, before allocating it.

    Applies to a diffrax run with ``dense=True`` (else it returns). The dense output holds
    each step's interpolant for up to ``max_steps`` steps (``2 max_steps`` for the joined
    segments of a Filippov run); the bytes of one step are read from one step of the solver
    on the run's state (θ, and the clock of a rescaled run).
    """
    if not (options.dense and options.backend == "diffrax"):
        return
    n_state = jnp.size(theta0) + rescaled
    filippov = _is_filippov(method)
    solver = options.solver
    y0 = jnp.zeros(n_state)
    term = diffrax.ODETerm(lambda t, y, args: -y)

    def one_step():
        state = solver.init(term, 0.0, 1.0, y0, None)
        return solver.step(term, 0.0, 1.0, y0, None, state, False)[2]

    info = jax.eval_shape(one_step)
    per_step = 16 + sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(info))
    need = (2 if filippov else 1) * options.max_steps * per_step
    have = _memory_bytes()
    if need > have:
        raise ValueError(
            f"`max_steps` = {options.max_steps} with `dense=True` needs about {need / 1e9:.3g} GB "
            f"for the dense output ({per_step} bytes a step), more than the {have / 1e9:.3g} GB "
            "of this device; lower `max_steps` or solve without `dense`."
        )


def _is_filippov(method) -> bool:
    """ℓ∞-SAM with the exact sign is integrated as a Filippov system (docs/theory.md §7).

    A concrete ``rho == 0`` is GD (a continuous field) and takes the smooth path, so
    that ``LinfSAM(0)`` and ``GD()`` agree exactly.
    """
    if not isinstance(method, LinfSAM) or method.delta is not None:
        return False
    return is_traced(method.rho) or float(method.rho) != 0.0
