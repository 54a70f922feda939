"""Property-based tests (hypothesis) of the public API under hostile input (issue 15).

Every call gets generated arguments: shapes, magnitudes from 1e-150 to 1e150, NaN and
inf, and values of the wrong type. Each call must either raise a ``ValueError`` or
``TypeError`` that names the argument, or return a finite result (or one whose
non-finiteness is exact overflow, checked against an independent log-space value)
with a status that agrees with it. Scale-twin properties check the exact symmetries
of the fields and of the max-margin problem across magnitudes.

CI-sized: at most ``MAX_EXAMPLES`` examples per property, derandomized (the same
examples on every run), no example database, no deadline (first calls compile).
Every public callable of ``flows`` and ``analysis`` is covered: by a property of its own, or
by a row of ``PUBLIC`` (``test_every_public_callable``: one argument at a time replaced by a
hostile value; a call whose valid path integrates or sweeps must stop at the patched-out
integrator, so no example solves anything); ``test_every_public_callable_is_covered`` fails
for a new public name without either.

Solver-level scale twins of ``flows.solve`` (status, scaled end time, θ_end/λ from 1e-150
to 1e150, both backends) are in ``tests/test_solver_hostile.py``; those of
``analysis.regime_path`` in ``tests/test_regime.py``.
"""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import analysis
import flows

MAX_EXAMPLES = 60
CI = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

# --- strategies ---------------------------------------------------------------------------

exponents = st.floats(min_value=-150.0, max_value=150.0, allow_nan=False)
wide_exponents = st.floats(min_value=-300.0, max_value=300.0, allow_nan=False)  # scaled norms
magnitudes = exponents.map(lambda e: 10.0**e)  # (0, ∞): 1e-150 … 1e150
signed = st.tuples(magnitudes, st.sampled_from([-1.0, 1.0])).map(lambda p: p[0] * p[1])
specials = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0])
numbers = st.one_of(signed, specials)


class Opaque:
    """An object that is no number."""

    def __repr__(self):
        return "Opaque()"


wrong_types = st.sampled_from(
    [None, "abc", "1.0", b"1", 1 + 2j, {"a": 1}, Opaque(), [1.0, [2.0]], [[1.0, 2.0], [3.0]]]
)


def arrays(shape):
    return st.lists(numbers, min_size=math.prod(shape), max_size=math.prod(shape)).map(
        lambda v: np.array(v, dtype=float).reshape(shape)
    )


def any_value(shape=()):
    """A value for an argument that expects an array of ``shape``: right or wrong shape,
    any magnitude or a special number, or the wrong type."""
    wrong_shapes = st.sampled_from([(), (1,), (2,), (3,), (2, 3), (1, 2, 3), (0,), (2, 0)])
    return st.one_of(arrays(shape), wrong_shapes.flatmap(arrays), wrong_types, numbers)


# --- the outcome rule ---------------------------------------------------------------------


def named_error_or_result(call, *names):
    """``call()`` either raises TypeError/ValueError naming one of ``names``, or returns."""
    try:
        return True, call()
    except (TypeError, ValueError) as err:
        message = str(err)
        assert any(f"`{n}`" in message for n in names), f"error does not name {names}: {err!r}"
        return False, None


def finite(x):
    return bool(np.all(np.isfinite(np.asarray(x))))


def concrete_finite(x):
    try:
        return finite(np.asarray(x, dtype=float))
    except (TypeError, ValueError):
        return False


DATA = flows.single_example([1.0, 2.0, 3.0])
THETA = flows.balanced_init(0.5, 2, 3)
METHODS = [
    flows.GD(),
    flows.L2SAM(0.3),
    flows.L2SAM(0.3, per_layer=True),
    flows.LinfSAM(0.1),
    flows.LinfSAM(0.1, delta=1e-3),
    flows.LESAM(0.35, 0.3),
]

# --- constructors -------------------------------------------------------------------------


@CI
@given(rho=any_value(), per_layer=st.one_of(st.booleans(), wrong_types, numbers))
def test_l2sam_constructor(rho, per_layer):
    ok, m = named_error_or_result(lambda: flows.L2SAM(rho, per_layer=per_layer), "rho", "per_layer")
    if ok:
        assert concrete_finite(rho) and float(np.asarray(rho)) >= 0
        assert float(m.rho) == float(np.asarray(rho)) and isinstance(per_layer, bool)


