"""The analysis under hostile input: scale twins, and refusals before solving.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import analysis
import flows
from tests.properties import (
    CI,
    Solved,
    any_value,
    each_argument,
    exponents,
    no_integration,  # noqa: F401 (a fixture)
    numbers,
    wrong_types,
)

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


def test_regime_path_refuses_before_solving(no_integration):  # noqa: F811 (the fixture)
    """A hostile value is refused before solving; a known-valid one reaches the solver."""

    def call(key, value):
        args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0, 3.0], alpha=0.5) | {key: value}
        path = analysis.regime_path(**args)
        if path.t_end == 0.0 and path.restarts == 0:  # the start's certificates decided it
            raise Solved()  # (pass 0: exact facts of the validated start, nothing to solve)
        return path

    hostile = st.one_of(numbers, wrong_types, any_value((3,)), st.integers(-3, 3))
    each_argument(VALID_REGIME, hostile, call)


BOUNDARY_KEYS = "mu bracket_rtol points bracket scan max_steps atol depth".split()
BOUNDARY_KEYS += ["max_passes", "collapse_tol", "escape_tol", "loss"]


VALID_BOUNDARY = {
    "mu": [np.arange(1.0, 8.0), np.arange(2.0, 9.0)],
    "bracket_rtol": [1e-6, 1e-10],
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


def test_critical_alpha_refuses_before_solving(no_integration):  # noqa: F811 (the fixture)
    """A hostile value is refused before solving; a known-valid one reaches the solver."""

    def call(key, value):
        # d = 7 and max_steps = 12_345: a configuration no other test compiles, so that
        # the vmapped batch is traced here and reaches the patched integrator.
        args = dict(mu=np.arange(1.0, 8.0), max_steps=12_345) | {key: value}
        return analysis.critical_alpha(flows.L2SAM(1.0), **args)

    hostile = st.one_of(numbers, wrong_types, any_value((2,)), st.integers(-3, 3))
    each_argument(VALID_BOUNDARY, hostile, call)
