r"""The input checks of the package, the methods it decides, and a problem to solve (method,
data, start, solver options).

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
from flows.internal import (
    WrongTypeError,
    as_array,
    check_data,
    check_int,
    check_loss,
    check_scalar,
    check_theta,
    is_traced,
    real_number,
)
from flows.internal import check_method as _check_flows_method

METHOD_PARAMETERS = {
    flows.GD: (),
    flows.L2SAM: ("rho",),
    flows.LinfSAM: ("rho", "delta"),
    flows.LESAM: ("sigma", "rho_max"),
}
"""The methods the analysis decides (those whose perturbation bound is known,
:func:`analysis.perturbation_bound`), each with its parameters, by keyword of its
constructor: those :func:`analysis.phase_diagram` can replace point by point, and ``delta``
(ℓ∞-SAM's smoothing of the sign, a fixed value only; without it the sign is exact). Any
other method is refused with ``ValueError`` naming ``method``."""


def check_method(method) -> flows.AbstractMethod:
    r"""A method the analysis can decide: one of :data:`METHOD_PARAMETERS` (LE-SAM also with a
    schedule σ(t)), for which :func:`analysis.perturbation_bound` is known.

    A schedule is read at the real time :math:`t(\tau)`, which every solve carries
    (:func:`flows.solve`) and every continuation starts from where the previous solve
    ended (:meth:`flows.AbstractMethod.started_at`, docs/theory.md §5).
    """
    _check_flows_method(method)
    if not isinstance(method, tuple(METHOD_PARAMETERS)):
        raise ValueError(
            "`method` must be one of flows.GD, L2SAM, LinfSAM, LESAM (a perturbation bound is "
            f"known for these); got {type(method).__name__}."
        )
    return method


def check_parameters(method_type, given, *, method_name: str, spell=lambda name: f"`{name}`"):
    """Refuse a parameter that does not belong to the method, the one check of it (for
    :func:`analysis.phase_diagram` and the ``phase`` command line).

    ``given`` maps parameter names to values (None: not given); a name given that is not one
    of ``METHOD_PARAMETERS`` of ``method_type`` raises ``ValueError`` "<name> does not belong
    to <method_name> (its parameters: ...)", every name written by ``spell`` (in backticks by
    default, ``--rho`` in a command line)."""
    own = next(v for k, v in METHOD_PARAMETERS.items() if issubclass(method_type, k))
    for name, value in given.items():
        if value is not None and name not in own:
            raise ValueError(
                f"{spell(name)} does not belong to {method_name} (its parameters: "
                f"{', '.join(map(spell, own)) or 'none'})"
            )


def check_mu(mu) -> np.ndarray:
    r"""Validate a single example :math:`\mu`: 1-D, finite, normal, > 0, one largest entry."""
    arr = np.asarray(as_array("mu", mu, "a 1-D array of real numbers > 0"))
    if arr.ndim != 1 or arr.shape[0] < 1:
        raise ValueError(f"`mu` must be a 1-D array of length d >= 1; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"`mu` must be finite and > 0 elementwise; got {arr!r}.")
    if np.any(arr < np.finfo(np.float64).tiny):  # subnormal: its digits are already lost
        raise ValueError(
            f"`mu` entries must be normal float64 numbers >= {np.finfo(np.float64).tiny:.4g} "
            f"(a subnormal entry has lost its precision); got {arr!r}."
        )
    if np.sum(arr == arr.max()) != 1:
        raise ValueError(f"`mu` must have a unique largest entry (argmax μ); got {arr!r}.")
    return arr


def check_alpha(alpha, d: int) -> np.ndarray:
    """Validate an initialisation scale: a scalar or shape ``(d,)``, finite and > 0."""
    arr = np.asarray(as_array("alpha", alpha, f"a number > 0 or a ({d},) array of numbers > 0"))
    if arr.ndim not in (0, 1) or (arr.ndim == 1 and arr.shape[0] != d):
        raise ValueError(f"`alpha` must be a scalar or have shape ({d},); got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"`alpha` must be finite and > 0; got {alpha!r}.")
    return arr


def check_depth(depth) -> int:
    """Validate the depth :math:`L\\ge1`."""
    return check_int("depth", depth, minimum=1)


def check_positive(name: str, value, *, upper: float = np.inf, lower: float = 0.0) -> float:
    """Validate a real number in ``(lower, upper)`` (``[lower, upper)`` for a ``lower`` > 0).

    A concrete real scalar is accepted in any form (Python, NumPy or 0-d JAX), a
    bool in none.
    """
    number = real_number(value)
    what = f"a number in [{lower:.6g}, {upper})" if lower > 0 else f"a number in (0, {upper})"
    if number is None:
        raise WrongTypeError(f"`{name}` must be {what}; got {value!r}.")
    if not (lower <= number if lower > 0 else 0 < number) or not number < upper:
        raise ValueError(f"`{name}` must be {what}; got {value!r}.")
    return number


def check_count(name: str, value, minimum: int = 1) -> int:
    """Validate an integer ``>= minimum``."""
    return check_int(name, value, minimum=minimum)


def check_kind(name, value, kinds):
    """A concrete ``value`` must be booleans (``kinds`` "b") or integers ("iu"); traced pass."""
    if is_traced(value):
        return
    try:
        dtype = None if isinstance(value, (str, bytes)) else np.asarray(value).dtype
    except ValueError:  # ragged
        dtype = None
    if value is None or dtype is None or dtype.kind not in kinds:
        what = "booleans" if kinds == "b" else "integer indices"
        raise WrongTypeError(f"`{name}` must be {what} (a scalar or an array); got {value!r}.")


def check_trajectory(traj) -> flows.Trajectory:
    """Validate a single (unbatched) :class:`flows.Trajectory`."""
    if not isinstance(traj, flows.Trajectory):
        raise WrongTypeError(f"`traj` must be a flows.Trajectory; got {type(traj).__name__}.")
    if np.ndim(traj.t_end) != 0:
        raise ValueError("`traj` must be a single trajectory, not a vmapped batch; index it first.")
    return traj


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
        r"""Log-growth rates :math:`d\log\lvert\beta_j\rvert/dt` at ``theta`` (shape ``(d,)``)."""
        return np.asarray(
            _rates(self.method, self.data, self.loss, self.rescaled, jnp.asarray(theta), t)
        )

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
    r"""Traceable :math:`r_j=\sum_l v_{lj}/\theta_{lj}`, :math:`-\infty` where :math:`\beta_j=0`."""
    v = (flows.rescaled_velocity if rescaled else flows.velocity)(method, data, loss, theta, t)
    dead = jnp.any(theta == 0, axis=0)
    safe = jnp.where(theta == 0, 1.0, theta)
    return jnp.where(dead, -jnp.inf, jnp.sum(v / safe, axis=0))


# filter_jit: a schedule σ(t) in the method is a function, static (not an array argument)
_rates = eqx.filter_jit(log_growth_rates)


def single_example_problem(method, mu, alpha, depth, *, t1, loss, options) -> Problem:
    r"""The rescaled single-example problem :math:`\{(\mu,+1)\}` from :math:`w^{(l)}(0)=\alpha`."""
    mu = check_mu(mu)
    alpha = check_alpha(alpha, mu.shape[0])
    theta0 = flows.balanced_init(alpha, check_depth(depth), mu.shape[0])
    return Problem(check_method(method), flows.single_example(mu), theta0, t1, True, loss, options)
