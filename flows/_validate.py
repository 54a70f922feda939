"""Eager validation of concrete inputs.

Every public entry point checks the values it is given when they are concrete
(Python numbers or NumPy/JAX arrays) and raises a ``ValueError`` naming the
argument and what is accepted. A bool is never a number (``True`` is a flag, not
1): a number, an array of numbers or a count given a bool is refused. A value of
the wrong type (a string, ``None``, an object that is not a number or an array
of numbers) raises :class:`WrongTypeError`, which is both a ``TypeError`` and a
``ValueError`` (after NumPy's ``AxisError``), so that either ``except`` clause
catches it. Traced values (inside ``jax.jit``/``jax.vmap``) cannot be inspected
eagerly: their shapes are still checked, and their values are guarded with
:func:`equinox.error_if` where a checked runtime error is wanted, never with a
Python ``if`` on a tracer.
"""

import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._config import as_float64


class WrongTypeError(TypeError, ValueError):
    """An argument of the wrong type; a ``TypeError`` and, for old callers, a ``ValueError``."""


def is_traced(x) -> bool:
    """True when any leaf of ``x`` is a JAX tracer (value unknown at trace time)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def as_array(name: str, x, what: str = "a real number or an array of real numbers"):
    """Convert ``x`` to a float64 JAX array, or raise an error naming ``name``.

    A ragged nested sequence raises ``ValueError``; a string, ``None``, a complex
    number or any other object that is not real-valued raises :class:`WrongTypeError`.
    Traced values are converted as they are (their dtype is already numeric).
    """
    if is_traced(x):
        return as_float64(x)
    if x is None or isinstance(x, (str, bytes)):
        raise WrongTypeError(f"`{name}` must be {what}; got {x!r}.")
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged lists ("inhomogeneous shape")
        raise ValueError(f"`{name}` must be {what} (a rectangular array); got {x!r}.") from err
    if arr.dtype.kind == "O" and all(
        isinstance(e, numbers.Real) and not isinstance(e, (bool, np.bool_)) for e in arr.flat
    ):
        arr = arr.astype(np.float64)  # an object array of numbers (None would become NaN)
    if arr.dtype.kind not in "iuf":  # not bool: True is a flag, never the number 1
        raise WrongTypeError(f"`{name}` must be {what}; got {x!r} (dtype {arr.dtype}).")
    return as_float64(arr.astype(np.float64, copy=False))  # on the host: no XLA program


def real_number(x) -> float | None:
    """The value of a concrete real scalar (Python, NumPy or JAX; not a bool), else None."""
    if isinstance(x, (bool, np.bool_)) or is_traced(x):
        return None
    if isinstance(x, (int, float, np.integer, np.floating)):
        return float(x)
    if isinstance(x, (np.ndarray, jax.Array)) and x.shape == () and x.dtype.kind in "iuf":
        return float(x)
    return None


def check_type(name: str, x, cls, accepted: str):
    """Return ``x`` if it is an instance of ``cls``, else raise :class:`WrongTypeError`."""
    if not isinstance(x, cls):
        shown = repr(x) if len(repr(x)) <= 80 else type(x).__name__
        raise WrongTypeError(f"`{name}` must be {accepted}; got {shown}.")
    return x


def check_finite(name: str, x) -> None:
    """Raise ``ValueError`` if the concrete array ``x`` holds NaN or inf."""
    if not is_traced(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError(f"`{name}` must be finite (no NaN or inf); got {x!r}.")


def check_scalar(name: str, x, *, positive: bool = False, nonnegative: bool = False):
    """Check a real scalar parameter; return it as a float64 array.

    Concrete values are checked eagerly (a real number, finite, scalar, and the
    sign constraint); traced values get an :func:`equinox.error_if` guard with
    the same message.
    """
    what = "a finite real number" + (" > 0" if positive else " >= 0" if nonnegative else "")
    message = f"`{name}` must be {what}"
    arr = as_array(name, x, what=what)
    if arr.ndim != 0:
        raise ValueError(f"`{name}` must be a real scalar; got shape {arr.shape}.")
    # Concrete values are checked in NumPy: an eager jnp comparison compiles an XLA
    # program per operation on its first use.
    traced = is_traced(arr)
    xp, value = (jnp, arr) if traced else (np, np.asarray(arr))
    bad = ~xp.isfinite(value)
    if positive:
        bad = bad | (value <= 0)
    elif nonnegative:
        bad = bad | (value < 0)
    if traced:
        return eqx.error_if(arr, bad, message)
    if bool(bad):
        raise ValueError(f"{message}; got {x!r}.")
    return arr


#: The most host threads (or worker processes) a caller may ask for (``workers`` of
#: :func:`flows.solve_many` and :func:`flows.sweep`): far more than any machine's cores.
MAX_WORKERS = 4096


def check_int(name: str, x, *, minimum: int, maximum: int | None = None) -> int:
    """Check a static integer parameter (depth, step counts): in [minimum, maximum]."""
    shown = maximum
    if maximum is not None and maximum >= 2**20 and maximum & (maximum - 1) == 0:
        shown = f"2**{maximum.bit_length() - 1}"  # a power of two, as one
    accepted = f">= {minimum}" if maximum is None else f"in [{minimum}, {shown}]"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise WrongTypeError(f"`{name}` must be a Python integer {accepted}; got {x!r}.")
    if x < minimum or (maximum is not None and x > maximum):
        raise ValueError(f"`{name}` must be an integer {accepted}; got {x!r}.")
    return int(x)


def with_overrides(options, overrides: dict, cls, fields, exclude=()):
    """The options object ``options`` (an instance of ``cls``, or None for its defaults) with
    the keyword shortcuts ``overrides`` applied through ``cls(**fields)``, so validated again.

    One rule for every options object of the package (:class:`flows.SolverOptions`,
    :class:`flows.SweepOptions`, :class:`analysis.RunOptions`): a name that is not one of
    ``fields`` (or is in ``exclude``) is refused with a ``ValueError`` naming it, and so is an
    ``options`` of another type.
    """
    label = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
    if options is not None and not isinstance(options, cls):
        raise ValueError(f"`options` must be None or a {label}; got {options!r}.")
    unknown = sorted(set(overrides) - set(fields) | (set(overrides) & set(exclude)))
    if unknown:
        allowed = ", ".join(f for f in fields if f not in exclude)
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))}; the options are {allowed} "
            f"({label})."
        )
    if options is None:
        return cls(**overrides)
    if not overrides:
        return options
    return cls(**{**{k: getattr(options, k) for k in fields}, **overrides})
