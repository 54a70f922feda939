"""The input checks of the analysis, and the methods it decides (:data:`METHOD_PARAMETERS`).

Each check raises a ``ValueError`` naming the argument and what is accepted, and returns the
checked value, so that a caller checks an input once, at its edge, and passes it on.
"""

import numpy as np

import flows
from flows.internal import (
    WrongTypeError,
    as_array,
    check_int,
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


def check_axis(name: str, value) -> np.ndarray:
    """Validate an axis of a swept grid: a number or a non-empty 1-D array, finite and > 0."""
    arr = np.asarray(as_array(name, value, "a number > 0 or a 1-D array of numbers > 0"))
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(
            f"`{name}` must be a number or a non-empty 1-D array; got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"`{name}` must be finite and > 0; got {value!r}.")
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