@CI
@given(rho=any_value(), delta=st.one_of(st.none(), any_value()))
def test_linfsam_constructor(rho, delta):
    ok, m = named_error_or_result(lambda: flows.LinfSAM(rho, delta=delta), "rho", "delta")
    if ok:
        assert float(m.rho) >= 0 and finite(m.rho)
        assert m.delta is None or (float(m.delta) > 0 and finite(m.delta))


@CI
@given(sigma=any_value(), rho_max=any_value(), eps=any_value())
def test_lesam_constructor(sigma, rho_max, eps):
    ok, m = named_error_or_result(
        lambda: flows.LESAM(sigma, rho_max, eps), "sigma", "rho_max", "eps"
    )
    if ok:
        assert float(m.sigma) >= 0 and float(m.rho_max) >= 0 and float(m.eps) > 0
        assert finite(m.sigma) and finite(m.rho_max) and finite(m.eps)


@CI
@given(X=any_value((2, 3)), y=st.one_of(any_value((2,)), st.just([1.0, -1.0])))
def test_dataset_constructor(X, y):
    ok, data = named_error_or_result(lambda: flows.Dataset(X, y), "X", "y")
    if ok:
        assert finite(data.X) and set(np.asarray(data.y).tolist()) <= {1.0, -1.0}
        assert data.X.shape == (data.n, data.d) and data.y.shape == (data.n,)


@CI
@given(mu=any_value((3,)))
def test_single_example(mu):
    ok, data = named_error_or_result(lambda: flows.single_example(mu), "mu")
    if ok:
        assert data.n == 1 and finite(data.X) and np.array_equal(data.X[0], np.asarray(mu))


@CI
@given(
    alpha=any_value((3,)),
    depth=st.one_of(st.integers(-2, 4), wrong_types, numbers),
    d=st.one_of(st.none(), st.integers(-1, 4), wrong_types, numbers),
)
def test_balanced_init(alpha, depth, d):
    ok, theta = named_error_or_result(
        lambda: flows.balanced_init(alpha, depth, d), "alpha", "depth", "d"
    )
    if ok:
        assert theta.shape == (depth, np.size(alpha) if np.ndim(alpha) else d)
        assert finite(theta) and bool(np.all(np.asarray(theta) > 0))


# --- pure functions of θ ------------------------------------------------------------------


