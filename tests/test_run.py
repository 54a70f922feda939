"""analysis._run's pass policy: what a start alone decides (docs/theory.md's claim C2 for exact
ℓ∞-SAM), and each pass's thresholds, fixed by the run's first start."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from analysis._certify import (
    bound_of,
    certify,
    decouples,
    invariant_leader,
    keeps_invariant_order,
    never_escapes,
    time_scale,
    trapped,
)
from analysis._dominant import initial_index, log_size
from analysis._drive import _batched, _parameters
from analysis._predict import limit_index
from analysis._regime import budget, decide, regime_code, start_atol
from analysis._run import begin, conclude, finish, start_code, thresholds

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


# ---- the policy in NumPy on a batch equals JAX on each run (vmapped over the rows) ----------

POLICY_METHODS = [
    flows.GD(),
    flows.L2SAM(0.3),
    flows.L2SAM(0.3, per_layer=True),
    flows.LinfSAM(0.2, delta=0.05),
    flows.LESAM(0.35, 0.3),
    flows.LinfSAM(0.2),  # exact ℓ∞-SAM: run by the JAX driver only, its own certificates
]
# (L, d, N): odd and even depths, d == L, d == N, N == L, N == 1, L == 1, d == 1
POLICY_SHAPES = [(1, 1, 3), (2, 7, 1), (3, 5, 6), (4, 4, 4), (5, 2, 5), (8, 7, 8)]


def _policy_states(rng, depth, d, n, rho):
    """Valid starts θ0 (n, L, d) (balanced, some unbalanced with negative and zero weights,
    ties, some coordinates at the run's ``rho``, below and above it) and later states θ."""
    theta0 = np.empty((n, depth, d))
    for i in range(n):
        levels = np.array([0.5 * rho[i], rho[i], 1.5 * rho[i], 2.0, 3.0])
        alpha = rng.choice(levels, d)  # ties among few values
        alpha[rng.integers(d)] = 2.0 + i % 2  # a positive entry
        if i % 4 == 1:  # every weight below ρ: trapped (even L) or stalled (odd L)
            alpha = rng.choice([0.3, 0.5, 0.9], d) * rho[i]
        theta0[i] = alpha
        if i % 3 == 2:  # unbalanced: some layers negative or 0
            theta0[i] *= rng.choice([-1.0, 0.0, 0.7, 1.0, 1.3], (depth, d))
            theta0[i, 0, 0] = 2.5
    theta = theta0 * rng.choice([0.0, 0.5, 1.0, 1.0, 2.0], (n, 1, d))
    theta[::2] = theta0[::2] * rng.uniform(0.9, 1.1, (len(theta0[::2]), depth, d))
    theta[1::4] = theta0[1::4] * rng.choice([0.5, 1.0], (len(theta0[1::4]), 1, d))  # below ρ
    return theta0, theta


def _per_run(fn, methods, n, *batched):
    """``fn(method, *row)`` in JAX, vmapped over the runs (the method's parameters too)."""
    arrays, static = eqx.partition(methods, eqx.is_array)
    arrays = jax.tree.map(jnp.asarray, arrays)
    row = lambda m, *xs: fn(eqx.combine(m, static), *xs)  # noqa: E731
    return eqx.filter_vmap(row, axis_size=n)(arrays, *(jnp.asarray(x) for x in batched))


def _same(name, label, got, want):
    assert isinstance(got, (np.ndarray, np.generic)), f"{label}: {type(got)} is not NumPy"
    want = np.asarray(want)
    assert got.dtype.kind == want.dtype.kind, f"{label}: {got.dtype} vs {want.dtype}"
    # trapped's all-False mask of the other methods is (d,), GD's bound 0 one scalar: broadcast
    got = np.broadcast_to(got, want.shape) if name in ("trapped", "bound_of") else got
    assert got.shape == want.shape, f"{label}: shape {got.shape} vs {want.shape}"
    if want.dtype.kind == "f":  # exp(x) from x to 4 ulps: to 4|x| ulps (the escape threshold)
        with np.errstate(all="ignore"):
            rtol = 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(np.log(np.abs(want))))
            near = np.abs(got - want) <= rtol * np.abs(want)
        ok = (got == want) | (np.isnan(got) & np.isnan(want)) | near
        assert np.all(ok), f"{label}: {got[~ok]} vs {want[~ok]}"
    else:
        np.testing.assert_array_equal(got, want, err_msg=label)


