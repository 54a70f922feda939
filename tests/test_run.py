"""analysis._run's pass policy: what a start alone decides (docs/theory.md's claim C2 for exact
ℓ∞-SAM), and each pass's thresholds, fixed by the run's first start."""

import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from analysis._run import start_code, thresholds

MU = [1.0, 2.0, 3.0]
DATA = flows.single_example(MU)


def _regime(method, alpha, depth, need="escape"):
    code = int(start_code(method, DATA, flows.balanced_init(alpha, depth, len(MU)), need=need))
    return None if code < 0 else analysis.REGIMES[code]


@pytest.mark.parametrize("depth", [2, 3, 4, 5, 8])
def test_exact_linf_sam_is_decided_by_its_start(depth):
    """C2: from α < ρ every coordinate is trapped: a collapse at even L, a stall at odd L; from
    α > ρ the start is certified to escape."""
    below = _regime(flows.LinfSAM(1.0), 0.5, depth)
    assert below == ("collapse" if depth % 2 == 0 else "stalled")
    assert _regime(flows.LinfSAM(1.0), 2.0, depth) not in (None, "collapse", "stalled")


def test_a_start_the_certificates_do_not_settle_is_left_to_the_passes():
    """ℓ2-SAM below its perturbation bound (α = 0.5 < ρ = 1) at L = 2 can still go either way."""
    assert _regime(flows.L2SAM(1.0), 0.5, 2) is None
    # at L = 1 (dw/dτ = μ) every start escapes
    assert _regime(flows.L2SAM(1.0), 0.5, 1) not in (None, "collapse", "stalled")


THETA0 = jnp.asarray(flows.balanced_init(0.5, 3, len(MU)))


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e100])
def test_each_pass_thresholds_are_fixed_by_the_runs_first_start(scale):
    """collapse_tol and the escape levels e^{k+1}‖θ₀‖ are relative to the FIRST start θ₀; a pass
    from θ gets them relative to θ (at any magnitude of θ₀: the scaled norm)."""
    options = analysis.RunOptions(collapse_tol=1e-6, escape_tol=10.0)
    theta0 = scale * THETA0
    bound = analysis.perturbation_bound(flows.L2SAM(1.0))

    def of(factor, level):
        t1, collapse, escape = thresholds(
            options, theta0, factor * theta0, bound, jnp.asarray(MU), 0, level, t1=7.0
        )
        assert float(t1) == 7.0  # a given budget is kept
        return float(collapse), float(escape)

    np.testing.assert_allclose(of(1.0, 0), (1e-6, 10.0), rtol=1e-12)
    np.testing.assert_allclose(of(0.01, 0), (1e-4, 1e3), rtol=1e-12)
    np.testing.assert_allclose(of(5.0, 1), (2e-7, 20.0), rtol=1e-12)  # level 1: 100 ‖θ₀‖
    # a state already past its threshold: just inside (0, 1) and just above 1
    assert of(1e-7, 0)[0] == np.nextafter(1.0, 0.0)
    assert of(200.0, 1)[1] == np.nextafter(1.0, 2.0)


def test_a_lingering_run_gets_geometrically_longer_budgets():
    """The default τ budget after k passes that spent theirs is 10^k times the first."""
    options = analysis.RunOptions()
    bound = analysis.perturbation_bound(flows.L2SAM(1.0))
    budgets = [
        float(thresholds(options, THETA0, THETA0, bound, jnp.asarray(MU), k, 0)[0])
        for k in range(4)
    ]
    np.testing.assert_allclose(np.array(budgets[1:]) / budgets[:-1], 10.0, rtol=1e-14)
