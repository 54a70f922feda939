"""One named error, raised before any work, for inputs the package cannot honour.

Each case is refused at the public edge with a ``ValueError`` (or its subclass
``WrongTypeError``) whose message names the argument at fault; no case needs a
solve, so none compiles one.
"""

import re

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows

DATA = flows.single_example([1.0, 2.0, 3.0])
TH = flows.balanced_init(0.5, 2, 3)
SCHEDULED = flows.LESAM(lambda t: 0.35 / (1.0 + t), 0.3)  # σ(t): fixed in a phase diagram


def _solve(**kw):
    return flows.solve(flows.GD(), DATA, TH, **{"t1": 1.0, **kw})


@pytest.mark.parametrize(
    "name, call",
    [
        ("rho", lambda: flows.L2SAM(True)),
        ("rho", lambda: flows.LinfSAM(True)),
        ("delta", lambda: flows.LinfSAM(0.1, delta=True)),
        ("sigma", lambda: flows.LESAM(True, 0.3)),
        ("rho_max", lambda: flows.LESAM(0.3, True)),
        ("eps", lambda: flows.LESAM(0.3, 0.3, eps=True)),
        ("alpha", lambda: flows.balanced_init(True, 2, 3)),
        ("alpha", lambda: flows.balanced_init(np.array([]), 2)),
        ("t1", lambda: _solve(t1=True)),
        ("theta0", lambda: flows.solve(flows.GD(), DATA, np.ones((2, 3), bool), t1=1.0)),
        ("lr", lambda: flows.iterate(flows.GD(), DATA, TH, lr=True, steps=3)),
        ("alpha", lambda: analysis.regime_path(flows.L2SAM(1.0), [1.0, 2.0, 3.0], True)),
        ("rtol", lambda: flows.SolverOptions(rtol=np.True_)),
        ("max_steps", lambda: flows.SolverOptions(max_steps=2**63)),
        ("max_steps", lambda: flows.SolverOptions(max_steps=np.True_)),
        ("solver", lambda: flows.SolverOptions(solver=diffrax.Euler())),
        ("max_steps", lambda: _solve(dense=True, max_steps=10**9)),  # ~0.4 TB: before allocating
        ("seed", lambda: flows.sweep(lambda a: {"y": a}, {"a": [1.0]}, seed=2**64)),
        ("params['a']", lambda: flows.sweep(lambda a: {"y": a}, {"a": ["x", "y"]})),
        ("mu", lambda: analysis.regime_path(flows.L2SAM(1.0), [1e-310, 1.0], 0.5)),
        ("mu", lambda: analysis.phase_diagram(flows.L2SAM(1.0), [1e-310, 2.0], alpha=[0.2])),
        ("sigma", lambda: analysis.phase_diagram(SCHEDULED, [1.0, 2.0], alpha=0.2, sigma=[0.1])),
        ("sigma", lambda: flows.LESAM(lambda t: 0.1 * float(t), 0.3)),
    ],
)
def test_refused_naming_the_argument(name, call):
    with pytest.raises(ValueError, match=re.escape(f"`{name}`")):
        call()


@pytest.mark.parametrize("tol", [np.float32(1e-8), jnp.asarray(1e-8), np.asarray(1e-8), 1e-8])
def test_tolerances_in_any_scalar_form(tol):
    """rtol is taken like atol: a Python, NumPy or 0-d JAX real number, as its float64 value."""
    options = flows.SolverOptions(rtol=tol, loss_tol=tol)
    assert options.rtol == options.loss_tol == float(np.asarray(tol))


def test_schedules_are_checked_where_they_are_evaluated():
    """σ(t) = 0.35 cos t is negative on (π/2, 3π/2): refused on [0, 5]; where a run meets it, the
    rule reads max(σ, 0) and the schedule's stopping condition is negative."""
    cosine = flows.LESAM(lambda t: 0.35 * jnp.cos(t), 0.3)
    with pytest.raises(ValueError, match=r"`sigma` .* >= 0 .*sigma\(1\.57"):
        flows.solve(cosine, DATA, TH, t1=5.0)
    assert float(cosine.rule_sigma(1.0)) == pytest.approx(0.35 * np.cos(1.0), rel=1e-15)
    assert float(cosine.rule_sigma(2.0)) == 0.0  # no budget: a run stops there (sigma_negative)
    assert float(cosine.schedule_margin(1.0)) > 0 > float(cosine.schedule_margin(2.0))
    with pytest.raises(ValueError, match="`sigma` must be a JAX-traceable function"):
        flows.LESAM(lambda t: 0.1 * float(t), 0.3)  # where it is given