@pytest.mark.parametrize("shape", POLICY_SHAPES, ids=str)
def test_the_policy_in_numpy_on_a_batch_is_jax_on_each_run(shape):
    """Every function of the pass policy evaluated eagerly in NumPy on a batch (the engine
    driver's way) equals its JAX evaluation vmapped over the runs (the JAX driver's way):
    integers and booleans exactly, floats to 4 ulps."""
    depth, d, n = shape
    rng = np.random.default_rng(100 * depth + 10 * d + n)
    mu = rng.choice([0.5, 1.0, 2.0, 2.0], d)
    options = analysis.RunOptions()
    statuses = np.arange(len(flows.Status.NAMES))
    for method in POLICY_METHODS:
        spread = 1.0 + 0.5 * (np.arange(n) % 3)  # each run its own parameters
        values = {k: v * spread for k, v in _parameters(method, None, n).items()}
        methods = _batched(method, values, n)
        theta0, theta = _policy_states(rng, depth, d, n, values.get("rho", 0.2 * spread))
        rates = rng.choice([-np.inf, -1.0, 0.5, 0.5, 2.0], (n, d))
        status = rng.choice(statuses, n)
        lost, other = rng.random(n) < 0.3, rng.random(n) < 0.5
        first, last, lead = (rng.integers(-1 if k else 0, d, n) for k in range(3))
        spent, level = rng.integers(0, 3, n), rng.integers(0, 3, n)
        code, flags = rng.integers(-1, len(analysis.REGIMES), n), rng.random((4, n)) < 0.5
        tol = np.full(n, 1e-3)
        with np.errstate(all="ignore"):
            cases = {
                "bound_of": (lambda m: bound_of(m), ()),
                "trapped": (trapped, (theta,)),
                "never_escapes": (never_escapes, (theta,)),
                "certify": (lambda m, th: certify(th, mu, bound_of(m), trapped(m, th),
                                                  decouples(m)), (theta,)),  # fmt: skip
                "time_scale": (lambda m, th: time_scale(th, mu, bound_of(m)), (theta,)),
                "budget": (lambda m, th, s: budget(th, mu, bound_of(m), s), (theta, spent)),
                "start_atol": (lambda m, th: start_atol(None, th), (theta0,)),
                "keeps_invariant_order": (lambda m, a, b: keeps_invariant_order(m, a, b, mu),
                                          (theta0, theta)),  # fmt: skip
                "invariant_leader": (lambda m, th: invariant_leader(m, th, mu), (theta0,)),
                "limit_index": (lambda m, a: limit_index(m, mu, a, depth), (theta0[:, 0],)),
                "log_size": (lambda m, th: log_size(th), (theta,)),
                "initial_index": (lambda m, th, r: initial_index(th, r), (theta0, rates)),
                "begin": (lambda m, th, r: begin(m, mu, th, r, need="path"), (theta0, rates)),
                "begin_escape": (lambda m, th: begin(m, mu, th, None, need="escape"), (theta0,)),
                "thresholds": (lambda m, a, b, s, k, t: thresholds(options, a, b, bound_of(m),
                               mu, s, k, t), (theta0, theta, spent, level, tol)),  # fmt: skip
                "regime_code": (lambda m, c, s, k, v, f: regime_code(c, s, k, v, 1 % d, f),
                                (flags[0], flags[1], first % d, flags[2], last % d)),
                "decide": (lambda m, st, e, s, k, i, t, v, f, x, a: decide(
                    st, escaped=e, settled=s, leader=k, intact=i, theorem_leader=t,
                    visited_other=v, first=f, target=0, need="path", stalled=x, trapped_all=a),
                    (status, flags[0], flags[1], first % d, ~lost, lead, other, last % d,
                     flags[2], flags[3])),  # fmt: skip
                "finish": (lambda m, c, lo, la, le: finish(c, lost=lo, last=la, lead=le,
                           track=True), (code, lost, last, lead)),  # fmt: skip
            }  # fmt: skip
            for need in ("path", "escape"):
                cases[f"conclude_{need}"] = (
                    lambda m, a, b, st, lo, ot, fi, need=need: conclude(
                        m, mu, a, b, st, lost=lo, other=ot, first=fi, need=need),
                    (theta0, theta, status, lost, other, first % d))  # fmt: skip
            for name, (fn, args) in cases.items():
                got = fn(methods, *args)
                want = _per_run(fn, methods, n, *args)
                got, want = (x if isinstance(x, tuple) else (x,) for x in (got, want))
                assert len(got) == len(want)
                for k, (g, w) in enumerate(zip(got, want, strict=True)):
                    label = f"{name}[{k}] {method!r} L={depth} d={d} N={n}"
                    _same(name, label, g, w)
