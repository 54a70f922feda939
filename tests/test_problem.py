"""flows._problem under hostile input: the data, the starts, β, the objective and the losses.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
import scipy.special
from hypothesis import strategies as st

import flows
from tests.properties import (
    DATA,
    any_value,
    concrete_finite,
    finite,
    finite_arrays,
    magnitudes,
    numbers,
    pm_ones,
    run_cases,
    signed,
    wrong_types,
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
