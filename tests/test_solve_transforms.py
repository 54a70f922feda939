"""jit, vmap and pytree behaviour; float64 everywhere."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows


def test_trajectory_is_a_float64_pytree():
    traj = flows.solve(
        flows.L2SAM(0.2), flows.single_example([1.0, 2.0]), flows.balanced_init(0.5, 2, d=2), t1=1.0
    )
    leaves = jax.tree_util.tree_leaves(traj)
    assert len(leaves) >= 9
    for leaf in leaves:  # float64 values, int64 codes and counts, bool flags (`ambiguous`)
        assert leaf.dtype in (jnp.float64, jnp.int64, jnp.bool_), leaf.dtype
    assert traj.ambiguous.dtype == jnp.bool_
    assert traj.status.dtype == jnp.int64
    assert flows.Status.name(traj.status) == "ok"
    codes = np.arange(8)  # ok .. sigma_negative
    assert list(flows.Status.name(codes)) == list(flows.Status.NAMES)


def test_status_name_reads_the_sweep_fill_and_refuses_other_codes():
    """-1 is flows.sweep's fill for a point that raised; before, it read "sliding_failed"."""
    assert list(flows.Status.name([2, -1])) == ["escaped", "failed"]
    for bad in (8, -2, 2.0, "ok", None, [1, [2]]):
        with pytest.raises(ValueError, match="`code`"):
            flows.Status.name(bad)


def test_vmap_solve_over_alpha_and_rho_equals_single_solves():
    data = flows.single_example([1.0, 2.0, 3.0])
    alphas = jnp.array([0.05, 0.3, 0.6, 1.0])
    rhos = jnp.array([0.5, 0.5, 0.2, 0.1])
    ts = jnp.linspace(0, 8.0, 17)

    def one(a, r):
        return flows.solve(
            flows.L2SAM(r), data, flows.balanced_init(a, 2, d=3), t1=8.0, ts=ts, rescaled=True
        )

    batch = jax.jit(jax.vmap(one))(alphas, rhos)
    assert batch.thetas.shape == (4, 17, 2, 3) and batch.status.shape == (4,)
    for i in range(4):
        single = one(alphas[i], rhos[i])
        assert int(batch.status[i]) == int(single.status)
        np.testing.assert_allclose(float(batch.t_end[i]), float(single.t_end), rtol=1e-9)
        np.testing.assert_allclose(
            np.asarray(batch.thetas[i]), np.asarray(single.thetas), rtol=1e-7, atol=1e-12
        )
    # small α collapses, large α escapes: each point keeps its own status
    assert batch.status_name[0] == "collapsed" and batch.status_name[-1] == "escaped"


def test_vmap_over_sigma_and_theta0():
    data = flows.single_example([1.0, 2.0])
    sigmas = jnp.array([0.1, 0.35])
    theta0s = jnp.stack([flows.balanced_init(0.4, 2, d=2), jnp.array([[0.3, 0.6], [0.5, 0.2]])])
    out = jax.vmap(lambda s, th: flows.solve(flows.LESAM(s, 0.3), data, th, t1=2.0))(
        sigmas, theta0s
    )
    assert out.beta.shape == (2, 101, 2)
    single = flows.solve(flows.LESAM(0.35, 0.3), data, theta0s[1], t1=2.0)
    np.testing.assert_allclose(np.asarray(out.beta[1]), np.asarray(single.beta), rtol=1e-8)


def test_vmap_iterate_over_lr_and_rho():
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(0.5, 2, d=2)
    run = jax.jit(
        jax.vmap(
            lambda lr, r: flows.iterate(flows.L2SAM(r), data, theta0, lr=lr, steps=100, every=50)
        )
    )
    out = run(jnp.array([0.01, 0.02]), jnp.array([0.1, 0.2]))
    single = flows.iterate(flows.L2SAM(0.2), data, theta0, lr=0.02, steps=100, every=50)
    np.testing.assert_allclose(np.asarray(out.thetas[1]), np.asarray(single.thetas), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(out.ts[1]), [0.0, 1.0, 2.0])


def test_vmap_balanced_init_over_alpha():
    th = jax.vmap(lambda a: flows.balanced_init(a, 3, d=4))(jnp.array([0.1, 0.2]))
    assert th.shape == (2, 3, 4) and th.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(th[1]), 0.2)


def test_float32_input_becomes_float64():
    data = flows.Dataset(np.array([[1.0, 2.0]], dtype=np.float32), np.array([1], dtype=np.int32))
    assert data.X.dtype == jnp.float64 and data.y.dtype == jnp.float64
    traj = flows.iterate(flows.GD(), data, np.ones((2, 2), dtype=np.float32), lr=0.1, steps=2)
    assert traj.thetas.dtype == jnp.float64 and traj.loss.dtype == jnp.float64


def test_dense_output_matches_closed_form():
    """GD rescaled, L = 2, balanced: w_j(τ) = α e^{μ_j τ}."""
    mu = jnp.array([1.0, 2.0])
    traj = flows.solve(
        flows.GD(),
        flows.single_example(mu),
        flows.balanced_init(0.5, 2, d=2),
        t1=2.0,
        rescaled=True,
        dense=True,
        rtol=1e-11,
        atol=1e-13,
    )
    for tau in (0.123, 1.0, 1.77):
        np.testing.assert_allclose(
            np.asarray(traj.evaluate(tau))[0], 0.5 * np.exp(mu * tau), rtol=1e-9
        )


def test_vmap_mixes_points_with_and_without_events():
    """Under vmap diffrax root-finds for every member, also those that reached t1."""
    data = flows.single_example([1.0, 2.0, 3.0])
    alphas = jnp.array([0.05, 0.3, 1.0])  # collapse, no event before t1, escape

    def one(a):
        return flows.solve(
            flows.L2SAM(0.5),
            data,
            flows.balanced_init(a, 2, d=3),
            t1=1.5,
            rescaled=True,
            escape_tol=10.0,
        )

    batch = jax.jit(jax.vmap(one))(alphas)
    assert list(batch.status_name) == ["collapsed", "ok", "escaped"]
    for i in range(3):
        np.testing.assert_allclose(float(batch.t_end[i]), float(one(alphas[i]).t_end), rtol=1e-10)
