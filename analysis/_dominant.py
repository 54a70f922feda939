r"""Dominant index :math:`j^\dagger(t)=\arg\max_j\lvert\beta_j(t)\rvert` and its switch times.

Tie rule (docs/theory.md §13). With a uniform :math:`\alpha` every :math:`\lvert\beta_j(0)\rvert`
is the same, so :math:`j^\dagger(0)` is defined as the right limit
:math:`\lim_{t\downarrow0}j^\dagger(t)`: among the tied indices, the one whose
:math:`\lvert\beta_j\rvert` grows fastest (largest :math:`d\log\lvert\beta_j\rvert/dt`),
and the lowest index if that ties too. On a saving grid (:func:`dominant_index`)
the right limit is read at the next saved time without a tie.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import SAMPLES_PER_STEP, as_array, tie_margin

from ._inputs import check_count, check_trajectory
from ._problem import Problem
from ._xp import namespace


def _tied_argmax(values, tie_rtol):
    """Per row: argmax, and a mask of rows where the maximum is attained more than once."""
    top = np.max(values, axis=-1, keepdims=True)
    tied = np.sum(values >= top - tie_rtol * np.abs(top), axis=-1) > 1
    return np.argmax(values, axis=-1), tied


def dominant_index(traj: flows.Trajectory, *, tie_rtol: float = 0.0) -> np.ndarray:
    r""":math:`j^\dagger(t_k)=\arg\max_j\lvert\beta_j(t_k)\rvert` at every saved time :math:`t_k`.

    A saved time where the maximum is attained by several indices (within
    ``tie_rtol`` relative, exactly by default; e.g. :math:`t=0` with a uniform
    :math:`\alpha`) takes the value at the next saved time without a tie (the right
    limit, as resolved by the saving grid); if there is none, the lowest tied
    index. Times the run never reached get ``-1``.

    Arguments:
        traj: a :class:`flows.Trajectory`.
        tie_rtol: relative tolerance for calling two values of :math:`\lvert\beta_j\rvert` tied.

    Returns:
        int array of shape ``(T,)``.

    >>> import flows, analysis
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0, 2.0]),
    ...                    flows.balanced_init(0.5, 2, 2), t1=1.0, rescaled=True, ts=[0.0, 0.5])
    >>> analysis.dominant_index(traj).tolist()  # tie at t = 0 resolved to the right
    [1, 1]
    """
    traj = check_trajectory(traj)
    if (
        isinstance(tie_rtol, bool)
        or not isinstance(tie_rtol, (int, float))
        or not 0 <= tie_rtol < 1
    ):
        raise ValueError(f"`tie_rtol` must be a number >= 0; got {tie_rtol!r}.")
    reached = np.asarray(traj.reached) & np.all(np.isfinite(np.asarray(traj.beta)), axis=-1)
    j, tied = _tied_argmax(np.abs(np.asarray(traj.beta)), tie_rtol)
    out = np.where(reached, j, -1)
    # Right limit: walk backwards, copying the next untied value into tied entries.
    nxt = -1
    for k in range(out.shape[0] - 1, -1, -1):
        if not reached[k]:
            continue
        if tied[k] and nxt >= 0:
            out[k] = nxt
        elif not tied[k]:
            nxt = out[k]
    return out


def fastest_growing_index(traj: flows.Trajectory, problem: Problem) -> np.ndarray:
    r"""Fastest-growing coordinate :math:`\arg\max_j d\log\lvert\beta_j\rvert/dt` at saved times.

    This is the variant of the dominant index that reads the velocity instead of
    the size: :math:`r_j=\sum_l\dot w^{(l)}_j/w^{(l)}_j` from the vector field of
    ``problem`` (:meth:`Problem.rates`). At :math:`t=0` with a uniform
    :math:`\alpha` it equals the right limit of :func:`dominant_index`. Unreached
    times get ``-1``.

    Arguments:
        traj: a trajectory solved from ``problem``.
        problem: the :class:`Problem` (its method, data, loss and clock).

    >>> import flows, analysis
    >>> p = analysis.Problem(flows.L2SAM(1.0), flows.single_example([1.0, 2.0, 3.0]),
    ...                      flows.balanced_init(0.6, 2, 3), t1=0.5, rescaled=True)
    >>> analysis.fastest_growing_index(p.solve(ts=[0.0]), p).tolist()
    [1]
    """
    traj = check_trajectory(traj)
    if not isinstance(problem, Problem):
        raise ValueError(f"`problem` must be an analysis.Problem; got {type(problem).__name__}.")
    thetas = np.asarray(traj.thetas)
    if thetas.shape[1:] != tuple(problem.theta0.shape):
        raise ValueError(
            f"`traj` has states of shape {thetas.shape[1:]}; `problem` has "
            f"{tuple(problem.theta0.shape)}."
        )
    reached = np.asarray(traj.reached) & np.all(np.isfinite(thetas), axis=(-2, -1))
    out = np.full(thetas.shape[0], -1)
    for k in np.flatnonzero(reached):
        out[k] = int(np.argmax(problem.rates(thetas[k], float(traj.ts[k]))))
    return out


class Switches(NamedTuple):
    """Result of :func:`switch_times`: at ``times[k]``, j† goes ``before[k] -> after[k]``."""

    times: np.ndarray  # (K,)
    before: np.ndarray  # (K,)
    after: np.ndarray  # (K,)
    initial: int  # j†(0), by the tie rule
    final: int  # j†(t_end)
    t_end: float

    @property
    def sequence(self) -> list:
        """The visited indices in order: ``[initial, after[0], after[1], ...]``."""
        return [self.initial, *map(int, self.after)]


def log_abs_beta(theta):
    r""":math:`\log|\beta_j|=\sum_l\log|w^{(l)}_j|` of ``theta`` (..., L, d), traceable.

    The size that :math:`j^\dagger` compares: a sum of logs keeps the order where the product
    :math:`\beta_j` would under- or overflow.
    """
    theta = as_array("theta", theta, "an (..., L, d) array of real numbers")
    if theta.ndim < 2:
        raise ValueError(f"`theta` must have shape (..., L, d); got shape {theta.shape}.")
    return log_size(theta)


def log_size(theta):
    """:func:`log_abs_beta` of a validated ``theta`` (..., L, d), in its namespace
    (:mod:`analysis._xp`: NumPy for a NumPy array, eagerly)."""
    xp = namespace(theta)
    with np.errstate(divide="ignore"):  # log 0 = -inf where β_j = 0, silently (as in JAX)
        return xp.sum(xp.log(xp.abs(theta)), axis=-2)


def dominant_at(theta):
    r""":math:`j^\dagger(\theta)=\arg\max_j\lvert\beta_j(\theta)\rvert` of ``theta`` (..., L, d),
    traceable: the lowest index on an exact tie.

    Compared as :func:`log_abs_beta`, so the order holds where :math:`\beta_j` would under- or
    overflow. On a trajectory, :func:`dominant_index` and :func:`switch_times` refine the ties
    (a uniform start) by the right limit.

    >>> import analysis, numpy as np
    >>> # β = (1e-200·1e-200, 1e-150·1e-240, 1e-300·1e-80): all underflow; log|β| = -400, -390, -380
    >>> theta = np.array([[1e-200, 1e-150, 1e-300], [1e-200, 1e-240, 1e-80]])
    >>> int(analysis.dominant_at(theta)), int(analysis.dominant_at(np.ones((2, 3))))
    (2, 0)
    """
    size = log_abs_beta(theta)
    if size.shape[-1] == 0:
        raise ValueError(f"`theta` must have d >= 1 features; got shape {np.shape(theta)}.")
    return jnp.argmax(size, axis=-1)


def initial_index(theta0, rates0):
    r""":math:`j^\dagger(0)` by the tie rule (module docstring), of each start ``theta0``
    (..., L, d) with its rates ``rates0`` (..., d); traceable, and eager NumPy on NumPy arrays.

    The largest :math:`|\beta_j|`; among ties, the largest log-growth rate ``rates0`` (the right
    limit :math:`\lim_{t\downarrow0}j^\dagger(t)`), then the lowest index.
    """
    xp = namespace(theta0, rates0)
    size = log_size(theta0)
    top = size == xp.max(size, axis=-1, keepdims=True)
    return xp.argmax(xp.where(top, rates0, -xp.inf), axis=-1)


@jax.jit
def _log_abs_beta(interpolation, t):
    return log_abs_beta(interpolation.evaluate(t))


@jax.jit
def _log_abs_beta_many(interpolation, ts):
    return jax.vmap(lambda t: log_abs_beta(interpolation.evaluate(t)))(ts)


@jax.jit
def _interp_rates(interpolation, t):
    return jnp.sum(interpolation.derivative(t) / interpolation.evaluate(t), axis=0)


def switch_times(
    traj_or_problem, *, samples_per_step: int = SAMPLES_PER_STEP, max_depth: int = 60
) -> Switches:
    r"""Times where :math:`j^\dagger(t)=\arg\max_j\lvert\beta_j(t)\rvert` changes, by root finding.

    :math:`h(t)=\log\lvert\beta_b(t)\rvert-\log\lvert\beta_a(t)\rvert` is sampled on the
    solver's own steps (``samples_per_step`` points per accepted step of the
    dense output) and every change :math:`a\to b` between two samples is located by
    Brent's method on the dense interpolant (``xtol`` :math:`10^{-13}t_{end}`), so
    the times are as accurate as the solver. If another index overtakes both at the
    root, the bracket is split and each half is searched again. :math:`j^\dagger(0)`
    follows the tie rule of this module; a switch closer to :math:`t=0` than
    :math:`2^{-60}` times the first step (e.g. at the edge of a tie) is reported
    at that time.

    Arguments:
        traj_or_problem: a :class:`flows.Trajectory` solved with ``dense=True``
            (its interpolant also gives the initial rates), or a :class:`Problem`
            (solved here with ``dense=True``; its vector field gives the initial rates).
        samples_per_step: samples per solver step (>= 1).
        max_depth: maximum number of bracket splits.

    Returns:
        :class:`Switches` ``(times, before, after, initial, final, t_end)``.

    >>> import flows, analysis, numpy as np
    >>> # GD, L = 2: β_j = α_j² e^{2μ_j τ}; 1 overtakes 0 at τ = ln(α_0/α_1) / (μ_1 − μ_0)
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0, 2.0]), flows.balanced_init(
    ...     np.array([1.0, 0.5]), 2), t1=2.0, rescaled=True, dense=True)
    >>> s = analysis.switch_times(traj)
    >>> s.sequence, bool(abs(s.times[0] - np.log(2.0)) < 1e-8)
    ([0, 1], True)
    """
    samples_per_step = check_count("samples_per_step", samples_per_step, 1)
    max_depth = check_count("max_depth", max_depth, 0)
    problem = None
    if isinstance(traj_or_problem, Problem):
        problem = traj_or_problem
        traj = problem.solve()
    elif isinstance(traj_or_problem, flows.Trajectory):
        traj = check_trajectory(traj_or_problem)
    else:
        raise ValueError(
            "`traj_or_problem` must be a flows.Trajectory (solved with dense=True) "
            f"or an analysis.Problem; got {type(traj_or_problem).__name__}."
        )
    if traj.interpolation is None:
        raise ValueError(
            "`traj_or_problem`: switch times need the dense output; solve with "
            "flows.solve(..., dense=True) (diffrax backend) or pass a Problem."
        )
    theta0 = np.asarray(traj.interpolation.evaluate(0.0))
    rates0 = (
        problem.rates(theta0)
        if problem is not None
        else np.asarray(_interp_rates(traj.interpolation, 0.0))
    )
    return _switches(traj, rates0, samples_per_step, max_depth)


def _switches(traj, rates0, samples_per_step=SAMPLES_PER_STEP, max_depth=60) -> Switches:
    """:func:`switch_times` on a dense trajectory, given the log-growth rates at t = 0."""
    interp = traj.interpolation
    t_end = float(traj.t_end)
    theta0 = np.asarray(interp.evaluate(0.0))
    logb = lambda t: np.asarray(_log_abs_beta(interp, t))  # noqa: E731
    initial = int(initial_index(theta0, rates0))
    if t_end <= 0:
        return Switches(np.zeros(0), np.zeros(0, int), np.zeros(0, int), initial, initial, t_end)
    nodes = np.asarray(interp.ts)
    nodes = np.unique(np.append(nodes[np.isfinite(nodes) & (nodes < t_end)], t_end))
    frac = np.arange(samples_per_step) / samples_per_step
    grid = np.unique(np.append((nodes[:-1, None] + np.diff(nodes)[:, None] * frac).ravel(), t_end))
    values = np.asarray(_log_abs_beta_many(interp, jnp.asarray(grid)))
    js = _leaders(values, initial)
    found = []
    for k in np.flatnonzero(js[1:] != js[:-1]):
        _locate(logb, grid[k], js[k], grid[k + 1], js[k + 1], t_end, max_depth, found)
    times = np.array([t for t, _, _ in found])
    before = np.array([a for _, a, _ in found], dtype=int)
    after = np.array([b for _, _, b in found], dtype=int)
    return Switches(times, before, after, initial, int(js[-1]), t_end)


def _leaders(values, initial: int) -> np.ndarray:
    r"""j† at each sample (rows of ``values`` = log|β|), starting from ``initial``.

    The leader changes only where another index exceeds it by more than the rounding
    of :math:`\log\lvert\beta\rvert` (:func:`flows.internal.tie_margin`): near a tie (the uniform
    start, where the gaps grow from 0 as :math:`\lambda^{L-2}\tau` on the scale twin
    :math:`\lambda`) rounding alone would read switches back and forth. A genuine
    change exceeds the margin within a few samples and is then located at the
    crossing itself (:func:`_locate`), so the margin moves no switch time.
    """
    plain = np.argmax(values, axis=-1)
    js = np.empty_like(plain)
    js[0] = lead = initial
    k, n = 1, plain.size
    while k < n:
        rest = np.flatnonzero(plain[k:] != lead)
        if rest.size == 0:
            js[k:] = lead
            break
        r = k + rest[0]
        js[k:r] = lead
        row = values[r]
        if row[plain[r]] - row[lead] > tie_margin(row[lead]):
            lead = plain[r]
        js[r] = lead
        k = r + 1
    return js


def _locate(logb, t_lo, a, t_hi, b, t_end, depth, found):
    """Append the switch(es) a -> ... -> b inside [t_lo, t_hi] to ``found`` (recursive)."""
    h = lambda t: logb(t)[b] - logb(t)[a]  # noqa: E731
    lo = t_lo
    if h(lo) >= 0:  # a tie at t_lo (t = 0): find a time where a still leads
        lo = next(
            (
                t_lo + (t_hi - t_lo) * 2.0**-k
                for k in range(1, 61)
                if h(t_lo + (t_hi - t_lo) * 2.0**-k) < 0
            ),
            None,
        )
        if lo is None:
            found.append((t_lo + (t_hi - t_lo) * 2.0**-60, a, b))
            return
    if h(t_hi) <= 0:  # cannot happen for a genuine a -> b change; be safe
        found.append((t_hi, a, b))
        return
    import scipy.optimize  # here: its import costs a fresh process about a second

    root = scipy.optimize.brentq(h, lo, t_hi, xtol=1e-13 * t_end, rtol=4 * np.finfo(float).eps)
    values = logb(root)
    others = np.delete(values, [a, b])
    if depth > 0 and others.size and np.max(others) > values[a]:
        mid = 0.5 * (t_lo + t_hi)
        c = int(np.argmax(logb(mid)))
        for (s, p), (e, q) in (((t_lo, a), (mid, c)), ((mid, c), (t_hi, b))):
            if p != q:
                _locate(logb, s, p, e, q, t_end, depth - 1, found)
        return
    found.append((root, a, b))
