"""flows.solve (flows._solve): every bad argument is refused before integrating.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
from hypothesis import strategies as st

import flows
from tests.properties import (
    DATA,
    THETA,
    any_value,
    each_argument,
    no_integration,  # noqa: F401 (a fixture)
    numbers,
    wrong_types,
)

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



def test_solve_refuses_or_accepts_each_argument(no_integration):  # noqa: F811 (the fixture)
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
