"""Bad input gets a ValueError naming the argument (issue 2, test 7)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows

DATA = flows.single_example([1.0, 2.0])
THETA = flows.balanced_init(0.5, 2, d=2)


def _solve_schedule(sigma):
    return flows.solve(flows.LESAM(sigma, 0.3), DATA, THETA, t1=1.0)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: flows.Dataset([[1.0, 2.0]], [0.5]), "`y`"),
        (lambda: flows.Dataset([[1.0, 2.0]], [1.0, -1.0]), "`y`"),
        (lambda: flows.Dataset([1.0, 2.0], [1.0]), "`X`"),
        (lambda: flows.Dataset([[1.0, np.nan]], [1.0]), "`X`"),
        (lambda: flows.Dataset([[1.0, np.inf]], [1.0]), "`X`"),
        (lambda: flows.single_example([[1.0, 2.0]]), "`mu`"),
        (lambda: flows.single_example([1.0, np.nan]), "`mu`"),
        (lambda: flows.balanced_init(0.0, 2, d=2), "`alpha`"),
        (lambda: flows.balanced_init(-1.0, 2, d=2), "`alpha`"),
        (lambda: flows.balanced_init(np.nan, 2, d=2), "`alpha`"),
        (lambda: flows.balanced_init([0.5, -0.1], 2), "`alpha`"),
        (lambda: flows.balanced_init(0.5, 0, d=2), "`depth`"),
        (lambda: flows.balanced_init(0.5, 2.5, d=2), "`depth`"),
        (lambda: flows.balanced_init(0.5, 2), "`d`"),
        (lambda: flows.balanced_init([0.5, 0.5], 2, d=3), "`d`"),
        (lambda: flows.L2SAM(-0.1), "`rho`"),
        (lambda: flows.L2SAM(np.inf), "`rho`"),
        (lambda: flows.L2SAM([0.1, 0.2]), "`rho`"),
        (lambda: flows.L2SAM(0.1, per_layer="yes"), "`per_layer`"),
        (lambda: flows.LinfSAM(-0.1), "`rho`"),
        (lambda: flows.LESAM(-0.1, 0.3), "`sigma`"),
        (lambda: flows.LESAM(0.3, -0.3), "`rho_max`"),
        (lambda: flows.LESAM(0.3, 0.3, eps=0.0), "`eps`"),
        (lambda: flows.solve("gd", DATA, THETA, t1=1.0), "`method`"),
        (lambda: flows.solve(flows.GD(), (DATA.X, DATA.y), THETA, t1=1.0), "`data`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA[:, :1], t1=1.0), "`theta0`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA[0], t1=1.0), "`theta0`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA * np.nan, t1=1.0), "`theta0`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=-1.0), "`t1`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, ts=[0.5, 2.0]), "`ts`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, ts=[0.5, 0.2]), "`ts`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, loss="hinge"), "`loss`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, backend="torch"), "`backend`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, solver="euler"), "`solver`"),
        (
            lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, backend="scipy", solver="tsit5"),
            "`solver`",
        ),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, rtol=0.0), "`rtol`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, atol=-1.0), "`atol`"),
        (lambda: flows.SolverOptions(atol=np.array(-1e-12)), "`atol`"),
        (lambda: flows.SolverOptions(atol=jnp.asarray(np.inf)), "`atol`"),
        (lambda: flows.SolverOptions(atol=jnp.asarray(np.nan)), "`atol`"),
        (lambda: flows.SolverOptions(atol=np.array(0.0)), "`atol`"),
        (lambda: flows.SolverOptions(atol=jnp.array([1e-12, 1e-12])), "`atol`"),
        (lambda: flows.SolverOptions(atol=jnp.array(1, dtype=jnp.int32)), "`atol`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, max_steps=0), "`max_steps`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, collapse_tol=2.0), "`collapse_tol`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, escape_tol=0.5), "`escape_tol`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, loss_tol=-1.0), "`loss_tol`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, rescaled="yes"), "`rescaled`"),
        (
            lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, backend="scipy", dense=True),
            "`dense`",
        ),
        (
            lambda: flows.solve(
                flows.GD(),
                flows.Dataset([[1.0, 2.0], [2.0, 1.0]], [1, -1]),
                THETA,
                t1=1.0,
                rescaled=True,
            ),
            "`rescaled=True`",
        ),
        # an LE-SAM schedule σ(t) must give a finite number >= 0 (issue 11)
        (lambda: _solve_schedule(lambda t: jnp.nan * t), "`sigma`"),
        (lambda: _solve_schedule(lambda t: 0.3 - t), "`sigma`"),  # negative at t1
        (lambda: _solve_schedule(lambda t: jnp.array([0.1, 0.2])), "`sigma`"),
        (lambda: _solve_schedule(lambda: 0.1), "`sigma`"),  # not a function of t
        # the options object
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, options={"rtol": 1e-9}), "`options`"),
        (lambda: flows.solve(flows.GD(), DATA, THETA, t1=1.0, rtoll=1e-9), "'rtoll'"),
        (lambda: flows.SolverOptions(rtol=2.0), "`rtol`"),
        (lambda: flows.SolverOptions(real_time="yes"), "`real_time`"),
        (lambda: flows.SolverOptions(backend="scipy", dense=True), "`dense`"),
        (lambda: flows.SolverOptions(backend="scipy", solver="tsit5"), "`solver`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA, lr=0.0, steps=10), "`lr`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA, lr=0.1, steps=0), "`steps`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA, lr=0.1, steps=10, every=3), "`steps`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA, lr=0.1, steps=10, every=0), "`every`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA, lr=0.1, steps=10, loss="mse"), "`loss`"),
        (lambda: flows.iterate(flows.GD(), DATA, THETA[:, :1], lr=0.1, steps=10), "`theta0`"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(call, name):
    """Each call raises a ValueError whose message names the argument."""
    with pytest.raises(ValueError, match=name.replace("(", r"\(").replace("[", r"\[")):
        call()


def test_traced_negative_rho_is_a_checked_error():
    """Inside jit the value is unknown at trace time: a checked runtime error, not a NaN."""

    @jax.jit
    def run(rho):
        return flows.solve(flows.L2SAM(rho), DATA, THETA, t1=1.0).status

    assert int(run(0.1)) == flows.Status.OK
    with pytest.raises(Exception, match="rho"):
        jax.block_until_ready(run(-0.1))


def test_scipy_backend_refuses_tracers():
    with pytest.raises(ValueError, match="backend='scipy'"):
        jax.jit(
            lambda a: (
                flows.solve(
                    flows.GD(), DATA, flows.balanced_init(a, 2, d=2), t1=1.0, backend="scipy"
                ).status
            )
        )(0.5)


# --- issue 15: the argument is named, and a wrong type is a TypeError ---------------------

DATA3 = flows.single_example([1.0, 2.0, 3.0])
THETA3 = flows.balanced_init(0.5, 2, 3)
TWO = flows.Dataset([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], [1, -1])


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: flows.balanced_init([0.5, 0.5], 2, d="2"), TypeError, "`d`"),
        (lambda: flows.balanced_init("a", 2, d=2), TypeError, "`alpha`"),
        (lambda: flows.Dataset([["a", "b"]], [1]), TypeError, "`X`"),
        (lambda: flows.Dataset(None, [1]), TypeError, "`X`"),
        (lambda: flows.Dataset([[1.0, 2.0], [3.0]], [1, 1]), ValueError, "`X`"),
        (lambda: flows.Dataset([[1.0, 2.0]], ["a"]), TypeError, "`y`"),
        (lambda: flows.Dataset([[1.0, 2.0]], None), TypeError, "`y`"),
        (lambda: flows.single_example("abc"), TypeError, "`mu`"),
        (lambda: flows.single_example([1.0, None]), TypeError, "`mu`"),
        (lambda: flows.L2SAM(None), TypeError, "`rho`"),
        (lambda: flows.L2SAM(1 + 2j), TypeError, "`rho`"),
        (lambda: flows.LinfSAM(0.1, delta="x"), TypeError, "`delta`"),
        (lambda: flows.LESAM("abc", 0.3), TypeError, "`sigma`"),
        (lambda: flows.LESAM(0.3, None), TypeError, "`rho_max`"),
        (
            lambda: flows.velocity(flows.GD(), DATA3, "logistic", THETA3 * np.nan),
            ValueError,
            "`theta`",
        ),
        (lambda: flows.velocity(flows.GD(), DATA3, "logistic", THETA3[0]), ValueError, "`theta`"),
        (
            lambda: flows.velocity(flows.GD(), DATA3, "logistic", THETA3[:, :2]),
            ValueError,
            "`theta`",
        ),
        (lambda: flows.velocity(flows.GD(), DATA3, "logistic", "abc"), TypeError, "`theta`"),
        (lambda: flows.velocity("gd", DATA3, "logistic", THETA3), TypeError, "`method`"),
        (
            lambda: flows.velocity(flows.GD(), (DATA3.X, DATA3.y), "logistic", THETA3),
            TypeError,
            "`data`",
        ),
        (lambda: flows.velocity(flows.GD(), DATA3, "mse", THETA3), ValueError, "`loss`"),
        (lambda: flows.velocity(flows.GD(), DATA3, ["logistic"], THETA3), ValueError, "`loss`"),
        (
            lambda: flows.velocity(flows.GD(), DATA3, "logistic", THETA3, t=np.nan),
            ValueError,
            "`t`",
        ),
        (
            lambda: flows.rescaled_velocity(flows.GD(), TWO, "logistic", THETA3),
            ValueError,
            "`data`",
        ),
        (
            lambda: flows.rescaled_velocity(flows.GD(), DATA3, "logistic", THETA3 * np.inf),
            ValueError,
            "`theta`",
        ),
        (lambda: flows.objective(THETA3[0], DATA3), ValueError, "`theta`"),
        (lambda: flows.objective(THETA3, "data"), TypeError, "`data`"),
        (lambda: flows.objective(THETA3, DATA3, loss="hinge"), ValueError, "`loss`"),
        (lambda: flows.margins(THETA3[:, :2], DATA3), ValueError, "`theta`"),
        (lambda: flows.margins(THETA3[None], DATA3), ValueError, "`theta`"),
        (lambda: flows.margins(THETA3, None), TypeError, "`data`"),
        (lambda: flows.beta([1.0, 2.0]), ValueError, "`theta`"),
        (lambda: flows.beta("abc"), TypeError, "`theta`"),
        (lambda: flows.loss_fn("logistic", "a"), TypeError, "`z`"),
        (lambda: flows.loss_derivative("hinge", 1.0), ValueError, "`loss`"),
        (lambda: flows.iterate("gd", DATA3, THETA3, lr=0.1, steps=1), TypeError, "`method`"),
        (lambda: flows.iterate(flows.GD(), None, THETA3, lr=0.1, steps=1), TypeError, "`data`"),
        (lambda: flows.iterate(flows.GD(), DATA3, THETA3, lr="a", steps=1), TypeError, "`lr`"),
        (lambda: flows.iterate(flows.GD(), DATA3, THETA3, lr=0.1, steps=2.0), TypeError, "`steps`"),
        (lambda: flows.solve(flows.GD(), DATA3, THETA3, t1=1.0, ts="abc"), TypeError, "`ts`"),
        (lambda: flows.solve(flows.GD(), DATA3, THETA3, t1=1.0, ts=1 + 2j), TypeError, "`ts`"),
        (lambda: flows.solve(flows.GD(), DATA3, THETA3, t1=1, ts=[0.0, [1.0]]), ValueError, "`ts`"),
        (
            lambda: flows.solve(flows.GD(), DATA3, THETA3, t1=1.0, backend=np.ones(2)),
            ValueError,
            "`backend`",
        ),
    ],
)
def test_issue15_bad_input_names_the_argument(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_wrong_type_errors_are_also_value_errors():
    """Old callers catch ValueError; the wrong-type error is both (as numpy's AxisError)."""
    with pytest.raises(ValueError, match="`rho`"):
        flows.L2SAM(None)


def test_velocity_stays_traceable():
    """The checks are static or skipped for tracers: jit and vmap still work."""
    v = flows.velocity(flows.L2SAM(0.3), DATA3, "logistic", THETA3)
    jitted = jax.jit(lambda th: flows.velocity(flows.L2SAM(0.3), DATA3, "logistic", th))
    np.testing.assert_allclose(jitted(THETA3), v, rtol=1e-14)
    batch = jax.vmap(
        lambda a: flows.rescaled_velocity(
            flows.GD(), DATA3, "logistic", flows.balanced_init(a, 2, 3)
        )
    )(np.array([0.5, 1.0]))
    # GD, L = 2, balanced start α: ∇m = (μ α, μ α) on both layers
    np.testing.assert_allclose(batch[:, 0], np.array([0.5, 1.0])[:, None] * [1.0, 2.0, 3.0])


def test_iterate_reports_overflowing_beta_as_nonfinite():
    """lr = 1e300: one step sends w to ~1e299 (finite) and β = w² to inf (issue 15)."""
    traj = flows.iterate(flows.GD(), DATA3, THETA3, lr=1e300, steps=10)
    assert np.all(np.isfinite(np.asarray(traj.theta_end)))  # the weights alone are finite
    assert not np.all(np.isfinite(np.asarray(traj.beta[-1])))
    assert traj.status_name == "nonfinite"
    assert flows.iterate(flows.GD(), DATA3, THETA3, lr=0.1, steps=10).status_name == "ok"


def test_object_arrays_of_numbers_are_accepted():
    """An object array of numbers converts (None in it is refused, not turned into NaN)."""
    data = flows.single_example(np.array([1, 2], dtype=object))
    assert np.asarray(data.X).tolist() == [[1.0, 2.0]]
    with pytest.raises(TypeError, match="`mu`"):
        flows.single_example(np.array([1, None], dtype=object))


def test_options_object_equals_its_keywords():
    """``options=SolverOptions(...)`` is the same solve as the keywords it holds."""
    kw = dict(rtol=1e-9, atol=1e-11, max_steps=500, collapse_tol=None)
    a = flows.solve(flows.L2SAM(0.2), DATA, THETA, t1=2.0, **kw)
    b = flows.solve(flows.L2SAM(0.2), DATA, THETA, t1=2.0, options=flows.SolverOptions(**kw))
    np.testing.assert_array_equal(np.asarray(a.thetas), np.asarray(b.thetas))
    assert int(a.n_steps) == int(b.n_steps)
    assert flows.SolverOptions(**kw).replace(rtol=1e-7).rtol == 1e-7


def test_an_array_atol_is_the_same_solve_as_its_number():
    """A 0-d array ``atol`` (a dynamic leaf, traceable) is the absolute tolerance it holds."""
    kw = dict(rtol=1e-9, max_steps=500, collapse_tol=None)
    a = flows.solve(flows.L2SAM(0.2), DATA, THETA, t1=2.0, atol=1e-11, **kw)
    for atol in (np.float64(1e-11), np.array(1e-11), jnp.asarray(1e-11)):
        b = flows.solve(flows.L2SAM(0.2), DATA, THETA, t1=2.0, atol=atol, **kw)
        np.testing.assert_array_equal(np.asarray(a.thetas), np.asarray(b.thetas))
        assert int(a.n_steps) == int(b.n_steps)


def test_keyword_shortcuts_are_applied_to_the_options_object():
    """A keyword shortcut replaces that field of the options object and keeps the others (one
    rule for flows.SolverOptions, flows.SweepOptions and analysis.RunOptions)."""
    import analysis
    from flows._options import solver_options

    got = solver_options(flows.SolverOptions(rtol=1e-9, backend="scipy"), {"max_steps": 5})
    assert (got.rtol, got.max_steps, got.backend, got.solver) == (1e-9, 5, "scipy", "LSODA")
    assert solver_options(got, {"backend": "diffrax"}).solver.__class__.__name__ == "Tsit5"
    run = analysis.RunOptions(max_passes=3).replace(rtol=1e-12)
    assert (run.max_passes, run.rtol, run.max_steps) == (3, 1e-12, analysis.RunOptions().max_steps)
    from flows._sweep._run import sweep_options

    sweep = sweep_options(flows.SweepOptions(workers=1), {"chunk_size": 4})
    assert (sweep.workers, sweep.chunk_size, sweep.executor) == (1, 4, None)
