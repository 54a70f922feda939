"""flows.iterate (flows._iterate) under hostile input.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
from hypothesis import strategies as st

import flows
from tests.helpers import numpy_iterate
from tests.properties import (
    DATA,
    METHODS,
    THETA,
    finite,
    magnitudes,
    numbers,
    run_cases,
    specials,
    wrong_types,
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
