"""The analysis's two drivers (analysis._drive on the numba engine, analysis._run.run on JAX): the
same points through both, and through the independent reduced ODEs of analysis._reference.

The points sit where the classifiers are most fragile: within 1e-3 (relative) of α_c and
α_direct at L = 2…8 (the published rays k_c, k_direct of the regime map, docs/regimes.md), across
the ends of the excursion band at L = 3, 5, 7, and near the first-switch thresholds of L = 2
(the sympy bounds, analysis.l2sam_thresholds). Every difference between the drivers is either
fixed or explained in docs/theory.md §13; none is left here.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from analysis._certify import keeps_invariant_order
from analysis._drive import classify, drive
from analysis._reference import l2sam_switches, scalar_reduction, scalar_switches
from analysis._run import run
from flows import _engine

MU = np.arange(1.0, 6.0)
DATA = flows.single_example(MU)
#: The rays of the regime map (README, docs/regimes.md): α_c/ρ at even L, α_direct/ρ.
K_C = {2: 0.347, 4: 0.223, 6: 0.179, 8: 0.154}
K_DIRECT = {2: 0.857, 3: 1.0, 4: 1.2, 5: 1.3, 6: 1.45, 7: 1.6, 8: 1.71}
#: The ends of the excursion band at odd L (README: 0.29, 0.20 and 0.17).
K_BAND = {3: 0.29, 5: 0.20, 7: 0.17}
KEYS = ("code", "first", "last", "n_switches", "status")


def _starts(alphas, depth):
    return np.stack([np.asarray(flows.balanced_init(a, depth, MU.size)) for a in alphas])


def _both(alphas, depth, options=None):
    options = options or analysis.RunOptions()
    theta0 = _starts(alphas, depth)
    engine = drive(flows.L2SAM(1.0), DATA, theta0, options=options)
    jax_run = eqx.filter_jit(eqx.filter_vmap(
        lambda th: run(flows.L2SAM(1.0), DATA, th, options=options)))  # fmt: skip
    other = {k: np.asarray(v) for k, v in jax_run(jnp.asarray(theta0)).items()}
    return engine, other


def _near(k, depth):
    """Points within 1e-3 (relative) of the ray k, both sides, and a little farther."""
    return k * np.array([1 - 3e-3, 1 - 1e-3, 1 - 1e-4, 1 + 1e-4, 1 + 1e-3, 3e-3 + 1])


@pytest.mark.slow
@pytest.mark.parametrize("depth", [2, 3, 4, 5, 6, 8])
def test_drivers_agree_near_the_boundaries(depth):
    """Regimes, j† sequences, switch counts and statuses 100 %; t_end and switch times to the
    accuracy the drivers' tolerance gives (docs/theory.md §13: both are the same flow to rtol
    1e-10, one in θ, the engine in log θ; near α_c the late switches amplify a relative error of
    the state by up to 1e4)."""
    ks = [*(_near(K_C[depth], depth) if depth in K_C else []), *_near(K_DIRECT[depth], depth)]
    if depth in K_BAND:
        ks += list(_near(K_BAND[depth], depth))
    engine, other = _both(np.array(ks), depth)
    for key in KEYS:
        np.testing.assert_array_equal(engine[key], other[key], err_msg=key)
    kept = np.arange(engine["times"].shape[1])[None, :] < engine["n_switches"][:, None]
    np.testing.assert_array_equal(np.where(kept, engine["after"], -1),
                                  np.where(kept, other["after"], -1))  # fmt: skip
    assert np.all(engine["code"] != analysis.REGIMES.index("undetermined"))
    np.testing.assert_allclose(engine["t_end"], other["t_end"], rtol=1e-6)
    np.testing.assert_allclose(engine["times"], other["times"], rtol=1e-6, atol=1e-6)


def test_engine_switch_times_against_the_scalar_reduction():
    """L = 2: every switch of ℓ2-SAM from a uniform start against the scalar reduction (scipy
    DOP853 at rtol 1e-13, docs/theory.md §9), away from α_c (conditioning ~1) and at 1.01 α_c,
    where a relative error 1e-10 of the state moves the last switch by ~1e-7."""
    alphas = np.array([0.35, 0.4, 0.6, 0.8])
    out = drive(flows.L2SAM(1.0), DATA, _starts(alphas, 2), options=analysis.RunOptions())
    for k, a in enumerate(alphas):
        seq, times = scalar_switches(MU, a, 1.0, 60.0)
        n = len(times)
        assert [int(out["first"][k]), *out["after"][k, :n]] == seq
        tol = 2e-6 if a < 0.36 else 1e-8
        np.testing.assert_allclose(out["times"][k, :n], times, rtol=0, atol=tol)


@pytest.mark.parametrize("depth", [3, 4, 6])
def test_engine_switch_times_against_the_reduced_flow(depth):
    """L >= 3: the switch sequence and times of ℓ2-SAM against the reduced flow in w alone
    (scipy Radau at rtol 1e-12, docs/theory.md §8)."""
    alphas = np.array([0.5, 0.8]) * K_DIRECT[depth]
    out = drive(flows.L2SAM(1.0), DATA, _starts(alphas, depth), options=analysis.RunOptions())
    for k, a in enumerate(alphas):
        seq, times = l2sam_switches(MU, a, 1.0, depth)
        n = int(out["n_switches"][k])
        got = [int(out["first"][k]), *out["after"][k, :n]]
        assert got == seq[: n + 1]
        np.testing.assert_allclose(out["times"][k, :n], times[:n], rtol=1e-7)


def test_collapse_event_time_and_state():
    """The collapse ends where ‖θ‖ = collapse_tol ‖θ₀‖ (the run's first start) to 1e-12: the
    event is located to 1e-13 (a bisection loosened to 1e-10 moves the state by ~1e-9); its time
    against the scalar reduction's own event (DOP853 at rtol 1e-13)."""
    alpha = 0.05
    out = drive(flows.L2SAM(1.0), DATA, _starts([alpha], 2), options=analysis.RunOptions())
    assert out["code"][0] == analysis.REGIMES.index("collapse")
    theta0 = _starts([alpha], 2)[0]
    ratio = np.linalg.norm(out["theta"][0]) / np.linalg.norm(theta0)
    assert abs(ratio / 1e-6 - 1) < 1e-12

    def small(t, log_w):
        return np.log(np.sqrt(np.sum(np.exp(2 * log_w)))) - np.log(1e-6 * np.sqrt(5) * alpha)

    small.direction = -1
    sol, _ = scalar_reduction(MU, alpha, 1.0, 100.0, events=[small])
    assert abs(out["t_end"][0] - sol.t_events[0][0]) < 1e-9


def test_escape_levels_fixed_by_the_first_start():
    """An escape event of pass k ends where ‖θ‖ = e^k ‖θ₀‖ (e = 10 at L >= 3), whatever the step
    budget: ``max_steps`` changes the passes, not the regime, the switches or their times (t_end,
    where the certificates decided the run, is the end of a pass and may move)."""
    theta0 = _starts([0.9 * K_DIRECT[4]], 4)
    runs = [drive(flows.L2SAM(1.0), DATA, theta0, options=analysis.RunOptions(max_steps=m))
            for m in (8, 1024)]  # fmt: skip
    assert runs[0]["passes"][0] > runs[1]["passes"][0]
    assert runs[1]["status"][0] == flows.Status.ESCAPED
    level = np.linalg.norm(runs[1]["theta"][0]) / np.linalg.norm(theta0[0])
    assert abs(np.log10(level) - round(np.log10(level))) < 1e-12
    for key in ("code", "n_switches", "after"):
        np.testing.assert_array_equal(runs[0][key], runs[1][key])
    np.testing.assert_allclose(runs[0]["times"], runs[1]["times"], rtol=1e-9)


def test_order_guard_is_the_certificates():
    """The engine's q-order guard (flows._engine._order_kept, both state forms) against
    analysis._certify.keeps_invariant_order on random states near a tie of the q_j."""
    rng = np.random.default_rng(0)
    outcomes = set()
    for depth in (3, 4, 7):
        alpha = MU ** (-1.0 / (depth - 2)) * (1 + 1e-4 * rng.uniform(-1, 1, 5))
        theta0 = np.asarray(flows.balanced_init(alpha, depth, 5))
        q0 = MU * np.min(theta0, axis=0) ** (depth - 2)
        for _ in range(200):
            theta = theta0 * (1 + 1e-4 * rng.uniform(-1, 1, theta0.shape))
            want = bool(keeps_invariant_order(flows.L2SAM(1.0), theta0, theta, MU))
            q = np.zeros(5)
            flat = theta.reshape(-1)
            got = _engine._order_kept(flat, q0, MU, depth, 5, q, False)
            got_log = _engine._order_kept(np.log(flat), q0, MU, depth, 5, q, True)
            assert got == want and got_log == want
            outcomes.add(want)
    assert outcomes == {True, False}


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_regime_path_is_the_driver_on_one_point(backend):
    """analysis.regime_path is classify() on one point: the same sequence and times."""
    options = analysis.RunOptions(backend=backend)
    path = analysis.regime_path(flows.L2SAM(1.0), MU, 0.6, 3, options=options)
    out = classify(flows.L2SAM(1.0), DATA, _starts([0.6], 3), options=options)
    n = int(out["n_switches"][0])
    assert path.sequence == [int(out["first"][0]), *out["after"][0, :n]]
    np.testing.assert_array_equal(path.times, out["times"][0, :n])
    assert path.regime == analysis.REGIMES[int(out["code"][0])]


def test_backend_refusal_names_the_argument():
    with pytest.raises(ValueError, match="backend"):
        analysis.regime_path(flows.LinfSAM(0.1), [1.0, 2.0], 0.5, 2, backend="numba")
    with pytest.raises(ValueError, match="backend"):
        analysis.RunOptions(backend="gpu")


def test_the_engine_driver_compiles_no_jax_program():
    """The policy runs in NumPy between the engine's passes, on the whole batch: runs of a new
    size, depth and dimension compile no XLA program (the vmapped JAX policy compiled six, in
    every process, for every batch size, depth and method)."""
    import jax

    compiled = []

    def listen(event, duration, fun_name=None, **_):
        if event.endswith("backend_compile_duration"):
            compiled.append(fun_name)

    data = flows.single_example([1.0, 2.5, 3.0, 4.0, 4.5, 7.0])
    theta0 = np.stack([np.asarray(flows.balanced_init(a, 7, 6)) for a in (0.05, 0.4, 0.9)])
    jax.monitoring.register_event_duration_secs_listener(listen)
    out = drive(flows.L2SAM(0.7), data, theta0, options=analysis.RunOptions())
    assert compiled == []
    assert out["code"].shape == (3,) and np.all(out["code"] >= 0)
    # a boundary search's rounds too (their start codes: analysis._drive.start_codes)
    alpha_c = analysis.critical_alpha(flows.L2SAM(0.7), [1.0, 2.5, 3.0, 4.0, 4.5, 7.0], depth=6)
    assert compiled == []
    assert 0.0 < alpha_c < 0.7


@pytest.mark.parametrize("depth", [1, 2, 5, 8])
def test_start_codes_are_the_jax_start_code_of_each_start(depth):
    """Pass 0 of the engine driver (analysis._drive.start_codes, j†(0+) from the engine's own
    field) gives each start the code of analysis._run.start_code (JAX's field), for every
    engine method: starts at, below and above ρ, tied α_j and tied μ_j (the tie rule reads the
    rates)."""
    from analysis._drive import start_codes
    from analysis._run import start_code

    mu = [1.0, 3.0, 3.0, 0.5, 2.0]
    data = flows.single_example(mu)
    alphas = np.array([[0.3] * 5, [2.0] * 5, [0.05, 0.2, 0.2, 1.0, 0.35], [0.5, 0.5, 0.5, 2.0, 2.0],
                       [1.0, 0.3, 0.3, 0.3, 0.6]])  # fmt: skip
    theta0 = np.repeat(alphas[:, None, :], depth, axis=1)
    methods = [flows.GD(), flows.L2SAM(0.3), flows.L2SAM(0.3, per_layer=True),
               flows.LinfSAM(0.2, delta=0.05), flows.LESAM(0.35, 0.3)]  # fmt: skip
    for method in methods:
        for need in ("escape", "path"):
            got = start_codes(method, data, theta0, loss="logistic", need=need)
            want = [int(start_code(method, data, th, need=need)) for th in theta0]
            assert got.tolist() == want, (method, need)
