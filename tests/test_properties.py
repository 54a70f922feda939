"""Property-based tests (hypothesis) of the public API under hostile input (issue 15).

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
by a row of ``PUBLIC`` (``test_every_public_callable``: one argument at a time replaced by a
hostile value; a call whose valid path integrates or sweeps must stop at the patched-out
integrator, so no example solves anything); ``test_every_public_callable_is_covered`` fails
for a new public name without either.

Solver-level scale twins of ``flows.solve`` (status, scaled end time, θ_end/λ from 1e-150
to 1e150, both backends) are in ``tests/test_solver_hostile.py``; those of
``analysis.regime_path`` in ``tests/test_regime.py``.
"""

import dataclasses
import math

import jax
import numpy as np
import pytest
import scipy.special
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import analysis
import flows
from tests.helpers import numpy_iterate, numpy_logistic_grad, numpy_perturbation

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

# --- constructors -------------------------------------------------------------------------

# A gradient with ‖g‖ = √50 and rows of norm 5: the perturbations of the constructed methods
# against tests.helpers.numpy_perturbation.
G2 = np.array([[3.0, 0.0, -4.0], [0.0, 5.0, 0.0]])
pm_ones = st.lists(st.sampled_from([1.0, -1.0]), min_size=2, max_size=2)


def _perturbs_as_numpy(m):
    np.testing.assert_allclose(
        np.asarray(m.perturbation(THETA, G2, 0.0)), numpy_perturbation(m, G2), rtol=1e-13, atol=0
    )


def test_l2sam_constructor():
    def body(tally, must, args):
        rho, per_layer = args
        call = lambda: flows.L2SAM(rho, per_layer=per_layer)  # noqa: E731
        ok, m = tally.outcome(call, must, "rho", "per_layer")
        if ok:
            assert concrete_finite(rho) and float(np.asarray(rho)) >= 0
            assert float(m.rho) == float(np.asarray(rho)) and isinstance(per_layer, bool)
            assert m.per_layer == per_layer
            _perturbs_as_numpy(m)

    run_cases(
        st.tuples(nonneg, st.booleans()),
        st.tuples(any_value(), st.one_of(st.booleans(), wrong_types, numbers)),
        body,
    )


def test_linfsam_constructor():
    def body(tally, must, args):
        rho, delta = args
        ok, m = tally.outcome(lambda: flows.LinfSAM(rho, delta=delta), must, "rho", "delta")
        if ok:
            assert float(m.rho) >= 0 and finite(m.rho)
            assert m.delta is None or (float(m.delta) > 0 and finite(m.delta))
            assert float(m.rho) == float(np.asarray(rho))
            assert (m.delta is None) == (delta is None)
            assert delta is None or float(m.delta) == float(np.asarray(delta))
            _perturbs_as_numpy(m)

    run_cases(
        st.tuples(nonneg, st.one_of(st.none(), magnitudes)),
        st.tuples(any_value(), st.one_of(st.none(), any_value())),
        body,
    )


def test_lesam_constructor():
    def body(tally, must, args):
        sigma, rho_max, eps = args
        call = lambda: flows.LESAM(sigma, rho_max, eps)  # noqa: E731
        ok, m = tally.outcome(call, must, "sigma", "rho_max", "eps")
        if ok:
            assert float(m.sigma) >= 0 and float(m.rho_max) >= 0 and float(m.eps) > 0
            assert finite(m.sigma) and finite(m.rho_max) and finite(m.eps)
            given_values = [float(np.asarray(v)) for v in (sigma, rho_max, eps)]
            assert [float(m.sigma), float(m.rho_max), float(m.eps)] == given_values
            _perturbs_as_numpy(m)

    run_cases(
        st.tuples(nonneg, nonneg, magnitudes),
        st.tuples(any_value(), any_value(), any_value()),
        body,
    )


def test_dataset_constructor():
    def body(tally, must, args):
        X, y = args
        ok, data = tally.outcome(lambda: flows.Dataset(X, y), must, "X", "y")
        if ok:
            assert finite(data.X) and set(np.asarray(data.y).tolist()) <= {1.0, -1.0}
            assert data.X.shape == (data.n, data.d) and data.y.shape == (data.n,)
            np.testing.assert_array_equal(np.asarray(data.X), np.asarray(X, dtype=float))
            np.testing.assert_array_equal(np.asarray(data.y), np.asarray(y, dtype=float))

    run_cases(
        st.tuples(finite_arrays((2, 3), signed), pm_ones),
        st.tuples(any_value((2, 3)), st.one_of(any_value((2,)), st.just([1.0, -1.0]))),
        body,
    )


def test_single_example():
    def body(tally, must, args):
        mu = args
        ok, data = tally.outcome(lambda: flows.single_example(mu), must, "mu")
        if ok:
            assert data.n == 1 and finite(data.X) and np.array_equal(data.X[0], np.asarray(mu))
            assert np.asarray(data.y).tolist() == [1.0]

    run_cases(finite_arrays((3,), signed), any_value((3,)), body)


def test_balanced_init():
    valid = st.one_of(
        st.tuples(finite_arrays((3,), magnitudes), st.integers(1, 4), st.none()),
        st.tuples(magnitudes, st.integers(1, 4), st.integers(1, 4)),
    )
    hostile = st.tuples(
        any_value((3,)),
        st.one_of(st.integers(-2, 4), wrong_types, numbers),
        st.one_of(st.none(), st.integers(-1, 4), wrong_types, numbers),
    )

    def body(tally, must, args):
        alpha, depth, d = args
        call = lambda: flows.balanced_init(alpha, depth, d)  # noqa: E731
        ok, theta = tally.outcome(call, must, "alpha", "depth", "d")
        if ok:
            assert theta.shape == (depth, np.size(alpha) if np.ndim(alpha) else d)
            assert finite(theta) and bool(np.all(np.asarray(theta) > 0))
            # every layer is α (w^(l)(0) = α)
            np.testing.assert_array_equal(np.asarray(theta), np.broadcast_to(alpha, theta.shape))

    run_cases(valid, hostile, body)


