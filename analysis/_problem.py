r"""A problem to solve (method, data, start, solver options), kept so that it can be re-solved,
and the log-growth rates of its field.

A :class:`Problem` is what :func:`analysis.switch_times` and the regime
functions need beyond a finished trajectory: the vector field, to read off the
log-growth rates

.. math::
    r_j(\theta)=\frac{d}{dt}\log\lvert\beta_j\rvert=\sum_{l=1}^L\frac{\dot w^{(l)}_j}{w^{(l)}_j},

and the solve itself (always through :func:`flows.solve`; nothing here integrates).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import check_data, check_loss, check_scalar, check_theta
from flows.internal import check_method as _check_flows_method

from ._xp import namespace


@dataclasses.dataclass(frozen=True)
class Problem:
    r"""An initial-value problem of :func:`flows.solve`, kept so that it can be re-solved.

    It holds everything :func:`flows.solve` takes: the method, the data, the start
    :math:`\theta_0`, the final time ``t1``, the flow (``rescaled``), the ``loss`` and the
    :class:`flows.SolverOptions`. :meth:`solve` calls :func:`flows.solve` with
    ``dense=True``; :meth:`rates` evaluates the log-growth rates
    :math:`r_j=\sum_l\dot w^{(l)}_j/w^{(l)}_j` from the same vector field
    (:func:`flows.velocity`, or :func:`flows.rescaled_velocity` when
    ``rescaled=True``), :math:`-\infty` where :math:`\beta_j=0`.

    Arguments:
        method: a flows method.
        data: a :class:`flows.Dataset`.
        theta0: start, shape ``(L, d)``.
        t1: final time (> 0; a value of τ when ``rescaled``).
        rescaled: the single-example rescaled flow (default False).
        loss: ``"logistic"`` (default) or ``"exponential"``.
        options: a :class:`flows.SolverOptions` (default: its defaults).

    >>> import flows, analysis
    >>> p = analysis.Problem(flows.GD(), flows.single_example([1.0, 2.0]),
    ...                      flows.balanced_init(0.5, 2, 2), t1=1.0, rescaled=True)
    >>> p.rates(p.theta0).tolist()  # GD, L = 2: d log β_j / dτ = 2 μ_j
    [2.0, 4.0]
    """

    method: flows.AbstractMethod
    data: flows.Dataset
    theta0: jax.Array
    t1: float
    rescaled: bool = False
    loss: str = "logistic"
    options: flows.SolverOptions = dataclasses.field(default_factory=flows.SolverOptions)

    def __post_init__(self):
        _check_flows_method(self.method)
        check_data(self.data)
        object.__setattr__(self, "theta0", check_theta(self.theta0, self.data))
        object.__setattr__(self, "t1", check_scalar("t1", self.t1, positive=True))
        object.__setattr__(self, "loss", check_loss(self.loss))
        if not isinstance(self.rescaled, (bool, np.bool_)):
            raise ValueError(f"`rescaled` must be True or False; got {self.rescaled!r}.")
        object.__setattr__(self, "rescaled", bool(self.rescaled))
        if not isinstance(self.options, flows.SolverOptions):
            raise ValueError(
                f"`options` must be a flows.SolverOptions; got {type(self.options).__name__}."
            )

    def solve(self, **overrides) -> flows.Trajectory:
        """:func:`flows.solve` of the problem with ``dense=True`` and ``overrides`` (its
        keywords ``ts`` and the fields of :class:`flows.SolverOptions`)."""
        return flows.solve(
            self.method, self.data, self.theta0, t1=self.t1, rescaled=self.rescaled,
            loss=self.loss, options=self.options, **{"dense": True, **overrides},
        )  # fmt: skip

    def rates(self, theta, t=0.0) -> np.ndarray:
        r"""Log-growth rates :math:`d\log\lvert\beta_j\rvert/dt` at ``theta`` (shape ``(d,)``)
        and time ``t`` (one compiled program for every ``t``: it is an array argument)."""
        theta, t = jnp.asarray(theta), jnp.asarray(t, dtype=jnp.float64)
        return np.asarray(_rates(self.method, self.data, self.loss, self.rescaled, theta, t))

    def restart(self, theta0, *, method=None, t1=None, **overrides) -> "Problem":
        """The same problem started from ``theta0``: the method replaced by ``method`` if given
        (e.g. a schedule continued at a later time), the final time by ``t1``, and the fields
        of its :class:`flows.SolverOptions` named in ``overrides``."""
        return dataclasses.replace(
            self,
            theta0=theta0,
            method=self.method if method is None else method,
            t1=self.t1 if t1 is None else t1,
            options=self.options.replace(**overrides) if overrides else self.options,
        )


def log_growth_rates(method, data, loss, rescaled, theta, t=0.0):
    r"""Traceable :math:`r_j=\sum_l v_{lj}/\theta_{lj}`, :math:`-\infty` where :math:`\beta_j=0`
    (:func:`growth_rates` of the velocity :math:`v` of :func:`flows.velocity` or
    :func:`flows.rescaled_velocity`)."""
    v = (flows.rescaled_velocity if rescaled else flows.velocity)(method, data, loss, theta, t)
    return growth_rates(v, theta)


def growth_rates(v, theta):
    r""":math:`d\log|\beta_j|/dt=\sum_l v_{lj}/\theta_{lj}` of each state ``theta`` (..., L, d)
    with its velocity ``v`` (same shape), :math:`-\infty` where :math:`\beta_j=0`; traceable,
    and eager NumPy on NumPy arrays (:mod:`analysis._xp`)."""
    xp = namespace(v, theta)
    dead = xp.any(theta == 0, axis=-2)
    safe = xp.where(theta == 0, 1.0, theta)
    return xp.where(dead, -xp.inf, xp.sum(v / safe, axis=-2))


# filter_jit: a schedule σ(t) in the method is a function, static (not an array argument)
_rates = eqx.filter_jit(log_growth_rates)
