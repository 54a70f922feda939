"""Every public callable of flows and analysis, each argument bad or extreme in turn.

The shared strategies and the outcome rule are in :mod:`tests.properties`.
"""

import dataclasses

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

import analysis
import flows
from tests import (
    test_analysis_properties,
    test_dynamics_properties,
    test_iterate_properties,
    test_many,
    test_methods,
    test_problem,
    test_solve_properties,
)
from tests.properties import (
    CI,
    DATA,
    THETA,
    Solved,
    Tally,
    any_value,
    no_integration,  # noqa: F401 (a fixture)
    numbers,
    refused_or_integrated,
    wrong_types,
)

# --- every public callable: each argument, one at a time, bad or extreme --------------------
#
# One table row per public function of ``flows`` and ``analysis`` (the constructors and
# functions above have their own, finer properties). ``base`` is a valid call; each example
# replaces one argument by a generated value. Rows whose valid call integrates run under
# ``no_integration`` (and ``flows.sweep`` is patched out for those that sweep), so every
# example ends before any solve: either a named error or the patched integrator.


def _solved_traj():
    """A short finished GD solve (dense), the trajectory the trajectory functions take."""
    return flows.solve(flows.GD(), DATA, THETA, t1=0.5, rescaled=True, dense=True)


TRAJ = _solved_traj()
#: A plain GD solve saved at three times (real time = its clock).
PLAIN_TRAJ = flows.solve(flows.GD(), DATA, THETA, t1=0.5, ts=[0.0, 0.25, 0.5])
PROBLEM = analysis.Problem(flows.GD(), DATA, THETA, 0.5, rescaled=True)
MU = [1.0, 2.0, 3.0]


def _family(p):
    return flows.L2SAM(1.0), p


def _sweep_fn(a):
    return {"y": 2.0 * a}


