r"""An LE-SAM schedule that equals a constant gets the constant's answer.

Expected values: the same analysis with the constant σ (``flows.LESAM(σ, ρ_max)``, which
reads no clock), whose regimes, j† sequences, switch times and α_c the independent audits
of the run layer confirmed. The certificates bound the perturbation by ρ_max whatever σ(t)
does (docs/theory.md §5, §12), so a schedule that stays at σ, or turns NaN only after the
run is settled, must be decided as the constant is.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from analysis import _regime

MU = [1.0, 2.0, 3.0]


def _constant_schedule(sigma):
    return lambda t: sigma + 0 * t  # NaN at t = inf, where the clock past its cap reads it


@pytest.mark.parametrize(
    "sigma, rho_max, alpha, depth",
    [(0.5, 0.3, 0.2, 2), (2.0, 0.5, 0.4, 2), (0.01, 0.3, 0.3, 2), (0.0, 0.3, 0.3, 2),
     (0.5, 0.3, 0.5, 3)],
)  # fmt: skip
def test_a_schedule_equal_to_a_constant_gets_the_constants_path(sigma, rho_max, alpha, depth):
    const = analysis.regime_path(flows.LESAM(sigma, rho_max), MU, alpha, depth)
    sched = analysis.regime_path(
        flows.LESAM(_constant_schedule(sigma), rho_max), MU, alpha, depth
    )
    assert const.regime != "undetermined"
    assert sched.regime == const.regime
    assert sched.sequence == const.sequence
    np.testing.assert_allclose(sched.times, const.times, rtol=0, atol=1e-9)


def test_a_schedule_that_turns_nan_after_the_run_settled_is_decided():
    # 0.5 + 0·exp(t/2000) is 0.5 until exp overflows at t ≈ 1.42e6 (past the check at the
    # budget t1 = 1e6), where the real clock is reached after the switch: the last finite
    # state is settled, so the run is the constant's (sequential, j† = 1 -> 2)
    method = flows.LESAM(lambda t: 0.5 + 0 * jnp.exp(t / 2000), 0.3)
    sched = analysis.regime_path(method, MU, 0.2)
    const = analysis.regime_path(flows.LESAM(0.5, 0.3), MU, 0.2)
    assert sched.status == "nonfinite"  # the schedule did fail the solve
    assert (sched.regime, sched.sequence) == (const.regime, const.sequence) == (
        "sequential", [1, 2])
    np.testing.assert_allclose(sched.times, const.times, rtol=0, atol=1e-9)


def test_critical_alpha_of_a_schedule_equal_to_a_constant_is_the_constants():
    kw = dict(bracket=(0.05, 0.3), bracket_rtol=1e-10)
    ref = analysis.critical_alpha(flows.LESAM(0.5, 0.3), MU, 2, **kw)
    got = analysis.critical_alpha(flows.LESAM(_constant_schedule(0.5), 0.3), MU, 2, **kw)
    assert 0.05 < ref < 0.3
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_a_clock_past_its_cap_reads_the_schedules_limit():
    method = flows.LESAM(_constant_schedule(0.5), 0.3)
    assert float(method.rule_sigma(jnp.inf)) == 0.5
    assert float(method.started_at(jnp.inf).rule_sigma(0.0)) == 0.5
    assert float(method.schedule_margin(jnp.inf)) > 0
    decaying = flows.LESAM(lambda t: 0.5 * jnp.exp(-t), 0.3)
    assert float(decaying.rule_sigma(jnp.inf)) == 0.0


def _decide(status, **facts):
    base = dict(escaped=False, settled=False, leader=0, intact=True, theorem_leader=-1,
                visited_other=False, first=0, target=2, need="path")  # fmt: skip
    return int(_regime.decide(status, **{**base, **facts}))


def test_decide_reads_the_facts_of_a_failed_solves_last_state():
    settled = dict(escaped=True, settled=True, leader=2, first=0, visited_other=True)
    ok = _decide(flows.Status.OK, **settled)
    assert ok == _regime.SEQUENTIAL  # first 0, leader 2 = target: sequential
    assert _decide(flows.Status.NONFINITE, **settled) == ok
    assert _decide(flows.Status.NONFINITE) == _regime.UNDETERMINED
    assert _decide(flows.Status.OK) == -1  # continued
    assert _decide(flows.Status.SIGMA_NEGATIVE, **settled) == _regime.UNDETERMINED
    assert _decide(flows.Status.COLLAPSED, **settled) == _regime.COLLAPSE
    # precedence (decide's docstring): 'stalled' before the shortcut of `need`
    assert _decide(flows.Status.OK, escaped=True, stalled=True, need="escape") == _regime.STALLED
    assert _decide(flows.Status.OK, escaped=True, need="escape") == _regime.SEQUENTIAL


def test_an_undetermined_schedule_says_why():
    # σ(t) = 0.5 - t falls below 0 at the real time 0.5, long before the run from α = 0.2 is
    # decided (the constant σ = 0.5 switches at τ ≈ 10): LE-SAM's radius is undefined there
    r = analysis.regime_path(flows.LESAM(lambda t: 0.5 - t, 0.3), MU, 0.2)
    assert (r.regime, r.status) == ("undetermined", "sigma_negative")
    assert "sigma(t) fell below 0" in r.reason
    assert analysis.regime_path(flows.LESAM(0.5, 0.3), MU, 0.2).reason == ""