# --- pure functions of θ ------------------------------------------------------------------


def test_beta_is_exact_or_exact_overflow():
    """β = Π_l θ_l: finite whenever Σ_l log|θ_l| < log(max float); overflow only beyond.
    Known-valid draws (finite θ, 1e-150 … 1e150): β = θ_1 θ_2 exactly (numpy)."""

    def body(tally, must, args):
        theta = args
        ok, b = tally.outcome(lambda: flows.beta(theta), must, "theta")
        if ok:
            th = np.asarray(theta, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                log_abs = np.sum(np.log(np.abs(th)), axis=-2)
            fits = np.all(np.isfinite(th), axis=-2)
            fits &= log_abs < np.log(np.finfo(float).max) - 1e-9
            got = np.asarray(b)
            assert np.all(np.isfinite(got[fits]))
            nz = fits & (got != 0)
            np.testing.assert_allclose(np.log(np.abs(got[nz])), log_abs[nz], rtol=0, atol=1e-12)
            if must:
                np.testing.assert_array_equal(got, th[0] * th[1])

    run_cases(finite_arrays((2, 3), signed), any_value((2, 3)), body)


def _numpy_loss(loss, z):
    return np.logaddexp(0.0, -z) if loss == "logistic" else np.exp(-z)


def test_objective_and_margins():
    """Known-valid draws: L = ℓ(⟨μ, θ_1θ_2⟩) of the single example (numpy)."""
    losses = st.sampled_from(["logistic", "exponential"])
    valid = st.tuples(finite_arrays((2, 3)), st.just(DATA), losses)
    hostile = st.tuples(
        any_value((2, 3)), st.one_of(st.just(DATA), wrong_types), st.sampled_from(
            ["logistic", "exponential", "hinge", None]
        )
    )  # fmt: skip

    def body(tally, must, args):
        theta, data, loss = args
        call = lambda: flows.objective(theta, data, loss)  # noqa: E731
        ok, value = tally.outcome(call, must, "theta", "data", "loss")
        if ok:
            # NaN in, NaN out: never a made-up number (inf in θ gives the limit, e.g. loss 0)
            assert not np.any(np.isnan(np.asarray(theta, dtype=float))) or np.isnan(float(value))
            m = np.asarray(flows.margins(theta, data))
            if finite(m):  # the loss of finite margins is finite, or exact exp overflow
                assert finite(value) or (loss == "exponential" and -np.min(m) > 709)
                assert float(value) >= 0
        if must:
            m = np.array([np.sum(np.asarray(DATA.X[0]) * theta[0] * theta[1])])
            np.testing.assert_allclose(np.asarray(flows.margins(theta, data)), m, rtol=1e-13)
            np.testing.assert_allclose(float(value), _numpy_loss(loss, m[0]), rtol=1e-13)

    run_cases(valid, hostile, body)


def test_loss_and_derivative_are_finite_on_finite_margins():
    """Known-valid draws (z in [-30, 30]): ℓ and ℓ' against numpy's closed forms."""
    losses = st.sampled_from(["logistic", "exponential"])
    valid = st.tuples(finite_arrays((4,), st.floats(-30.0, 30.0)), losses)

    def body(tally, must, args):
        z, loss = args
        ok, value = tally.outcome(lambda: flows.loss_fn(loss, z), must, "z")
        if ok and concrete_finite(z):
            zz = np.asarray(z, dtype=float)
            overflow = loss == "exponential" and np.any(-zz > 709)
            assert finite(value) or overflow
            assert np.all(np.asarray(value) >= 0)
            dl = np.asarray(flows.loss_derivative(loss, z))
            assert finite(dl) or overflow
            assert np.all(dl <= 0)
        if must:
            np.testing.assert_allclose(np.asarray(value), _numpy_loss(loss, z), rtol=1e-13)
            d_ref = -scipy.special.expit(-z) if loss == "logistic" else -np.exp(-z)
            dl = np.asarray(flows.loss_derivative(loss, z))
            np.testing.assert_allclose(dl, d_ref, rtol=1e-13, atol=0)

    run_cases(valid, st.tuples(any_value((4,)), losses), body)


# --- fields -------------------------------------------------------------------------------


def _numpy_velocity(method, theta, t, rescaled):
    """The field on DATA (one example μ, label +1, logistic), in numpy: -∇L(θ̂) with
    θ̂ = θ + ε(θ, ∇L(θ)) (tests.helpers), or rescaled by 1/|ℓ'(m(θ̂))|: ∇m(θ̂) = μ⊙(θ̂_2, θ̂_1).
    The rescaled flow hands ℓ∞-SAM −∇m = ∇L/|ℓ'| (its documented δ acts on that)."""
    mu = np.asarray(DATA.X[0])
    g = numpy_logistic_grad(theta, DATA)
    if rescaled and isinstance(method, flows.LinfSAM):
        g = -mu * theta[::-1]
    hat = theta + numpy_perturbation(method, g, t)
    return mu * hat[::-1] if rescaled else -numpy_logistic_grad(hat, DATA)


def test_velocity_named_error_or_finite():
    """Valid arguments give a finite field at moderate θ (|θ| ≤ 1e3, no overflow); the
    known-valid draws (|θ| in [0.1, 3], t in [0, 10]) the numpy field."""
    valid = st.tuples(
        st.sampled_from(METHODS), finite_arrays((2, 3)), st.floats(0.0, 10.0), st.booleans()
    )
    hostile = st.tuples(
        st.one_of(st.sampled_from(METHODS), wrong_types),
        any_value((2, 3)),
        st.one_of(numbers, wrong_types),
        st.booleans(),
    )

    def body(tally, must, args):
        method, theta, t, rescaled = args
        fn = flows.rescaled_velocity if rescaled else flows.velocity
        call = lambda: fn(method, DATA, "logistic", theta, t)  # noqa: E731
        ok, v = tally.outcome(call, must, "method", "theta", "t")
        if ok:
            assert concrete_finite(theta) and concrete_finite(t)
            assert v.shape == (2, 3)
            if np.max(np.abs(np.asarray(theta))) <= 1e3:
                assert finite(v)
        if must:
            expected = _numpy_velocity(method, theta, t, rescaled)
            np.testing.assert_allclose(np.asarray(v), expected, rtol=1e-12, atol=1e-14)

    run_cases(valid, hostile, body)


def test_rescaled_velocity_refuses_two_examples():
    two = flows.Dataset([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], [1, -1])
    with pytest.raises(ValueError, match="`data`"):
        flows.rescaled_velocity(flows.GD(), two, "logistic", THETA)


@CI
@given(
    exponent=wide_exponents,
    a=st.floats(0.05, 5.0),
    r=st.floats(0.0, 5.0),
    depth=st.sampled_from([1, 2]),
)
def test_rescaled_field_scale_twins(exponent, a, r, depth):
    """docs/theory.md §6: (θ, ρ) -> (λθ, λρ) maps the rescaled field v -> λ^{L-1} v (ℓ2, ℓ∞, GD).

    Checked for λ = 10^e, e in [-300, 300], against the field at λ = 1 (L ≤ 2 so that
    λ^{L-1} v stays in range).
    """
    lam = 10.0**exponent
    mu = [1.0, 2.0, 3.0]
    data = flows.single_example(mu)
    theta = np.stack([np.array([a, 0.7 * a, 1.3 * a])] * depth)
    for make in (flows.L2SAM, flows.LinfSAM, lambda r: flows.L2SAM(r, per_layer=True)):
        v1 = np.asarray(flows.rescaled_velocity(make(r), data, "logistic", theta))
        vl = np.asarray(flows.rescaled_velocity(make(lam * r), data, "logistic", lam * theta))
        np.testing.assert_allclose(
            vl / lam ** (depth - 1), v1, rtol=1e-12, atol=1e-13 * np.max(np.abs(v1))
        )


@CI
@given(g=arrays((2, 3)).filter(lambda g: finite(g) and np.any(g != 0)), exponent=wide_exponents)
def test_l2_perturbation_is_scale_invariant_in_g(g, exponent):
    """ε = ρ g/‖g‖ does not change when g is multiplied by 10^e (any magnitude of g)."""
    g = g / np.max(np.abs(g))  # a direction with entries in [-1, 1]
    lam = 10.0**exponent
    # Normal numbers only: XLA on CPU may flush subnormals (< 2.2e-308) to zero, and
    # whether it does varies by thread; no float64 code can keep their direction.
    nonzero = np.abs(g[g != 0])
    assume(np.min(nonzero) * min(lam, 1.0) >= np.finfo(float).tiny)
    for m in (flows.L2SAM(0.7), flows.L2SAM(0.7, per_layer=True)):
        e1 = np.asarray(m.perturbation(THETA, g, 0.0))
        el = np.asarray(m.perturbation(THETA, lam * g, 0.0))
        np.testing.assert_allclose(el, e1, rtol=1e-13, atol=1e-15)
    unit = g / np.sqrt(np.sum(g**2))
    np.testing.assert_allclose(
        np.asarray(flows.L2SAM(0.7).perturbation(THETA, lam * g, 0.0)),
        0.7 * unit,
        rtol=1e-13,
        atol=1e-15,
    )


# --- discrete updates ---------------------------------------------------------------------


def test_iterate_status_agrees_with_the_iterates():
    """status ok ⇔ every saved θ and β is finite; nonfinite otherwise (lr up to 1e150). The
    known-valid draws (lr in [1e-3, 0.3], α in [0.1, 2]): status ok and the iterates of an
    independent numpy update (tests.helpers.numpy_iterate)."""
    methods = st.sampled_from(METHODS)
    valid = st.tuples(methods, st.floats(1e-3, 0.3), st.floats(0.1, 2.0))
    lrs = st.one_of(magnitudes, specials, wrong_types)
    hostile = st.tuples(methods, lrs, st.one_of(magnitudes, specials))

    def body(tally, must, args):
        method, lr, alpha = args

        def run():
            return flows.iterate(
                method, DATA, flows.balanced_init(alpha, 2, 3), lr=lr, steps=4, every=2
            )

        ok, traj = tally.outcome(run, must, "lr", "alpha")
        if ok:
            all_finite = finite(traj.thetas) and finite(traj.beta)
            if traj.status_name == "ok":
                assert all_finite
            else:
                assert traj.status_name == "nonfinite"
            if not all_finite:
                assert traj.status_name == "nonfinite"
        if must:
            assert traj.status_name == "ok"
            expected = numpy_iterate(method, DATA, np.full((2, 3), alpha), lr, 4)[::2]
            np.testing.assert_allclose(np.asarray(traj.thetas), expected, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(traj.ts), [0.0, 2 * lr, 4 * lr], rtol=1e-15)

    run_cases(valid, hostile, body)


def test_iterate_arguments():
    """Known-valid draws (every dividing steps, logistic, GD or ℓ2-SAM): the numpy iterates."""
    valid = st.tuples(
        st.sampled_from([(1, 1), (2, 1), (2, 2), (3, 1), (3, 3)]),
        st.just("logistic"),
        st.just(DATA),
        st.sampled_from([flows.GD(), flows.L2SAM(0.3)]),
    )
    hostile = st.tuples(
        st.tuples(
            st.one_of(st.integers(-1, 3), wrong_types, numbers),
            st.one_of(st.integers(-1, 3), wrong_types, numbers),
        ),
        st.one_of(st.sampled_from(["logistic", "mse"]), wrong_types),
        st.one_of(st.just(DATA), wrong_types),
        st.one_of(st.just(flows.GD()), wrong_types),
    )

    def body(tally, must, args):
        (steps, every), loss, data, method = args
        ok, traj = tally.outcome(
            lambda: flows.iterate(method, data, THETA, lr=0.1, steps=steps, every=every, loss=loss),
            must,
            "steps",
            "every",
            "loss",
            "data",
            "method",
        )
        if ok:
            assert traj.status_name == "ok" and traj.ts.shape == (steps // every + 1,)
        if must:
            expected = numpy_iterate(method, DATA, THETA, 0.1, steps)[::every]
            np.testing.assert_allclose(np.asarray(traj.thetas), expected, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(traj.ts), 0.1 * np.arange(0, steps + 1, every))

    run_cases(valid, hostile, body)


def test_solve_many_arguments():
    """Known-valid draws (L = 1, ℓ2-SAM, any ρ ≥ 0 per trajectory): the rescaled flow at L = 1
    is dθ/dτ = ∇m(θ̂) = μ whatever θ̂, so θ(τ) = θ₀ + μτ exactly (closed form)."""
    mu = np.asarray(DATA.X)[0]
    start = st.floats(0.05, 2.0)
    valid = st.tuples(
        st.lists(start, min_size=1, max_size=5),
        st.lists(st.floats(0.0, 2.0), min_size=1, max_size=1),
        st.floats(0.1, 5.0),
        st.just(1),
    )
    hostile = st.tuples(
        st.one_of(st.lists(st.one_of(start, numbers), min_size=0, max_size=3), wrong_types),
        st.one_of(st.lists(numbers, min_size=1, max_size=3), wrong_types),
        st.one_of(numbers, wrong_types),
        st.one_of(st.integers(-1, 3), wrong_types),
    )

    def body(tally, must, args):
        alphas, rhos, t1, workers = args
        theta0, rho, n = alphas, rhos, None  # hostile draws go in as drawn
        if must:
            n = len(alphas)
            theta0 = np.broadcast_to(np.asarray(alphas)[:, None, None], (n, 1, mu.size))
            rho = np.resize(np.asarray(rhos), n)
        ok, traj = tally.outcome(
            lambda: flows.solve_many(flows.L2SAM(1.0), DATA, theta0, t1=t1, rescaled=True,
                                     params={"rho": rho}, workers=workers),
            must, "theta0", "params['rho']", "t1", "workers",
        )  # fmt: skip
        if must:
            ts = np.asarray(traj.ts[0])
            expected = theta0[:, None] + mu * ts[None, :, None, None]
            assert traj.status_name.tolist() == ["ok"] * n
            np.testing.assert_allclose(np.asarray(traj.thetas), expected, rtol=1e-12)

    run_cases(valid, hostile, body)


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
    from flows import _diffrax, _many, _scipy

    def stop(*args, **kwargs):
        raise Solved(*args)

    def stop_engine(method, values, data, theta0, *, ts, t1, options, **kwargs):
        t1 = np.asarray(t1, float)  # one per run: well posed when every one is
        ok = np.all((t1 > 0) & np.isfinite(t1))
        raise Solved(method, theta0, ts, float(np.max(t1)) if ok else np.nan, options)

    for backend in (_diffrax, _scipy):
        for name in ("solve_smooth", "solve_filippov"):
            monkeypatch.setattr(backend, name, stop)
    for module in (_many, analysis._drive):
        monkeypatch.setattr(module, "engine_run", stop_engine)


SOLVE_KEYS = "theta0 t1 rtol atol max_steps collapse_tol escape_tol loss_tol loss solver".split()
SOLVE_KEYS += ["rescaled", "dense"]


# Known-valid values of each argument of solve (the call must reach the integrator with them).
VALID_SOLVE = {
    "theta0": [THETA, 2 * THETA],
    "t1": [0.5, 3.0],
    "rtol": [1e-6, 1e-10],
    "atol": [1e-9, 1e-12],
    "max_steps": [100, 10_000],
    "collapse_tol": [1e-3, None],
    "escape_tol": [1e3, None],
    "loss_tol": [1e-3, None],
    "loss": ["logistic", "exponential"],
    "solver": ["tsit5", "dopri5"],
    "rescaled": [True, False],
    "dense": [True, False],
}
assert set(VALID_SOLVE) == set(SOLVE_KEYS)


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


def test_solve_refuses_or_accepts_each_argument(no_integration):
    """Every argument of solve but ``ts`` and ``backend`` (issue 15, solver layer: a ``ts``
    of the wrong type gets numpy's conversion error, an array ``backend`` numpy's
    truth-value error; flows/_solve.py is being restructured under issue 11). A known-valid
    value reaches the integrator with θ₀, t1 and the solver's tolerances as given."""

    def arguments(key, value):
        kwargs = dict(t1=1.0, rescaled=True) | ({} if key == "theta0" else {key: value})
        return (value if key == "theta0" else THETA), kwargs

    def call(key, value):
        theta0, kwargs = arguments(key, value)
        return flows.solve(flows.L2SAM(0.3), DATA, theta0, **kwargs)

    def check(key, value, solved):
        theta0, kwargs = arguments(key, value)
        _, got_theta0, _, t1, options = solved.args
        np.testing.assert_array_equal(np.asarray(got_theta0), np.asarray(theta0))
        assert float(t1) == kwargs["t1"]
        if key in ("rtol", "atol", "max_steps", "dense"):
            assert getattr(options, key) == value, (key, options)

    hostile = st.one_of(
        numbers, wrong_types, any_value((2, 3)), st.booleans(),
        st.sampled_from(["LSODA", "tsit5", "auto"]),
    )  # fmt: skip
    each_argument(VALID_SOLVE, hostile, call, check)


# --- analysis -----------------------------------------------------------------------------


@CI
@given(exponent=exponents, seed=st.integers(0, 2**16))
def test_max_margin_scale_twins(exponent, seed):
    """max_margin(λX) = max_margin(X) for λ = 10^e, e in [-150, 150] (the direction)."""
    rng = np.random.default_rng(seed)
    w = np.abs(rng.normal(size=3)) + 0.1
    X = rng.normal(size=(5, 3))
    y = np.where(X @ w >= 0, 1.0, -1.0)
    X += 0.3 * y[:, None] * w / np.linalg.norm(w)
    base = flows.Dataset(X, y)
    scaled = flows.Dataset(10.0**exponent * X, y)
    for p, tol in ((1, 1e-7), (2, 1e-6)):
        np.testing.assert_allclose(
            analysis.max_margin(scaled, p), analysis.max_margin(base, p), atol=tol
        )


@CI
@given(
    exponent=st.floats(-100.0, 100.0),
    mu=st.lists(st.floats(0.1, 10.0), min_size=2, max_size=4, unique=True),
)
def test_l2sam_thresholds_are_rays(exponent, mu):
    """The sympy thresholds are linear in ρ (α = kρ rays, docs/theory.md §6)."""
    lam = 10.0**exponent
    t1, tl = analysis.l2sam_thresholds(mu, 1.0), analysis.l2sam_thresholds(mu, lam)
    np.testing.assert_allclose(np.array(tl) / lam, np.array(t1), rtol=1e-12)


REGIME_KEYS = (
    "mu alpha depth t1 max_passes rtol atol loss max_steps collapse_tol escape_tol".split()
)


VALID_REGIME = {
    "mu": [[1.0, 2.0, 3.0], [0.5, 4.0]],
    "alpha": [0.5, 2.0],
    "depth": [2, 3],
    "t1": [10.0, 1e3],
    "max_passes": [1, 3],
    "rtol": [1e-8, 1e-10],
    "atol": [None, 1e-12],
    "loss": ["logistic", "exponential"],
    "max_steps": [1000, 100_000],
    "collapse_tol": [1e-6, 1e-3],
    "escape_tol": [1e6, 1e3],
}
assert set(VALID_REGIME) == set(REGIME_KEYS)


def test_regime_path_refuses_before_solving(no_integration):
    """A hostile value is refused before solving; a known-valid one reaches the solver."""

    def call(key, value):
        args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0, 3.0], alpha=0.5) | {key: value}
        path = analysis.regime_path(**args)
        if path.t_end == 0.0 and path.restarts == 0:  # the start's certificates decided it
            raise Solved()  # (pass 0: exact facts of the validated start, nothing to solve)
        return path

    hostile = st.one_of(numbers, wrong_types, any_value((3,)), st.integers(-3, 3))
    each_argument(VALID_REGIME, hostile, call)


