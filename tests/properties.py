"""The property-based tests (hypothesis) of the public API under hostile input: their shared
strategies, outcome rule and fixtures. The properties themselves are in the test file of the
module each tests (``tests/test_methods.py``, ``tests/test_problem.py``,
``tests/test_dynamics_properties.py``, ``tests/test_iterate_properties.py``,
``tests/test_many.py``, ``tests/test_solve_properties.py``,
``tests/test_analysis_properties.py``, ``tests/test_public_properties.py``).

Every call gets generated arguments: shapes, magnitudes from 1e-150 to 1e150, NaN and
inf, and values of the wrong type. Each call must either raise a ``ValueError`` or
``TypeError`` that names the argument, or return a finite result (or one whose
non-finiteness is exact overflow, checked against an independent log-space value)
with a status that agrees with it. About half the draws of each property are known to be
valid (:func:`cases`): those must succeed, with a value checked against numpy or a closed
form, so that code refusing valid input fails; every property counts them (:class:`Tally`).
Scale-twin properties check the exact symmetries
of the fields and of the max-margin problem across magnitudes.

CI-sized: at most ``MAX_EXAMPLES`` examples per property, derandomized (the same
examples on every run), no example database, no deadline (first calls compile).
Every public callable of ``flows`` and ``analysis`` is covered: by a property of its own, or
by a row of ``PUBLIC`` in ``tests/test_public_properties.py`` (``test_every_public_callable``:
one argument at a time replaced by a hostile value; a call whose valid path integrates or
sweeps must stop at the patched-out integrator, so no example solves anything);
``test_every_public_callable_is_covered`` fails for a new public name without either.

Solver-level scale twins of ``flows.solve`` (status, scaled end time, θ_end/λ from 1e-150
to 1e150, both backends) are in ``tests/test_solver_hostile.py``; those of
``analysis.regime_path`` in ``tests/test_regime.py``.
"""

import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flows

MAX_EXAMPLES = 60
CI = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

# --- strategies ---------------------------------------------------------------------------

exponents = st.floats(min_value=-150.0, max_value=150.0, allow_nan=False)
wide_exponents = st.floats(min_value=-300.0, max_value=300.0, allow_nan=False)  # scaled norms
magnitudes = exponents.map(lambda e: 10.0**e)  # (0, ∞): 1e-150 … 1e150
signed = st.tuples(magnitudes, st.sampled_from([-1.0, 1.0])).map(lambda p: p[0] * p[1])
specials = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0])
numbers = st.one_of(signed, specials)


class Opaque:
    """An object that is no number."""

    def __repr__(self):
        return "Opaque()"


wrong_types = st.sampled_from(
    [None, "abc", "1.0", b"1", 1 + 2j, {"a": 1}, Opaque(), [1.0, [2.0]], [[1.0, 2.0], [3.0]]]
)


def arrays(shape):
    return st.lists(numbers, min_size=math.prod(shape), max_size=math.prod(shape)).map(
        lambda v: np.array(v, dtype=float).reshape(shape)
    )


def any_value(shape=()):
    """A value for an argument that expects an array of ``shape``: right or wrong shape,
    any magnitude or a special number, or the wrong type."""
    wrong_shapes = st.sampled_from([(), (1,), (2,), (3,), (2, 3), (1, 2, 3), (0,), (2, 0)])
    return st.one_of(arrays(shape), wrong_shapes.flatmap(arrays), wrong_types, numbers)


nonneg = st.one_of(magnitudes, st.just(0.0))  # valid radii: 0 and 1e-150 … 1e150
moderate = st.floats(0.1, 3.0).flatmap(lambda m: st.sampled_from([m, -m]))  # |x| in [0.1, 3]
pm_ones = st.lists(st.sampled_from([1.0, -1.0]), min_size=2, max_size=2)


def finite_arrays(shape, elements=moderate):
    return st.lists(elements, min_size=math.prod(shape), max_size=math.prod(shape)).map(
        lambda v: np.array(v, dtype=float).reshape(shape)
    )


def cases(valid, hostile):
    """(known valid?, draw): a draw of ``valid`` (it must succeed) or of ``hostile``."""
    return st.one_of(valid.map(lambda v: (True, v)), hostile.map(lambda v: (False, v)))


# --- the outcome rule ---------------------------------------------------------------------


def named_error_or_result(call, *names):
    """``call()`` either raises TypeError/ValueError naming one of ``names``, or returns."""
    try:
        return True, call()
    except (TypeError, ValueError) as err:
        message = str(err)
        assert any(f"`{n}`" in message for n in names), f"error does not name {names}: {err!r}"
        return False, None


class Tally:
    """The outcomes of one property's draws. :meth:`outcome` is :func:`named_error_or_result`,
    except that a known-valid draw must return (any error fails the property); :meth:`check`
    asserts that known-valid draws were made (so that a refusal of valid input is seen)."""

    def __init__(self):
        self.valid = self.returned = 0

    def outcome(self, call, must, *names):
        if must:
            result = call()
            self.valid += 1
            self.returned += 1
            return True, result
        ok, result = named_error_or_result(call, *names)
        self.returned += ok
        return ok, result

    def check(self, minimum=10):
        assert self.valid >= minimum, f"only {self.valid} known-valid draws"


def run_cases(valid, hostile, body, minimum=10):
    """``body(tally, must, args)`` as a property over :func:`cases` of ``valid`` and ``hostile``
    (one :class:`Tally`); then at least ``minimum`` known-valid draws must have been made."""
    tally = Tally()
    CI(given(case=cases(valid, hostile))(lambda case: body(tally, *case)))()
    tally.check(minimum)


