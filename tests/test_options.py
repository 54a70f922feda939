"""flows._options: SolverOptions' checks at construction, ``replace``, the escape threshold of
every depth, the absolute tolerance of a run, and the error norm's clock entry."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from flows._options import error_norm


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(rtol=0.0), "rtol"),
        (dict(rtol=1.0), "rtol"),
        (dict(rtol=np.nan), "rtol"),
        (dict(rtol=None), "rtol"),
        (dict(atol=-1.0), "atol"),
        (dict(atol="relative"), "atol"),
        (dict(atol=jnp.zeros(2)), "atol"),
        (dict(max_steps=0), "max_steps"),
        (dict(max_steps=2**62 + 1), "max_steps"),
        (dict(collapse_tol=1.0), "collapse_tol"),
        (dict(escape_tol=1.0), "escape_tol"),
        (dict(loss_tol=0.0), "loss_tol"),
        (dict(backend="jax"), "backend"),
        (dict(solver="rk4"), "solver"),
        (dict(solver=diffrax.Euler()), "solver"),  # not adaptive
        (dict(backend="scipy", solver="tsit5"), "solver"),
        (dict(backend="numba", solver="dopri8"), "solver"),
        (dict(dense=1), "dense"),
        (dict(backend="scipy", dense=True), "dense"),
        (dict(real_time="yes"), "real_time"),
    ],
)
def test_a_bad_option_is_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        flows.SolverOptions(**kwargs)


def test_the_defaults_and_each_backends_default_solver():
    o = flows.SolverOptions()
    assert (o.backend, o.rtol, o.atol, o.max_steps) == ("diffrax", 1e-8, "auto", 100_000)
    assert (o.collapse_tol, o.escape_tol, o.loss_tol, o.dense) == (1e-6, "auto", None, False)
    assert type(o.solver).__name__ == "Tsit5"
    assert flows.SolverOptions(backend="scipy").solver == "LSODA"
    assert flows.SolverOptions(backend="numba").solver == "tsit5"


def test_replace_checks_again_and_keeps_the_rest():
    o = flows.SolverOptions(rtol=1e-10, max_steps=500, collapse_tol=1e-3)
    r = o.replace(rtol=1e-6)
    assert (r.rtol, r.max_steps, r.collapse_tol) == (1e-6, 500, 1e-3)
    assert o.rtol == 1e-10  # frozen: a copy
    with pytest.raises(ValueError, match="`rtol`"):
        o.replace(rtol=2.0)
    with pytest.raises(ValueError, match="'step_budget'"):
        o.replace(step_budget=10)
    # a solver object built for one backend is not carried to another
    assert o.replace(backend="scipy").solver == "LSODA"


@pytest.mark.parametrize(
    ("depth", "expected"),
    [(1, 1e6), (2, 1e6), (3, 1e10), (4, 1e5), (7, 100.0), (12, 10.0)],
)
def test_the_automatic_escape_is_where_the_norm_clocks_rate_reaches_1e10(depth, expected):
    """E_L = 10^{10/(L-2)} at L >= 3 (the rate (‖θ‖/‖θ₀‖)^{L-2} = 1e10), 1e6 at L <= 2."""
    o = flows.SolverOptions()
    np.testing.assert_allclose(o.escape(True, depth), expected, rtol=1e-14)
    assert o.escape(False, depth) is None  # none for the plain flow
    assert flows.SolverOptions(escape_tol=50.0).escape(True, depth) == 50.0


def test_the_absolute_tolerance_of_a_run():
    """``"auto"``: 1e-10 max|θ₀| (1e-10 where θ₀ is 0 or not finite); a number is itself."""
    o = flows.SolverOptions()
    theta0 = jnp.array([[-3.0, 2.0], [0.5, 1.0]])
    np.testing.assert_allclose(float(o.atol_for(theta0)), 3e-10, rtol=1e-15)
    np.testing.assert_allclose(float(o.atol_for(1e-200 * theta0)), 3e-210, rtol=1e-15)
    assert float(o.atol_for(jnp.zeros((2, 2)))) == 1e-10
    assert float(o.atol_for(jnp.full((2, 2), jnp.inf))) == 1e-10
    assert flows.SolverOptions(atol=1e-7).atol_for(theta0) == 1e-7


def test_a_traced_atol_that_is_not_positive_becomes_nan():
    """A traced atol cannot be checked at construction: a bad one fails the run (NaN), never
    silently."""

    def atol(value):
        return flows.SolverOptions(atol=value).atol_for(jnp.ones((2, 2)))

    assert float(jax.jit(atol)(jnp.asarray(1e-9))) == 1e-9
    for bad in (0.0, -1.0, np.inf):
        assert np.isnan(float(jax.jit(atol)(jnp.asarray(bad))))


def test_the_error_norm_counts_the_clocks_excess_entry_as_zero():
    """RMS over every entry, the clock's excess ``o`` set to 0 (still counted in the mean)."""
    theta = jnp.array([[3.0, 4.0]])
    clock = jnp.array([0.0, 1e30])  # (t, o): o far above any tolerance
    np.testing.assert_allclose(float(error_norm((theta, clock))), np.sqrt(25.0 / 4), rtol=1e-15)
    np.testing.assert_allclose(float(error_norm(theta)), np.sqrt(25.0 / 2), rtol=1e-15)


@pytest.mark.parametrize(
    ("cls", "field", "good", "bad"),
    [
        (flows.SolverOptions, "max_steps", 10, 0),
        (flows.SweepOptions, "chunk_size", 64, 0),
        (analysis.RunOptions, "max_passes", 3, 0),
    ],
)
def test_every_options_object_has_one_idiom(cls, field, good, bad):
    """Checked at construction, ``replace`` returns a copy checked again, an unknown name is
    refused by name (docs/numerics.md)."""
    with pytest.raises(ValueError, match=f"`{field}`"):
        cls(**{field: bad})
    options = cls()
    changed = options.replace(**{field: good})
    assert type(changed) is cls and getattr(changed, field) == good
    assert getattr(options, field) != good  # a copy
    with pytest.raises(ValueError, match=f"`{field}`"):
        options.replace(**{field: bad})
    with pytest.raises(ValueError, match="'no_such_option'"):
        options.replace(no_such_option=1)


@pytest.mark.parametrize("depth, escape", [(2, 1e3), (3, 10.0), (8, 10.0)])
def test_the_analysis_checks_its_solver_options_once(monkeypatch, depth, escape):
    """``analysis.RunOptions`` checks its fields at construction; the solver options of its
    passes are built from them without a second check, and equal the ones the public
    constructor builds from the same values (escape: 1e3 at L <= 2, 10 at L >= 3)."""
    run = analysis.RunOptions(collapse_tol=1e-3, rtol=1e-9, max_steps=77)
    checked = []
    for name in ("_check_tol", "_check_dynamic"):
        check = getattr(flows._options, name)
        spy = lambda label, *a, _check=check, **k: checked.append(label) or _check(label, *a, **k)  # noqa: E731
        monkeypatch.setattr(flows._options, name, spy)
    got = run.solver(depth)
    assert checked == []
    monkeypatch.undo()
    assert got == flows.SolverOptions(collapse_tol=1e-3, rtol=1e-9, max_steps=77, escape_tol=escape)
    assert jax.tree.structure(got) == jax.tree.structure(flows.SolverOptions())
    with pytest.raises(ValueError, match="'collapse'"):
        flows.internal.checked_solver_options(collapse=1e-3)
