"""The fields of flows._dynamics under hostile input, and their scale twins.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import flows
from tests.helpers import numpy_logistic_grad, numpy_perturbation
from tests.properties import (
    CI,
    DATA,
    METHODS,
    THETA,
    any_value,
    concrete_finite,
    finite,
    finite_arrays,
    numbers,
    run_cases,
    wide_exponents,
    wrong_types,
)

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