# (name, call, base keyword arguments, keys to perturb, integrates)
REGRESSION_DATA = flows.Dataset(
    np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]]), np.array([1.0, -0.5]), regression=True
)
PUBLIC = [
    ("flows.USAM", flows.USAM, dict(rho=0.1), ["rho"], 0),
    ("flows.OneSAM", flows.OneSAM, dict(rho=0.1, convention="reference"), ["rho", "convention"], 0),
    (
        "analysis.kernel_rich_limit",
        analysis.kernel_rich_limit,
        dict(data=REGRESSION_DATA, alpha=0.5, model="uv"),
        ["data", "alpha", "model", "rtol", "max_iter"],
        0,
    ),
    (
        "flows.SweepOptions",
        flows.SweepOptions,
        dict(chunk_size=8, workers=1),
        "order chunk_size max_chunk memory_budget devices workers executor compile_cache".split(),
        0,
    ),
    (
        "analysis.margin_gradient_norm",
        analysis.margin_gradient_norm,
        dict(traj=TRAJ, data=DATA),
        ["traj", "data"],
        0,
    ),
    (
        "analysis.RunOptions",
        analysis.RunOptions,
        dict(rtol=1e-9, max_steps=2048),
        "rtol atol max_steps max_passes collapse_tol escape_tol loss n_grid max_switches".split(),
        0,
    ),
    ("flows.log_speed", flows.log_speed, dict(loss="logistic", z=[0.5, -1.0]), ["loss", "z"], 0),
    (
        "flows.margins",
        flows.margins,
        dict(theta=THETA, data=DATA),
        ["theta", "data"],
        0,
    ),
    (
        "flows.sweep",
        flows.sweep,
        dict(fn=_sweep_fn, params={"a": [1.0, 2.0]}, progress=False, compile_cache=False),
        "fn params static product order chunk_size max_chunk memory_budget config seed "
        "workers".split(),
        0,
    ),
    (
        "flows.SolverOptions",
        flows.SolverOptions,
        dict(),
        "backend solver rtol atol max_steps collapse_tol escape_tol loss_tol dense "
        "real_time".split(),
        0,
    ),
    ("flows.Status.name", flows.Status.name, dict(code=2), ["code"], 0),
    ("flows.load_sweep", flows.load_sweep, dict(path="/nonexistent/sweep"), ["path"], 0),
    (
        "analysis.l2sam_thresholds",
        analysis.l2sam_thresholds,
        dict(mu=MU, rho=1.0),
        ["mu", "rho"],
        0,
    ),
    (
        "analysis.certificate",
        analysis.certificate,
        dict(theta=THETA, mu=MU, bound=0.1),
        ["theta", "mu", "bound", "trapped"],
        0,
    ),
    (
        "analysis.limit_leader",
        analysis.limit_leader,
        dict(method=flows.LinfSAM(0.1), mu=MU, alpha=0.5, depth=2),
        ["method", "mu", "alpha", "depth"],
        0,
    ),
    (
        "analysis.linf_tie",
        analysis.linf_tie,
        dict(method=flows.LinfSAM(0.1), mu=MU, alpha_k=0.5, depth=3, k=0, j=1),
        ["method", "mu", "alpha_k", "depth", "k", "j"],
        0,
    ),
    (
        "analysis.perturbation_bound",
        analysis.perturbation_bound,
        dict(method=flows.LinfSAM(0.1)),
        ["method"],
        0,
    ),
    ("analysis.clock_grid", analysis.clock_grid, dict(t_end=1.0, n=8), ["t_end", "n", "first"], 0),
    ("analysis.norm_clock", analysis.norm_clock, dict(traj=TRAJ, n=8), ["traj", "n", "first"], 0),
    ("analysis.dominant_index", analysis.dominant_index, dict(traj=TRAJ), ["traj", "tie_rtol"], 0),
    (
        "analysis.fastest_growing_index",
        analysis.fastest_growing_index,
        dict(traj=TRAJ, problem=PROBLEM),
        ["traj", "problem"],
        0,
    ),
    ("analysis.log_abs_beta", analysis.log_abs_beta, dict(theta=THETA), ["theta"], 0),
    ("analysis.dominant_at", analysis.dominant_at, dict(theta=THETA), ["theta"], 0),
    (
        "analysis.switch_times",
        analysis.switch_times,
        dict(traj_or_problem=TRAJ),
        ["traj_or_problem", "samples_per_step", "max_depth"],
        0,
    ),
    (
        "analysis.convergence_order",
        analysis.convergence_order,
        dict(steps=[0.1, 0.05, 0.025], errors=[1e-2, 2.5e-3, 6.25e-4]),
        ["steps", "errors"],
        0,
    ),
    (
        "analysis.log_law",
        analysis.log_law,
        dict(x=[1e-3, 1e-2, 1e-1], y=[7.0, 5.0, 3.0]),
        ["x", "y"],
        0,
    ),
    (
        "analysis.convergence_rate",
        analysis.convergence_rate,
        dict(traj=TRAJ, direction=[0.0, 0.0, 1.0]),
        ["traj", "direction", "model", "tail"],
        0,
    ),
    (
        "analysis.direction_cosine",
        analysis.direction_cosine,
        dict(traj=TRAJ, direction=[0.0, 0.0, 1.0]),
        ["traj", "direction"],
        0,
    ),
    (
        "analysis.limit_class",
        analysis.limit_class,
        dict(status=int(flows.Status.ESCAPED), beta=[0.0, 0.0, 1.0]),
        ["status", "beta"],
        0,
    ),
    ("analysis.limit_direction", analysis.limit_direction, dict(traj=TRAJ), ["traj"], 0),
    ("analysis.max_margin", analysis.max_margin, dict(data=DATA, p=2), ["data", "p"], 0),
    ("analysis.loss_plateau", analysis.loss_plateau, dict(traj=TRAJ), ["traj", "band"], 0),
    (
        "analysis.sharpness",
        analysis.sharpness,
        dict(traj=TRAJ, data=DATA),
        ["traj", "data", "loss"],
        0,
    ),
    (
        "analysis.lesam_radius",
        analysis.lesam_radius,
        dict(traj=PLAIN_TRAJ, data=DATA, method=flows.LESAM(0.35, 0.3)),
        ["traj", "data", "method", "loss", "until"],
        0,
    ),
    (
        "analysis.at_loss",
        analysis.at_loss,
        dict(loss=[1.0, 0.1, 0.01], values=[2.0, 0.2, 0.02], levels=[0.5]),
        ["loss", "values", "levels"],
        0,
    ),
    (
        "analysis.regime_code",
        analysis.regime_code,
        dict(collapsed=False, settled=True, leader=2, visited_other=False, target=2, first=2),
        ["collapsed", "settled", "leader", "visited_other", "target", "first"],
        0,
    ),
    (
        "analysis.Problem",
        analysis.Problem,
        dict(
            method=flows.GD(),
            data=DATA,
            theta0=THETA,
            t1=1.0,
            rescaled=True,
            loss="logistic",
            options=flows.SolverOptions(),
        ),
        ["method", "data", "theta0", "t1", "rescaled", "loss", "options"],
        0,
    ),
    (
        "analysis.regime",
        analysis.regime,
        dict(method=flows.L2SAM(1.0), mu=MU, alpha=0.5),
        ["method", "mu", "alpha", "depth"],
        1,
    ),
    (
        "analysis.boundary",
        analysis.boundary,
        dict(family=_family, mu=MU, bracket=(0.1, 1.0)),
        "family mu depth bracket kind bracket_rtol points log max_steps collapse_tol escape_tol "
        "loss atol max_passes".split(),
        1,
    ),
    (
        "analysis.direct_alpha",
        analysis.direct_alpha,
        dict(method=flows.L2SAM(1.0), mu=MU),
        ["method", "mu", "depth", "bracket", "scan", "full_output"],
        1,
    ),
    (
        "analysis.limit_map",
        analysis.limit_map,
        dict(method=flows.LinfSAM(0.1), mu=MU, alphas=[[0.5, 1.0], [0.5], [0.5]], progress=False),
        "method mu alphas depth loss collapse_tol escape_tol rtol atol max_steps "
        "max_passes".split(),
        1,
    ),
    (
        "analysis.phase_diagram",
        analysis.phase_diagram,
        dict(method=flows.L2SAM(1.0), mu=MU, alpha=[0.5, 1.0], rho=[0.5, 1.0], progress=False),
        "method mu alpha rho sigma rho_max depth loss collapse_tol escape_tol rtol atol "
        "max_steps max_passes n_grid max_switches".split(),
        1,
    ),
]

