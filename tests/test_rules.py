"""flows._rules: each perturbation rule, written once, against its closed form, in both namespaces
(JAX arrays and the engine's numba scalars)."""

import math

import numba
import numpy as np
import pytest

from flows import _rules

# g = (3, -4): ‖g‖ = 5 and u = g/‖g‖ = (0.6, -0.8); grad_scale s = 2.
G = np.array([3.0, -4.0])
U = np.array([0.6, -0.8])
NORM, SCALE = 5.0, 2.0
# (rule, its parameters (rho, delta, sigma, rho_max, eps), ε worked out by hand from the table)
CASES = [
    ("GD", (0.5, 1.0, 0.0, 0.0, 1e-12), [0.0, 0.0]),
    ("L2", (0.5, 1.0, 0.0, 0.0, 1e-12), [0.3, -0.4]),
    ("LINF_SMOOTH", (0.2, 1.0, 0.0, 0.0, 1e-12), [0.2 * math.tanh(3.0), 0.2 * math.tanh(-4.0)]),
    # σ/(s‖g‖ + ϱ) = 1/10 below ρ_max = 1: 0.1 u
    ("LE", (0.0, 1.0, 1.0, 1.0, 0.0), [0.06, -0.08]),
    # the same with ρ_max = 0.05: capped, 0.05 u
    ("LE", (0.0, 1.0, 1.0, 0.05, 0.0), [0.03, -0.04]),
    # ρ s g = 0.1 · 2 · (3, -4)
    ("UNNORMALISED", (0.1, 1.0, 0.0, 0.0, 1e-12), [0.6, -0.8]),
]


@pytest.mark.parametrize(("rule", "params", "expected"), CASES)
def test_each_rule_is_its_closed_form_in_numpy_and_jax(rule, params, expected):
    kind = getattr(_rules, rule)
    for fn in (_rules.epsilon, _rules.jax_epsilon):
        got = np.broadcast_to(np.asarray(fn(kind, G, U, NORM, SCALE, *params)), (2,))
        np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-300)


_numba_epsilon = numba.njit(_rules.numba_epsilon)


@pytest.mark.parametrize(("rule", "params", "expected"), CASES)
def test_the_engines_compiled_rule_is_the_same_code_on_scalars(rule, params, expected):
    kind = getattr(_rules, rule)
    got = [_numba_epsilon(kind, G[j], U[j], NORM, SCALE, *params) for j in range(2)]
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-300)


def test_the_rule_parameters_have_one_sign_each():
    assert set(_rules.SIGNS) == set(_rules.PARAMS)
    assert set(_rules.SIGNS.values()) <= {"positive", "nonnegative"}
    assert len({_rules.GD, _rules.L2, _rules.LINF_SMOOTH, _rules.LE, _rules.UNNORMALISED}) == 5