BOUNDARY_KEYS = "mu rtol points bracket scan max_steps atol depth".split()
BOUNDARY_KEYS += ["max_passes", "collapse_tol", "escape_tol", "loss"]


VALID_BOUNDARY = {
    "mu": [np.arange(1.0, 8.0), np.arange(2.0, 9.0)],
    "rtol": [1e-6, 1e-10],
    "points": [9, 17],
    "bracket": [(0.1, 2.0), (0.01, 10.0)],
    "scan": [4, 8],
    "max_steps": [12_346, 54_321],
    "atol": [1e-12, 1e-20],
    "depth": [2, 3],
    "max_passes": [1, 3],
    "collapse_tol": [1e-6, 1e-3],
    "escape_tol": [1e6, 1e3],
    "loss": ["logistic", "exponential"],
}
assert set(VALID_BOUNDARY) == set(BOUNDARY_KEYS)


def test_critical_alpha_refuses_before_solving(no_integration):
    """A hostile value is refused before solving; a known-valid one reaches the solver."""

    def call(key, value):
        # d = 7 and max_steps = 12_345: a configuration no other test compiles, so that
        # the vmapped batch is traced here and reaches the patched integrator.
        args = dict(mu=np.arange(1.0, 8.0), max_steps=12_345) | {key: value}
        return analysis.critical_alpha(flows.L2SAM(1.0), **args)

    hostile = st.one_of(numbers, wrong_types, any_value((2,)), st.integers(-3, 3))
    each_argument(VALID_BOUNDARY, hostile, call)


