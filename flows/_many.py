r"""Many trajectories of one method at once: :func:`solve_many`."""

import jax
import jax.numpy as jnp
import numpy as np

from . import _rules
from ._config import release_compiled_when_crowded
from ._methods import AbstractMethod
from ._numba import run_numba
from ._options import SolverOptions
from ._problem import Dataset
from ._solve import check_problem, check_ts, solve
from ._trajectory import Trajectory
from ._validate import MAX_WORKERS, as_array, check_int, check_scalar


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
            default: one per core this process may run on, its CPU affinity mask).

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


def _diffrax(method, data, theta0, ts, t1, rescaled, loss, values, options):
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

