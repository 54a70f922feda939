"""flows.solve_many (flows._many) under hostile input.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import numpy as np
from hypothesis import strategies as st

import flows
from tests.properties import DATA, numbers, run_cases, wrong_types


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