# Documented NaN results: convergence_order and log_law are NaN with fewer than two usable
# points, at_loss at a level outside the run's losses.
NAN_DOCUMENTED = {"analysis.convergence_order", "analysis.log_law", "analysis.at_loss"}

hostile = st.one_of(
    numbers,
    wrong_types,
    any_value((3,)),
    any_value((2, 3)),
    st.integers(-3, 3),
    st.booleans(),
    st.sampled_from(["logistic", "l2", "auto", "", "/"]),
    st.sampled_from([flows.GD(), DATA]),
)


def _nan_free(result):
    """No NaN in any numeric leaf of ``result`` (a dataclass, tuple, dict or array)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        return all(_nan_free(getattr(result, f.name)) for f in dataclasses.fields(result))
    if isinstance(result, dict):
        return all(_nan_free(v) for v in result.values())
    if isinstance(result, (tuple, list)):
        return all(_nan_free(v) for v in result)
    try:
        arr = np.asarray(result)
    except Exception:
        return True
    return arr.dtype.kind not in "fc" or not bool(np.any(np.isnan(arr)))


@pytest.fixture
def no_sweep(monkeypatch):
    """``flows.sweep`` (as the analysis sweeps call it) raises ``Solved``."""

    def stop(*args, **kwargs):
        raise Solved

    monkeypatch.setattr(flows, "sweep", stop)


_Q = 1 / (np.sqrt(2.0) * np.linalg.norm(MU))
# The value of each row's valid (base) call, where a closed form gives it.
BASE_VALUES = {
    "flows.log_speed": lambda r: np.allclose(r, np.log(scipy.special.expit([-0.5, 1.0])), 0, 1e-14),
    "flows.margins": lambda r: np.allclose(r, [1.5], rtol=1e-15),  # Σ_j μ_j 0.5², μ = (1, 2, 3)
    "flows.Status.name": lambda r: r == "escaped",
    "analysis.l2sam_thresholds": lambda r: np.allclose(tuple(r), [_Q, 3 * _Q, 5 * _Q], rtol=1e-14),
    "analysis.limit_leader": lambda r: int(r) == 2,  # α > ρ, L = 2: the largest rate μ_3
    "analysis.log_abs_beta": lambda r: np.allclose(r, np.log(0.25), rtol=1e-15),
    "analysis.convergence_order": lambda r: abs(float(r) - 2.0) < 1e-12,  # errors ∝ h²
    # y = 1 − 2 log10 x exactly
    "analysis.log_law": lambda r: np.allclose(tuple(r), (-2.0, 1.0), rtol=0, atol=1e-12),
    "analysis.max_margin": lambda r: np.allclose(r, np.array(MU) / np.linalg.norm(MU), 0, 1e-6),
    "analysis.regime_code": lambda r: analysis.REGIMES[int(r)] == "direct",
    "analysis.clock_grid": lambda r: len(r) == 8 and r[0] == 0 and r[-1] == 1,
    "analysis.at_loss": lambda r: np.allclose(r, [1.0], rtol=1e-14),  # v = 2L at L = 0.5
}
# Hostile draws only: load_sweep's base path does not exist; the base TRAJ has one saved time,
# too few for convergence_rate's fit.
NO_VALID_BASE = {"flows.load_sweep", "analysis.convergence_rate"}


@pytest.mark.parametrize("row", PUBLIC, ids=[r[0] for r in PUBLIC])
def test_every_public_callable(row, no_integration, no_sweep):  # noqa: F811 (the fixture)
    """Each argument replaced by a hostile value: a named error, or (no integration) a
    NaN-free result; for rows that integrate, the call must stop at the patched solver. About
    half the draws are the row's valid base call: it must succeed (reach the solver), with the
    closed-form value of ``BASE_VALUES`` where there is one."""
    name, fn, base, keys, integrates = row
    tally = Tally()

    @settings(CI, max_examples=12)
    @given(data=st.data())
    def prop(data):
        must = name not in NO_VALID_BASE and data.draw(st.booleans(), label="valid")
        key = data.draw(st.sampled_from(keys), label="key")
        value = base[key] if must and key in base else data.draw(hostile, label="value")
        kwargs = base if must else base | {key: value}
        if integrates:
            refused_or_integrated(lambda: fn(**kwargs), key, must=must, tally=tally)
            return
        try:
            ok, result = tally.outcome(lambda: fn(**kwargs), must, key)
        except Solved:
            raise AssertionError(f"{name} integrates; mark its row") from None
        if ok and name not in NAN_DOCUMENTED:  # NaN in, NaN out; no NaN from NaN-free input
            bad = f"{name}({key}={value!r}): {result!r}"
            assert _nan_free(result) or not _nan_free(value), bad
        if must and name in BASE_VALUES:
            assert BASE_VALUES[name](result), (name, result)

    prop()
    tally.check(0 if name in NO_VALID_BASE else 1)


# Public callables with a property of their own above, or that take no user input.
COVERED_ABOVE = {
    "flows.L2SAM": test_methods.test_l2sam_constructor,
    "flows.LinfSAM": test_methods.test_linfsam_constructor,
    "flows.LESAM": test_methods.test_lesam_constructor,
    "flows.Dataset": test_problem.test_dataset_constructor,
    "flows.single_example": test_problem.test_single_example,
    "flows.balanced_init": test_problem.test_balanced_init,
    "flows.beta": test_problem.test_beta_is_exact_or_exact_overflow,
    "flows.objective": test_problem.test_objective_and_margins,
    "flows.loss_fn": test_problem.test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.loss_derivative": test_problem.test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.velocity": test_dynamics_properties.test_velocity_named_error_or_finite,
    "flows.rescaled_velocity": test_dynamics_properties.test_velocity_named_error_or_finite,
    "flows.iterate": test_iterate_properties.test_iterate_arguments,
    "flows.solve_many": test_many.test_solve_many_arguments,
    "flows.solve": test_solve_properties.test_solve_refuses_or_accepts_each_argument,
    "analysis.regime_path": test_analysis_properties.test_regime_path_refuses_before_solving,
    "analysis.critical_alpha": test_analysis_properties.test_critical_alpha_refuses_before_solving,
    # the regression setting's starts and predictions: their refusals and values
    "flows.product_init": "test_regression.test_bad_input_names_the_argument",
    "flows.predictions": "test_regression.test_squared_loss_and_its_field_match_the_formulas",
    # its keywords' refusals: tests/test_config.py (configure changes process-wide settings)
    "flows.configure": "test_config.test_configure_refuses_keywords_of_the_wrong_type",
}
NO_USER_INPUT = {
    "flows.AbstractMethod": "abstract base of the methods",
    "flows.GD": "no arguments",
    # result containers, built by the functions that return them
    **dict.fromkeys(
        ["flows.Trajectory", "flows.DenseOutput", "flows.SweepResult", "flows.Status"]
        + [
            f"analysis.{n}"
            for n in "Boundary Clock L2SAMThresholds LimitMap LogLaw Plateau Radius Rate "
            "RegimePath "
            "Sharpness Switches".split()
        ],
        "a result container",
    ),
}


def test_every_public_callable_is_covered():
    """A new public function without a row (or a property above) fails here."""
    public = {
        f"{mod.__name__}.{n}"
        for mod in (flows, analysis)
        for n in dir(mod)
        if not n.startswith("_") and callable(getattr(mod, n))
    }
    covered = {row[0] for row in PUBLIC} | set(COVERED_ABOVE) | set(NO_USER_INPUT)
    assert public - covered == set()