def finite(x):
    return bool(np.all(np.isfinite(np.asarray(x))))


def concrete_finite(x):
    try:
        return finite(np.asarray(x, dtype=float))
    except (TypeError, ValueError):
        return False


DATA = flows.single_example([1.0, 2.0, 3.0])
THETA = flows.balanced_init(0.5, 2, 3)
METHODS = [
    flows.GD(),
    flows.L2SAM(0.3),
    flows.L2SAM(0.3, per_layer=True),
    flows.LinfSAM(0.1),
    flows.LinfSAM(0.1, delta=1e-3),
    flows.LESAM(0.35, 0.3),
]

# --- solve: every bad argument is refused before integrating --------------------------------


class Solved(Exception):
    """Raised in place of integrating: the arguments passed validation. ``args``: the
    integrator's (field or system, theta0, ts, t1, options)."""


def _concrete(x):
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


def _within(x, low, high):
    """x is a real number (not a bool) with low < x < high; a traced value passes (unknown)."""
    if not _concrete(x):
        return True
    if isinstance(x, (bool, np.bool_, str)) or np.ndim(x) != 0:
        return False
    return bool(low < float(x) < high)


def assert_well_posed(solved):
    """What reached the patched integrator is a well-posed run, whatever was passed to the
    call: θ₀ finite, 0 < t1 < inf, and options in the ranges ``flows.SolverOptions`` states
    (written here, not read from the validators). So a hostile value that slips past a
    validator (``rtol=NaN``, ``t1=-1``) fails here instead of counting as integrated."""
    if len(solved.args) < 5:  # a patched sweep (no_sweep): its points are checked by flows
        return
    _, theta0, _, t1, options = solved.args[:5]
    if _concrete(theta0):
        assert np.all(np.isfinite(np.asarray(theta0))), f"θ₀ not finite: {theta0!r}"
    assert _within(t1, 0.0, np.inf), f"t1 = {t1!r}"
    assert _within(options.rtol, 0.0, 1.0), f"rtol = {options.rtol!r}"
    atol = options.atol
    assert (isinstance(atol, str) and atol == "auto") or _within(atol, 0.0, np.inf), atol
    steps = options.max_steps
    assert isinstance(steps, int) and not isinstance(steps, bool) and 1 <= steps <= 2**62, steps
    for name, low, high, auto in (("collapse_tol", 0.0, 1.0, False),
                                  ("escape_tol", 1.0, np.inf, True),
                                  ("loss_tol", 0.0, np.inf, False)):  # fmt: skip
        value = getattr(options, name)
        ok = value is None or (auto and isinstance(value, str) and value == "auto")
        assert ok or _within(value, low, high), f"{name} = {value!r}"


def refused_or_integrated(call, *names, must=False, tally=None):
    """``call()`` reaches the integrator (valid arguments) or raises an error naming ``names``;
    ``must`` (a known-valid draw): it reaches the integrator, whose :class:`Solved` is returned.
    ``tally`` counts the known-valid draws."""
    try:
        call()
    except Solved as solved:
        assert_well_posed(solved)
        if must and tally is not None:
            tally.valid += 1
        return solved
    except (TypeError, ValueError) as err:
        assert not must, f"a valid call was refused: {err!r}"
        assert any(f"`{n}`" in str(err) for n in names), repr(err)
    else:
        raise AssertionError("the integrator is patched out: the call cannot return")


@pytest.fixture
def no_integration(monkeypatch):
    """Every integrator (smooth and Filippov, both backends, and the numba engine, which the
    analysis's default driver calls) raises ``Solved``."""
    import analysis._drive
    from flows import _diffrax, _numba, _scipy

    def stop(*args, **kwargs):
        raise Solved(*args)

    def stop_engine(method, values, data, theta0, *, ts, t1, options, **kwargs):
        t1 = np.asarray(t1, float)  # one per run: well posed when every one is
        ok = np.all((t1 > 0) & np.isfinite(t1))
        raise Solved(method, theta0, ts, float(np.max(t1)) if ok else np.nan, options)

    for backend in (_diffrax, _scipy):
        for name in ("solve_smooth", "solve_filippov"):
            monkeypatch.setattr(backend, name, stop)
    for module in (_numba, analysis._drive):
        monkeypatch.setattr(module, "engine_run", stop_engine)


def _valid_draw(table):
    """(key, value) with value one of ``table[key]``."""
    return st.sampled_from(list(table)).flatmap(
        lambda k: st.sampled_from(range(len(table[k]))).map(lambda i: (k, table[k][i]))
    )


def each_argument(valid, hostile_values, call, check=None):
    """The property of the tests that patch out the integrator: ``call(key, value)`` with one
    argument replaced, by a known-valid value (one of ``valid[key]``: the call must reach the
    integrator, then ``check(key, value, solved)``) or by a hostile one (a named error, or the
    integrator)."""
    hostile = st.tuples(st.sampled_from(list(valid)), hostile_values)

    def body(tally, must, args):
        key, value = args
        solved = refused_or_integrated(lambda: call(key, value), key, must=must, tally=tally)
        if must and check is not None:
            check(key, value, solved)

    run_cases(_valid_draw(valid), hostile, body)
    for key, values in valid.items():  # and every known-valid value once, drawn or not
        for value in values:
            body(Tally(), True, (key, value))
        for value in SPECIALS:  # and the special values in every place, drawn or not
            body(Tally(), False, (key, value))


#: Values tried in every argument of the integrating calls (:func:`each_argument`): each is
#: refused by name or reaches the integrator as a well-posed run (:func:`assert_well_posed`).
SPECIALS = [np.nan, np.inf, -np.inf, -1.0, 0.0, 1.0, 1e300, "abc"]