# --- every public callable: each argument, one at a time, bad or extreme --------------------
#
# One table row per public function of ``flows`` and ``analysis`` (the constructors and
# functions above have their own, finer properties). ``base`` is a valid call; each example
# replaces one argument by a generated value. Rows whose valid call integrates run under
# ``no_integration`` (and ``flows.sweep`` is patched out for those that sweep), so every
# example ends before any solve: either a named error or the patched integrator.


def _solved_traj():
    """A short finished GD solve (dense), the trajectory the trajectory functions take."""
    return flows.solve(flows.GD(), DATA, THETA, t1=0.5, rescaled=True, dense=True)


TRAJ = _solved_traj()
#: A plain GD solve saved at three times (real time = its clock).
PLAIN_TRAJ = flows.solve(flows.GD(), DATA, THETA, t1=0.5, ts=[0.0, 0.25, 0.5])
PROBLEM = analysis.Problem(flows.GD(), DATA, THETA, 0.5, rescaled=True)
MU = [1.0, 2.0, 3.0]


def _family(p):
    return flows.L2SAM(1.0), p


def _sweep_fn(a):
    return {"y": 2.0 * a}


# (name, call, base keyword arguments, keys to perturb, integrates)
REGRESSION_DATA = flows.Dataset(
    np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]), np.array([1.0, -0.5]), regression=True
)
PUBLIC = [
    ("flows.USAM", flows.USAM, dict(rho=0.1), ["rho"], 0),
    ("flows.OneSAM", flows.OneSAM, dict(rho=0.1, convention="reference"), ["rho", "convention"], 0),
    (
        "analysis.kernel_rich_limit",
        analysis.kernel_rich_limit,
        dict(data=REGRESSION_DATA, alpha=0.5, model="uv"),
        ["data", "alpha", "model", "rtol", "max_iter"],
        0,
    ),
    (
        "flows.SweepOptions",
        flows.SweepOptions,
        dict(chunk_size=8, workers=1),
        "order chunk_size max_chunk memory_budget devices workers executor compile_cache".split(),
        0,
    ),
    (
        "analysis.margin_gradient_norm",
        analysis.margin_gradient_norm,
        dict(traj=TRAJ, data=DATA),
        ["traj", "data"],
        0,
    ),
    (
        "analysis.RunOptions",
        analysis.RunOptions,
        dict(rtol=1e-9, max_steps=2048),
        "rtol atol max_steps max_passes collapse_tol escape_tol loss n_grid max_switches".split(),
        0,
    ),
    ("flows.log_speed", flows.log_speed, dict(loss="logistic", z=[0.5, -1.0]), ["loss", "z"], 0),
    (
        "flows.margins",
        flows.margins,
        dict(theta=THETA, data=DATA),
        ["theta", "data"],
        0,
    ),
    (
        "flows.sweep",
        flows.sweep,
        dict(fn=_sweep_fn, params={"a": [1.0, 2.0]}, progress=False, compile_cache=False),
        "fn params static product order chunk_size max_chunk memory_budget config seed "
        "workers".split(),
        0,
    ),
    (
        "flows.SolverOptions",
        flows.SolverOptions,
        dict(),
        "backend solver rtol atol max_steps collapse_tol escape_tol loss_tol dense "
        "real_time".split(),
        0,
    ),
    ("flows.Status.name", flows.Status.name, dict(code=2), ["code"], 0),
    ("flows.load_sweep", flows.load_sweep, dict(path="/nonexistent/sweep"), ["path"], 0),
    (
        "analysis.l2sam_thresholds",
        analysis.l2sam_thresholds,
        dict(mu=MU, rho=1.0),
        ["mu", "rho"],
        0,
    ),
    (
        "analysis.certificate",
        analysis.certificate,
        dict(theta=THETA, mu=MU, bound=0.1),
        ["theta", "mu", "bound", "trapped"],
        0,
    ),
    (
        "analysis.limit_leader",
        analysis.limit_leader,
        dict(method=flows.LinfSAM(0.1), mu=MU, alpha=0.5, depth=2),
        ["method", "mu", "alpha", "depth"],
        0,
    ),
    (
        "analysis.linf_tie",
        analysis.linf_tie,
        dict(method=flows.LinfSAM(0.1), mu=MU, alpha_k=0.5, depth=3, k=0, j=1),
        ["method", "mu", "alpha_k", "depth", "k", "j"],
        0,
    ),
    (
        "analysis.perturbation_bound",
        analysis.perturbation_bound,
        dict(method=flows.LinfSAM(0.1)),
        ["method"],
        0,
    ),
    ("analysis.clock_grid", analysis.clock_grid, dict(t_end=1.0, n=8), ["t_end", "n", "first"], 0),
    ("analysis.norm_clock", analysis.norm_clock, dict(traj=TRAJ, n=8), ["traj", "n", "first"], 0),
    ("analysis.dominant_index", analysis.dominant_index, dict(traj=TRAJ), ["traj", "tie_rtol"], 0),
    (
        "analysis.fastest_growing_index",
        analysis.fastest_growing_index,
        dict(traj=TRAJ, problem=PROBLEM),
        ["traj", "problem"],
        0,
    ),
    ("analysis.log_abs_beta", analysis.log_abs_beta, dict(theta=THETA), ["theta"], 0),
    ("analysis.dominant_at", analysis.dominant_at, dict(theta=THETA), ["theta"], 0),
    (
        "analysis.switch_times",
        analysis.switch_times,
        dict(traj_or_problem=TRAJ),
        ["traj_or_problem", "samples_per_step", "max_depth"],
        0,
    ),
    (
        "analysis.convergence_order",
        analysis.convergence_order,
        dict(steps=[0.1, 0.05, 0.025], errors=[1e-2, 2.5e-3, 6.25e-4]),
        ["steps", "errors"],
        0,
    ),
    (
        "analysis.log_law",
        analysis.log_law,
        dict(x=[1e-3, 1e-2, 1e-1], y=[7.0, 5.0, 3.0]),
        ["x", "y"],
        0,
    ),
    (
        "analysis.convergence_rate",
        analysis.convergence_rate,
        dict(traj=TRAJ, direction=[0.0, 0.0, 1.0]),
        ["traj", "direction", "model", "tail"],
        0,
    ),
    (
        "analysis.direction_cosine",
        analysis.direction_cosine,
        dict(traj=TRAJ, direction=[0.0, 0.0, 1.0]),
        ["traj", "direction"],
        0,
    ),
    (
        "analysis.limit_class",
        analysis.limit_class,
        dict(status=int(flows.Status.ESCAPED), beta=[0.0, 0.0, 1.0]),
        ["status", "beta"],
        0,
    ),
    ("analysis.limit_direction", analysis.limit_direction, dict(traj=TRAJ), ["traj"], 0),
    ("analysis.max_margin", analysis.max_margin, dict(data=DATA, p=2), ["data", "p"], 0),
    ("analysis.loss_plateau", analysis.loss_plateau, dict(traj=TRAJ), ["traj", "band"], 0),
    (
        "analysis.sharpness",
        analysis.sharpness,
        dict(traj=TRAJ, data=DATA),
        ["traj", "data", "loss"],
        0,
    ),
    (
        "analysis.lesam_radius",
        analysis.lesam_radius,
        dict(traj=PLAIN_TRAJ, data=DATA, method=flows.LESAM(0.35, 0.3)),
        ["traj", "data", "method", "loss", "until"],
        0,
    ),
    (
        "analysis.at_loss",
        analysis.at_loss,
        dict(loss=[1.0, 0.1, 0.01], values=[2.0, 0.2, 0.02], levels=[0.5]),
        ["loss", "values", "levels"],
        0,
    ),
    (
        "analysis.regime_code",
        analysis.regime_code,
        dict(collapsed=False, settled=True, leader=2, visited_other=False, target=2, first=2),
        ["collapsed", "settled", "leader", "visited_other", "target", "first"],
        0,
    ),
    (
        "analysis.Problem",
        analysis.Problem,
        dict(
            method=flows.GD(),
            data=DATA,
            theta0=THETA,
            t1=1.0,
            rescaled=True,
            loss="logistic",
            options=flows.SolverOptions(),
        ),
        ["method", "data", "theta0", "t1", "rescaled", "loss", "options"],
        0,
    ),
    (
        "analysis.regime",
        analysis.regime,
        dict(method=flows.L2SAM(1.0), mu=MU, alpha=0.5),
        ["method", "mu", "alpha", "depth"],
        1,
    ),
    (
        "analysis.boundary",
        analysis.boundary,
        dict(family=_family, mu=MU, bracket=(0.1, 1.0)),
        "family mu depth bracket kind rtol points log max_steps collapse_tol escape_tol loss "
        "atol max_passes".split(),
        1,
    ),
    (
        "analysis.direct_alpha",
        analysis.direct_alpha,
        dict(method=flows.L2SAM(1.0), mu=MU),
        ["method", "mu", "depth", "bracket", "scan", "full_output"],
        1,
    ),
    (
        "analysis.limit_map",
        analysis.limit_map,
        dict(method=flows.LinfSAM(0.1), mu=MU, alphas=[[0.5, 1.0], [0.5], [0.5]], progress=False),
        "method mu alphas depth loss collapse_tol escape_tol rtol atol max_steps "
        "max_passes".split(),
        1,
    ),
    (
        "analysis.phase_diagram",
        analysis.phase_diagram,
        dict(method=flows.L2SAM(1.0), mu=MU, alpha=[0.5, 1.0], rho=[0.5, 1.0], progress=False),
        "method mu alpha rho sigma rho_max depth loss collapse_tol escape_tol rtol atol "
        "max_steps max_passes n_grid max_switches".split(),
        1,
    ),
]

