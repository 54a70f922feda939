"""The methods of flows._methods under hostile input: the constructors and the perturbations.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import flows
from tests.helpers import numpy_perturbation
from tests.properties import (
    CI,
    THETA,
    any_value,
    arrays,
    concrete_finite,
    finite,
    magnitudes,
    nonneg,
    numbers,
    run_cases,
    wide_exponents,
    wrong_types,
)

# --- constructors -------------------------------------------------------------------------

# A gradient with ‖g‖ = √50 and rows of norm 5: the perturbations of the constructed methods
# against tests.helpers.numpy_perturbation.
G2 = np.array([[3.0, 0.0, -4.0], [0.0, 5.0, 0.0]])


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