@CI
@given(theta=any_value((2, 3)))
def test_beta_is_exact_or_exact_overflow(theta):
    """β = Π_l θ_l: finite whenever Σ_l log|θ_l| < log(max float); overflow only beyond."""
    ok, b = named_error_or_result(lambda: flows.beta(theta), "theta")
    if ok:
        th = np.asarray(theta, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_abs = np.sum(np.log(np.abs(th)), axis=-2)
        fits = np.all(np.isfinite(th), axis=-2) & (log_abs < np.log(np.finfo(float).max) - 1e-9)
        got = np.asarray(b)
        assert np.all(np.isfinite(got[fits]))
        np.testing.assert_allclose(
            np.log(np.abs(got[fits & (got != 0)])), log_abs[fits & (got != 0)], rtol=0, atol=1e-12
        )


@CI
@given(
    theta=any_value((2, 3)),
    data=st.one_of(st.just(DATA), wrong_types),
    loss=st.sampled_from(["logistic", "exponential", "hinge", None]),
)
def test_objective_and_margins(theta, data, loss):
    ok, value = named_error_or_result(
        lambda: flows.objective(theta, data, loss), "theta", "data", "loss"
    )
    if ok:
        # NaN in, NaN out: never a made-up number (inf in θ gives the limit, e.g. loss 0)
        assert not np.any(np.isnan(np.asarray(theta, dtype=float))) or np.isnan(float(value))
        m = np.asarray(flows.margins(theta, data))
        if finite(m):  # the loss of finite margins is finite, or exact exp overflow
            assert finite(value) or (loss == "exponential" and -np.min(m) > 709)
            assert float(value) >= 0


@CI
@given(z=any_value((4,)), loss=st.sampled_from(["logistic", "exponential"]))
def test_loss_and_derivative_are_finite_on_finite_margins(z, loss):
    ok, value = named_error_or_result(lambda: flows.loss_fn(loss, z), "z")
    if ok and concrete_finite(z):
        zz = np.asarray(z, dtype=float)
        overflow = loss == "exponential" and np.any(-zz > 709)
        assert finite(value) or overflow
        assert np.all(np.asarray(value) >= 0)
        dl = np.asarray(flows.loss_derivative(loss, z))
        assert finite(dl) or overflow
        assert np.all(dl <= 0)


# --- fields -------------------------------------------------------------------------------


@CI
@given(
    method=st.one_of(st.sampled_from(METHODS), wrong_types),
    theta=any_value((2, 3)),
    t=st.one_of(numbers, wrong_types),
    rescaled=st.booleans(),
)
def test_velocity_named_error_or_finite(method, theta, t, rescaled):
    """Valid arguments give a finite field at moderate θ (|θ| ≤ 1e3, no overflow)."""
    fn = flows.rescaled_velocity if rescaled else flows.velocity
    ok, v = named_error_or_result(
        lambda: fn(method, DATA, "logistic", theta, t), "method", "theta", "t"
    )
    if ok:
        assert concrete_finite(theta) and concrete_finite(t)
        assert v.shape == (2, 3)
        if np.max(np.abs(np.asarray(theta))) <= 1e3:
            assert finite(v)


def test_rescaled_velocity_refuses_two_examples():
    two = flows.Dataset([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], [1, -1])
    with pytest.raises(ValueError, match="`data`"):
        flows.rescaled_velocity(flows.GD(), two, "logistic", THETA)


@CI
@given(
    exponent=wide_exponents,
    a=st.floats(0.05, 5.0),
    r=st.floats(0.0, 5.0),
    depth=st.sampled_from([1, 2]),
)
def test_rescaled_field_scale_twins(exponent, a, r, depth):
    """science.md §5: (θ, ρ) -> (λθ, λρ) maps the rescaled field v -> λ^{L-1} v (ℓ2, ℓ∞, GD).

    Checked for λ = 10^e, e in [-300, 300], against the field at λ = 1 (L ≤ 2 so that
    λ^{L-1} v stays in range).
    """
    lam = 10.0**exponent
    mu = [1.0, 2.0, 3.0]
    data = flows.single_example(mu)
    theta = np.stack([np.array([a, 0.7 * a, 1.3 * a])] * depth)
    for make in (flows.L2SAM, flows.LinfSAM, lambda r: flows.L2SAM(r, per_layer=True)):
        v1 = np.asarray(flows.rescaled_velocity(make(r), data, "logistic", theta))
        vl = np.asarray(flows.rescaled_velocity(make(lam * r), data, "logistic", lam * theta))
        np.testing.assert_allclose(
            vl / lam ** (depth - 1), v1, rtol=1e-12, atol=1e-13 * np.max(np.abs(v1))
        )


@CI
@given(g=arrays((2, 3)).filter(lambda g: finite(g) and np.any(g != 0)), exponent=wide_exponents)
def test_l2_perturbation_is_scale_invariant_in_g(g, exponent):
    """ε = ρ g/‖g‖ does not change when g is multiplied by 10^e (any magnitude of g)."""
    g = g / np.max(np.abs(g))  # a direction with entries in [-1, 1]
    lam = 10.0**exponent
    # Normal numbers only: XLA on CPU may flush subnormals (< 2.2e-308) to zero, and
    # whether it does varies by thread; no float64 code can keep their direction.
    nonzero = np.abs(g[g != 0])
    assume(np.min(nonzero) * min(lam, 1.0) >= np.finfo(float).tiny)
    for m in (flows.L2SAM(0.7), flows.L2SAM(0.7, per_layer=True)):
        e1 = np.asarray(m.perturbation(THETA, g, 0.0))
        el = np.asarray(m.perturbation(THETA, lam * g, 0.0))
        np.testing.assert_allclose(el, e1, rtol=1e-13, atol=1e-15)
    unit = g / np.sqrt(np.sum(g**2))
    np.testing.assert_allclose(
        np.asarray(flows.L2SAM(0.7).perturbation(THETA, lam * g, 0.0)),
        0.7 * unit,
        rtol=1e-13,
        atol=1e-15,
    )


# --- discrete updates ---------------------------------------------------------------------


@CI
@given(
    method=st.sampled_from(METHODS),
    lr=st.one_of(magnitudes, specials, wrong_types),
    alpha=st.one_of(magnitudes, specials),
)
def test_iterate_status_agrees_with_the_iterates(method, lr, alpha):
    """status ok ⇔ every saved θ and β is finite; nonfinite otherwise (lr up to 1e150)."""

    def run():
        return flows.iterate(
            method, DATA, flows.balanced_init(alpha, 2, 3), lr=lr, steps=4, every=2
        )

    ok, traj = named_error_or_result(run, "lr", "alpha")
    if ok:
        all_finite = finite(traj.thetas) and finite(traj.beta)
        if traj.status_name == "ok":
            assert all_finite
        else:
            assert traj.status_name == "nonfinite"
        if not all_finite:
            assert traj.status_name == "nonfinite"


@CI
@given(
    steps=st.one_of(st.integers(-1, 3), wrong_types, numbers),
    every=st.one_of(st.integers(-1, 3), wrong_types, numbers),
    loss=st.one_of(st.sampled_from(["logistic", "mse"]), wrong_types),
    data=st.one_of(st.just(DATA), wrong_types),
    method=st.one_of(st.just(flows.GD()), wrong_types),
)
def test_iterate_arguments(steps, every, loss, data, method):
    ok, traj = named_error_or_result(
        lambda: flows.iterate(method, data, THETA, lr=0.1, steps=steps, every=every, loss=loss),
        "steps",
        "every",
        "loss",
        "data",
        "method",
    )
    if ok:
        assert traj.status_name == "ok" and traj.ts.shape == (steps // every + 1,)


# --- solve: every bad argument is refused before integrating --------------------------------


class Solved(Exception):
    """Raised in place of integrating: the arguments passed validation."""


def refused_or_integrated(call, *names):
    """``call()`` reaches the integrator (valid arguments) or raises an error naming ``names``."""
    try:
        call()
    except Solved:
        return
    except (TypeError, ValueError) as err:
        assert any(f"`{n}`" in str(err) for n in names), repr(err)
    else:
        raise AssertionError("the integrator is patched out: the call cannot return")


@pytest.fixture
def no_integration(monkeypatch):
    """Every integrator (smooth and Filippov, both backends) raises ``Solved``."""
    from flows import _diffrax, _scipy

    def stop(*args, **kwargs):
        raise Solved

    for backend in (_diffrax, _scipy):
        for name in ("solve_smooth", "solve_filippov"):
            monkeypatch.setattr(backend, name, stop)


SOLVE_KEYS = "theta0 t1 rtol atol max_steps collapse_tol escape_tol loss_tol loss solver".split()
SOLVE_KEYS += ["rescaled", "dense"]


@CI
@given(
    key=st.sampled_from(SOLVE_KEYS),
    value=st.one_of(
        numbers,
        wrong_types,
        any_value((2, 3)),
        st.booleans(),
        st.sampled_from(["LSODA", "tsit5", "auto"]),
    ),
)
def test_solve_refuses_or_accepts_each_argument(no_integration, key, value):
    """Every argument of solve but ``ts`` and ``backend`` (issue 15, solver layer: a ``ts``
    of the wrong type gets numpy's conversion error, an array ``backend`` numpy's
    truth-value error; flows/_solve.py is being restructured under issue 11)."""
    kwargs = dict(t1=1.0, rescaled=True)
    theta0 = THETA
    if key == "theta0":
        theta0 = value
    else:
        kwargs[key] = value
    refused_or_integrated(lambda: flows.solve(flows.L2SAM(0.3), DATA, theta0, **kwargs), key)


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
    """The sympy thresholds are linear in ρ (α = kρ rays, science.md §5)."""
    lam = 10.0**exponent
    t1, tl = analysis.l2sam_thresholds(mu, 1.0), analysis.l2sam_thresholds(mu, lam)
    np.testing.assert_allclose(np.array(tl) / lam, np.array(t1), rtol=1e-12)


REGIME_KEYS = (
    "mu alpha depth t1 max_restarts rtol atol loss max_steps collapse_tol escape_tol".split()
)


@CI
@given(
    key=st.sampled_from(REGIME_KEYS),
    value=st.one_of(numbers, wrong_types, any_value((3,)), st.integers(-3, 3)),
)
def test_regime_path_refuses_before_solving(no_integration, key, value):
    args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0, 3.0], alpha=0.5) | {key: value}
    refused_or_integrated(lambda: analysis.regime_path(**args), key)


