r"""The norm clock :math:`s`: the same path as the rescaled flow, with the blow-up sent to infinity.

On the rescaled clock :math:`\tau` the flow at depth :math:`L\ge3` blows up in finite time, and
the last switches of :math:`j^\dagger` crowd into :math:`\tau^*-\tau\to0`. The clock change
(docs/theory.md §5)

.. math::
    \frac{ds}{d\tau}=\Big(\frac{\lVert\theta(\tau)\rVert}{\lVert\theta(0)\rVert}\Big)^{L-2},
    \qquad s(0)=0,

keeps the path and turns the polynomial blow-up into exponential growth: near
:math:`\tau^*`, :math:`\lVert\theta\rVert^{L-2}\propto1/(\tau^*-\tau)`, so
:math:`s\sim\log\frac1{\tau^*-\tau}\to\infty`. At :math:`L=2` it is :math:`\tau` itself; early
on (:math:`\lVert\theta\rVert\approx\lVert\theta(0)\rVert`) :math:`s\approx\tau` at every depth.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import WrongTypeError, check_scalar, is_traced

from ._inputs import check_count, check_positive


class Clock(NamedTuple):
    """Result of :func:`norm_clock`: ``s[k]`` is the norm clock at ``tau[k]``, θ there."""

    tau: jax.Array  # (n,) rescaled times in [0, t_end], increasing
    s: jax.Array  # (n,) the norm clock at tau, increasing, s[0] = 0
    thetas: jax.Array  # (n, L, d) θ(tau) from the dense output

    def tau_at(self, s):
        """τ at the clock values ``s``: linear interpolation of the increasing pairs (s, τ),
        traceable; held at the ends outside ``[0, s[-1]]``."""
        return jnp.interp(s, self.s, self.tau)

    def s_at(self, tau):
        """The clock at the times ``tau``: the inverse of :meth:`tau_at` on the same pairs."""
        return jnp.interp(tau, self.tau, self.s)


def _log_norm(theta):
    """log ‖θ‖ (all layers), without squaring: no under- or overflow (as flows' norms)."""
    big = jnp.max(jnp.abs(theta), axis=(-2, -1))
    safe = jnp.where(big > 0, big, 1.0)
    scaled = theta / safe[..., None, None]
    return jnp.log(safe) + 0.5 * jnp.log(jnp.sum(scaled**2, axis=(-2, -1)))


def clock_grid(t_end, n: int, first: float = 1e-7):
    r"""The τ grid of :func:`norm_clock`: :math:`n` points on :math:`[0,t_{end}]`.

    0, then ``n // 2 - 1`` points geometric in :math:`\tau` from ``first`` :math:`t_{end}` to
    :math:`t_{end}/2` (early switches are fast), then ``n - n // 2`` points geometric in
    :math:`t_{end}-\tau` from :math:`t_{end}/2` down to :math:`10^{-15}t_{end}` (the blow-up),
    ending at :math:`t_{end}`. Traceable in ``t_end``.
    """
    if not is_traced(t_end):
        check_scalar("t_end", t_end, positive=True)
    n = check_count("n", n, minimum=4)
    first = check_positive("first", first, upper=0.5)
    n_a = n // 2
    early = np.concatenate([[0.0], np.geomspace(first, 0.5, n_a - 1)])
    late = 1.0 - np.concatenate([np.geomspace(0.5, 1e-15, n - n_a - 1), [0.0]])
    return t_end * jnp.asarray(np.concatenate([early, late]))


def norm_clock(traj: flows.Trajectory, *, n: int = 2048, first: float = 1e-7) -> Clock:
    r"""The norm clock :math:`s(\tau)=\int_0^\tau(\lVert\theta\rVert/\lVert\theta(0)\rVert)^{L-2}`
    along a dense trajectory, on the grid :func:`clock_grid` (traceable: jit and vmap).

    θ is read from the dense output at the grid points and the integral is the trapezoid rule on
    them. The grid is geometric in :math:`\tau` early and in :math:`t_{end}-\tau` late, so that
    the integrand, :math:`\propto1/(\tau^*-\tau)` near a blow-up at :math:`L\ge3`, is smooth on
    it: the error is :math:`O(h^2)` in the log-step :math:`h` of the grid (relative
    :math:`\sim10^{-4}` at the default ``n``), and 0 at :math:`L=2`, where :math:`s=\tau`.
    The trajectory's own clock must be τ (``flows.solve(..., rescaled=True, dense=True)``); the
    depth is read from the shape of θ.

    Arguments:
        traj: one :class:`flows.Trajectory` solved with ``dense=True``.
        n: grid points (>= 4).
        first: the first positive grid point, as a fraction of :math:`t_{end}`, in (0, 0.5).

    Returns:
        :class:`Clock` ``(tau, s, thetas)``, each with ``n`` entries.

    >>> import flows, analysis, numpy as np
    >>> # GD, L = 3, d = 1: w = α / (1 − αμτ), so s = −log(1 − αμτ) / (αμ)
    >>> traj = flows.solve(flows.GD(), flows.single_example([2.0]), flows.balanced_init(0.5, 3, 1),
    ...                    t1=2.0, rescaled=True, dense=True, escape_tol=1e3)
    >>> c = analysis.norm_clock(traj)
    >>> # αμ = 1: the run stops at ‖θ‖ = 1000 ‖θ(0)‖, i.e. 1 − τ = 1/1000, so s = log 1000 exactly
    >>> exact = np.log(1000.0) / (0.5 * 2.0)
    >>> bool(abs(float(c.s[-1]) / exact - 1) < 3e-4)  # the trapezoid's ~1e-4 relative error
    True
    """
    if not isinstance(traj, flows.Trajectory):
        raise WrongTypeError(f"`traj` must be a flows.Trajectory; got {type(traj).__name__}.")
    if traj.interpolation is None:
        raise ValueError(
            "`traj` must carry its dense output: solve with flows.solve(..., rescaled=True, "
            "dense=True) (diffrax backend)."
        )
    if jnp.ndim(traj.t_end) != 0:
        raise ValueError("`traj` must be a single trajectory, not a vmapped batch; index it first.")
    n = check_count("n", n, 4)
    if isinstance(first, bool) or not isinstance(first, (int, float)) or not 0 < first < 0.5:
        raise ValueError(f"`first` must be a number in (0, 0.5); got {first!r}.")
    tau = clock_grid(traj.t_end, n, first)
    thetas = jax.vmap(traj.evaluate)(tau)
    depth = thetas.shape[-2]
    log_ratio = _log_norm(thetas) - _log_norm(thetas[0])
    rate = jnp.exp((depth - 2) * log_ratio)
    steps = 0.5 * (rate[1:] + rate[:-1]) * jnp.diff(tau)
    s = jnp.concatenate([jnp.zeros(1, tau.dtype), jnp.cumsum(steps)])
    return Clock(tau, s, thetas)