# Documented NaN results: convergence_order and log_law are NaN with fewer than two usable
# points, at_loss at a level outside the run's losses.
NAN_DOCUMENTED = {"analysis.convergence_order", "analysis.log_law", "analysis.at_loss"}

hostile = st.one_of(
    numbers,
    wrong_types,
    any_value((3,)),
    any_value((2, 3)),
    st.integers(-3, 3),
    st.booleans(),
    st.sampled_from(["logistic", "l2", "auto", "", "/"]),
    st.sampled_from([flows.GD(), DATA]),
)


def _nan_free(result):
    """No NaN in any numeric leaf of ``result`` (a dataclass, tuple, dict or array)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return all(_nan_free(getattr(result, f.name)) for f in dataclasses.fields(result))
    if isinstance(result, dict):
        return all(_nan_free(v) for v in result.values())
    if isinstance(result, (tuple, list)):
        return all(_nan_free(v) for v in result)
    try:
        arr = np.asarray(result)
    except Exception:
        return True
    return arr.dtype.kind not in "fc" or not bool(np.any(np.isnan(arr)))


@pytest.fixture
def no_sweep(monkeypatch):
    """``flows.sweep`` (as the analysis sweeps call it) raises ``Solved``."""

    def stop(*args, **kwargs):
        raise Solved

    monkeypatch.setattr(flows, "sweep", stop)


_Q = 1 / (np.sqrt(2.0) * np.linalg.norm(MU))
# The value of each row's valid (base) call, where a closed form gives it.
BASE_VALUES = {
    "flows.log_speed": lambda r: np.allclose(r, np.log(scipy.special.expit([-0.5, 1.0])), 0, 1e-14),
    "flows.margins": lambda r: np.allclose(r, [1.5], rtol=1e-15),  # Σ_j μ_j 0.5², μ = (1, 2, 3)
    "flows.Status.name": lambda r: r == "escaped",
    "analysis.l2sam_thresholds": lambda r: np.allclose(tuple(r), [_Q, 3 * _Q, 5 * _Q], rtol=1e-14),
    "analysis.limit_leader": lambda r: int(r) == 2,  # α > ρ, L = 2: the largest rate μ_3
    "analysis.log_abs_beta": lambda r: np.allclose(r, np.log(0.25), rtol=1e-15),
    "analysis.convergence_order": lambda r: abs(float(r) - 2.0) < 1e-12,  # errors ∝ h²
    # y = 1 − 2 log10 x exactly
    "analysis.log_law": lambda r: np.allclose(tuple(r), (-2.0, 1.0), rtol=0, atol=1e-12),
    "analysis.max_margin": lambda r: np.allclose(r, np.array(MU) / np.linalg.norm(MU), 0, 1e-6),
    "analysis.regime_code": lambda r: analysis.REGIMES[int(r)] == "direct",
    "analysis.clock_grid": lambda r: len(r) == 8 and r[0] == 0 and r[-1] == 1,
    "analysis.at_loss": lambda r: np.allclose(r, [1.0], rtol=1e-14),  # v = 2L at L = 0.5
}
# Hostile draws only: load_sweep's base path does not exist; the base TRAJ has one saved time,
# too few for convergence_rate's fit.
NO_VALID_BASE = {"flows.load_sweep", "analysis.convergence_rate"}


@pytest.mark.parametrize("row", PUBLIC, ids=[r[0] for r in PUBLIC])
def test_every_public_callable(row, no_integration, no_sweep):
    """Each argument replaced by a hostile value: a named error, or (no integration) a
    NaN-free result; for rows that integrate, the call must stop at the patched solver. About
    half the draws are the row's valid base call: it must succeed (reach the solver), with the
    closed-form value of ``BASE_VALUES`` where there is one."""
    name, fn, base, keys, integrates = row
    tally = Tally()

    @settings(CI, max_examples=12)
    @given(data=st.data())
    def prop(data):
        must = name not in NO_VALID_BASE and data.draw(st.booleans(), label="valid")
        key = data.draw(st.sampled_from(keys), label="key")
        value = base[key] if must and key in base else data.draw(hostile, label="value")
        kwargs = base if must else base | {key: value}
        if integrates:
            refused_or_integrated(lambda: fn(**kwargs), key, must=must, tally=tally)
            return
        try:
            ok, result = tally.outcome(lambda: fn(**kwargs), must, key)
        except Solved:
            raise AssertionError(f"{name} integrates; mark its row") from None
        if ok and name not in NAN_DOCUMENTED:  # NaN in, NaN out; no NaN from NaN-free input
            bad = f"{name}({key}={value!r}): {result!r}"
            assert _nan_free(result) or not _nan_free(value), bad
        if must and name in BASE_VALUES:
            assert BASE_VALUES[name](result), (name, result)

    prop()
    tally.check(0 if name in NO_VALID_BASE else 1)


# Public callables with a property of their own above, or that take no user input.
COVERED_ABOVE = {
    "flows.L2SAM": test_l2sam_constructor,
    "flows.LinfSAM": test_linfsam_constructor,
    "flows.LESAM": test_lesam_constructor,
    "flows.Dataset": test_dataset_constructor,
    "flows.single_example": test_single_example,
    "flows.balanced_init": test_balanced_init,
    "flows.beta": test_beta_is_exact_or_exact_overflow,
    "flows.objective": test_objective_and_margins,
    "flows.loss_fn": test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.loss_derivative": test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.velocity": test_velocity_named_error_or_finite,
    "flows.rescaled_velocity": test_velocity_named_error_or_finite,
    "flows.iterate": test_iterate_arguments,
    "flows.solve_many": test_solve_many_arguments,
    "flows.solve": test_solve_refuses_or_accepts_each_argument,
    "analysis.regime_path": test_regime_path_refuses_before_solving,
    "analysis.critical_alpha": test_critical_alpha_refuses_before_solving,
    # the regression setting's starts and predictions: their refusals and values
    "flows.product_init": "test_regression.test_bad_input_names_the_argument",
    "flows.predictions": "test_regression.test_squared_loss_and_its_field_match_the_formulas",
    # its keywords' refusals: tests/test_config.py (configure changes process-wide settings)
    "flows.configure": "test_config.test_configure_refuses_keywords_of_the_wrong_type",
}
NO_USER_INPUT = {
    "flows.AbstractMethod": "abstract base of the methods",
    "flows.GD": "no arguments",
    # result containers, built by the functions that return them
    **dict.fromkeys(
        ["flows.Trajectory", "flows.DenseOutput", "flows.SweepResult", "flows.Status"]
        + [
            f"analysis.{n}"
            for n in "Boundary Clock L2SAMThresholds LimitMap LogLaw Plateau Radius Rate "
            "RegimePath "
            "Sharpness Switches".split()
        ],
        "a result container",
    ),
}


def test_every_public_callable_is_covered():
    """A new public function without a row (or a property above) fails here."""
    public = {
        f"{mod.__name__}.{n}"
        for mod in (flows, analysis)
        for n in dir(mod)
        if not n.startswith("_") and callable(getattr(mod, n))
    }
    covered = {row[0] for row in PUBLIC} | set(COVERED_ABOVE) | set(NO_USER_INPUT)
    assert public - covered == set()