BOUNDARY_KEYS = "mu rtol points bracket scan max_steps solver_rtol solver_atol depth".split()
BOUNDARY_KEYS += ["max_passes", "collapse_tol", "escape_tol", "loss"]


@CI
@given(
    key=st.sampled_from(BOUNDARY_KEYS),
    value=st.one_of(numbers, wrong_types, any_value((2,)), st.integers(-3, 3)),
)
def test_critical_alpha_refuses_before_solving(no_integration, key, value):
    # d = 7 and max_steps = 12_345: a configuration no other test compiles, so that
    # the vmapped batch is traced here and reaches the patched integrator.
    args = dict(mu=np.arange(1.0, 8.0), max_steps=12_345) | {key: value}
    refused_or_integrated(lambda: analysis.critical_alpha(flows.L2SAM(1.0), **args), key)


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
PROBLEM = analysis.Problem(flows.GD(), DATA, THETA, dict(t1=0.5, rescaled=True))
MU = [1.0, 2.0, 3.0]


def _family(p):
    return flows.L2SAM(1.0), p


def _sweep_fn(a):
    return {"y": 2.0 * a}


# (name, call, base keyword arguments, keys to perturb, integrates)
PUBLIC = [
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
        dict(theta=THETA, mu=MU, bound=0.1, depth=2),
        ["theta", "mu", "bound", "depth", "trapped"],
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
        "analysis.regime_code",
        analysis.regime_code,
        dict(collapsed=False, settled=True, leader=2, visited_other=False, target=2),
        ["collapsed", "settled", "leader", "visited_other", "target"],
        0,
    ),
    (
        "analysis.Problem",
        analysis.Problem,
        dict(method=flows.GD(), data=DATA, theta0=THETA, options=dict(t1=1.0)),
        ["method", "data", "theta0", "options"],
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
        "family mu depth bracket kind rtol points log max_steps collapse_tol escape_tol loss "
        "solver_rtol solver_atol max_passes".split(),
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

# Documented NaN results: convergence_order is NaN with fewer than two usable points.
NAN_DOCUMENTED = {"analysis.convergence_order"}

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


@pytest.mark.parametrize("row", PUBLIC, ids=[r[0] for r in PUBLIC])
@settings(CI, max_examples=12)
@given(data=st.data())
def test_every_public_callable(row, data, no_integration, no_sweep):
    """Each argument replaced by a hostile value: a named error, or (no integration) a
    NaN-free result; for rows that integrate, the call must stop at the patched solver."""
    name, fn, base, keys, integrates = row
    key = data.draw(st.sampled_from(keys), label="key")
    value = data.draw(hostile, label="value")
    kwargs = base | {key: value}
    if integrates:
        refused_or_integrated(lambda: fn(**kwargs), key)
        return
    try:
        ok, result = named_error_or_result(lambda: fn(**kwargs), key)
    except Solved:
        raise AssertionError(f"{name} integrates; mark its row") from None
    if ok and name not in NAN_DOCUMENTED:  # NaN in, NaN out; no NaN from NaN-free input
        assert _nan_free(result) or not _nan_free(value), f"{name}({key}={value!r}): {result!r}"


# Public callables with a property of their own above, or that take no user input.
COVERED_ABOVE = {
    "flows.L2SAM": test_l2sam_constructor,
    "flows.LinfSAM": test_linfsam_constructor,
    "flows.LESAM": test_lesam_constructor,
    "flows.Dataset": test_dataset_constructor,
    "flows.single_example": test_single_example,
    "flows.balanced_init": test_balanced_init,
    "flows.beta": test_beta_is_exact_or_exact_overflow,
    "flows.objective": test_objective_and_margins,
    "flows.loss_fn": test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.loss_derivative": test_loss_and_derivative_are_finite_on_finite_margins,
    "flows.velocity": test_velocity_named_error_or_finite,
    "flows.rescaled_velocity": test_velocity_named_error_or_finite,
    "flows.iterate": test_iterate_arguments,
    "flows.solve": test_solve_refuses_or_accepts_each_argument,
    "analysis.regime_path": test_regime_path_refuses_before_solving,
    "analysis.critical_alpha": test_critical_alpha_refuses_before_solving,
}
NO_USER_INPUT = {
    "flows.AbstractMethod": "abstract base of the methods",
    "flows.GD": "no arguments",
    # result containers, built by the functions that return them
    **dict.fromkeys(
        ["flows.Trajectory", "flows.DenseOutput", "flows.SweepResult", "flows.Status"]
        + [
            f"analysis.{n}"
            for n in "Boundary Clock L2SAMThresholds LimitMap Plateau Rate RegimePath "
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
