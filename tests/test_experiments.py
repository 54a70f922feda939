"""Tests of the experiments package against independent values: hand-computed Grad-CAM maps,
closed-form Hessians, optax's SAM, scikit-learn's documented digit counts, and one quick run."""

import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.stats
import xarray as xr

import analysis
import experiments
import flows
from experiments import _diagonal, _regime_map
from experiments._cnn import CNN, L2, LESAM, LINF, sam_step
from tests.helpers import numpy_logistic_grad, numpy_perturbation

# --- Grad-CAM and saliency ------------------------------------------------------


def test_gradcam_pooled_head_by_hand():
    # A_1 = top-left quadrant, A_2 = bottom-right; head = W · mean(A), W_0 = (3, -1):
    # α = (3, -1)/16, CAM = relu(3/16 A_1 - 1/16 A_2) = 3/16 on the top-left quadrant, else 0.
    A = np.zeros((2, 4, 4))
    A[0, :2, :2] = 1.0
    A[1, 2:, 2:] = 1.0
    W = jnp.array([[3.0, -1.0], [0.0, 1.0]])
    cam = experiments.gradcam(
        lambda x: x, lambda a: W @ jnp.mean(a, axis=(1, 2)), jnp.asarray(A), 0
    )
    expected = np.zeros((4, 4))
    expected[:2, :2] = 3 / 16
    np.testing.assert_allclose(np.asarray(cam), expected, rtol=0, atol=1e-15)
    # class 1: α = (0, 1)/16, CAM = A_2 / 16
    cam1 = experiments.gradcam(
        lambda x: x, lambda a: W @ jnp.mean(a, axis=(1, 2)), jnp.asarray(A), 1
    )
    np.testing.assert_allclose(np.asarray(cam1), A[1] / 16, rtol=0, atol=1e-15)


def _hand_cnn():
    # width 2: conv1 = (+center tap, -center tap), conv2 = identity per channel, so
    # A = (relu(x), relu(-x)); head class 0 has weight 1 on map 0 and 2 on map 1 everywhere.
    model = CNN(jax.random.PRNGKey(0), classes=2, width=2)
    w1 = np.zeros((2, 1, 3, 3), np.float32)
    w1[0, 0, 1, 1], w1[1, 0, 1, 1] = 1.0, -1.0
    w2 = np.zeros((2, 2, 3, 3), np.float32)
    w2[0, 0, 1, 1] = w2[1, 1, 1, 1] = 1.0
    w3 = np.zeros((2, 2, 8, 8), np.float32)
    w3[0, 0], w3[0, 1] = 1.0, 2.0
    zeros = lambda n: jnp.zeros((n,), jnp.float32)  # noqa: E731
    return eqx.tree_at(
        lambda m: (m.w1, m.b1, m.w2, m.b2, m.w3, m.b3),
        model,
        (jnp.asarray(w1), zeros(2), jnp.asarray(w2), zeros(2), jnp.asarray(w3), zeros(2)),
    )


def test_gradcam_and_saliency_on_hand_built_cnn():
    model = _hand_cnn()
    x = np.random.default_rng(0).standard_normal((1, 8, 8)).astype(np.float32)
    # α_k = mean of head weights over the grid = (1, 2): CAM = relu(x) + 2 relu(-x)
    cam = experiments.gradcam(model.features, model.classify, jnp.asarray(x), 0)
    expected = np.where(x[0] > 0, x[0], -2 * x[0])
    np.testing.assert_allclose(np.asarray(cam), expected, rtol=1e-6)
    # f_0 = Σ relu(x) + 2 Σ relu(-x): ∂f_0/∂x = 1 where x > 0, -2 where x < 0
    sal = experiments.saliency(model, jnp.asarray(x), 0)
    np.testing.assert_allclose(np.asarray(sal), np.where(x[0] > 0, 1.0, 2.0), rtol=1e-6)


def test_minor_share_and_bad_input():
    maps = jnp.array([[[1.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [5.0, 5.0]]])
    minor = jnp.array([[True, False], [False, False]])
    major = jnp.array([[False, True], [False, False]])
    share = np.asarray(experiments.minor_share(maps, minor, major))
    assert share[0] == pytest.approx(0.25) and np.isnan(share[1])
    with pytest.raises(ValueError, match="features"):
        experiments.gradcam(lambda x: x[0], lambda a: a.sum(0), jnp.ones((2, 3, 3)), 0)


# --- the diagonal-network experiment -------------------------------------------------


def test_diagonal_radius_is_the_numpy_rule_at_every_saved_iterate():
    """The experiment's `radius` of a batch of LE-SAM runs (one per seed, a cosine schedule on
    the real clock t = kη) is ‖ε‖ of the numpy perturbation rule at each saved iterate and time;
    ρ itself for ℓ2-SAM, 0 for GD."""
    rng = np.random.default_rng(0)
    X2 = rng.standard_normal((2, 6, 4))
    Y = np.where(rng.random((2, 6)) < 0.5, -1.0, 1.0)
    method = flows.LESAM(lambda t: 0.05 * 0.5 * (1 + jnp.cos(jnp.pi * t / 2.0)), 0.3)
    theta0 = jnp.full((2, 2, 4), 0.3)

    def one(X, y, th):
        return flows.iterate(method, flows.Dataset(X, y), th, lr=0.1, steps=20, every=5)

    runs = jax.vmap(one)(jnp.asarray(X2), jnp.asarray(Y), theta0)
    got = _diagonal._radius(method, "LE-SAM", runs, X2, Y)
    thetas, ts = np.asarray(runs.thetas), np.arange(5) * 0.5
    want = [
        [
            np.linalg.norm(
                numpy_perturbation(
                    method, numpy_logistic_grad(thetas[s, k], flows.Dataset(X2[s], Y[s])), t=t
                )
            )
            for k, t in enumerate(ts)
        ]
        for s in range(2)
    ]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    capped = np.isclose(got, 0.3, rtol=1e-12, atol=0)
    assert capped.any() and (~capped & (got > 0)).any()  # both branches of the rule occur
    assert np.all(_diagonal._radius(flows.L2SAM(0.4), "ℓ2-SAM", runs, X2, Y) == 0.4)
    assert np.all(_diagonal._radius(flows.GD(), "GD", runs, X2, Y) == 0.0)


# --- curvature --------------------------------------------------------------------


def _logistic_problem():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 6))
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    w = 0.3 * rng.standard_normal(6)
    # closed form: H = (1/n) Σ p(1-p) x xᵀ with p = σ(y wᵀx)
    p = 1 / (1 + np.exp(-y * (X @ w)))
    H = (X * (p * (1 - p))[:, None]).T @ X / len(y)

    def loss(params):
        return jnp.mean(jnp.logaddexp(0.0, -jnp.asarray(y) * (jnp.asarray(X) @ params["w"])))

    return loss, {"w": jnp.asarray(w)}, H


def test_hutchinson_trace_against_closed_form():
    loss, params, H = _logistic_problem()
    est, se = experiments.hutchinson_trace(loss, params, jax.random.PRNGKey(0), probes=4000)
    assert abs(float(est) - np.trace(H)) < 4 * float(se)
    assert float(se) < 0.02 * np.trace(H)
    # a diagonal Hessian makes every Rademacher probe exact
    diag = jnp.array([1.0, 2.0, 5.0])
    est, _ = experiments.hutchinson_trace(
        lambda p: 0.5 * jnp.sum(diag * p**2), jnp.ones(3), jax.random.PRNGKey(3), probes=3
    )
    assert float(est) == pytest.approx(8.0, rel=1e-14)


def test_top_eigenvalue_and_hvp_against_closed_form():
    loss, params, H = _logistic_problem()
    lam = experiments.top_eigenvalue(loss, params, jax.random.PRNGKey(2), iterations=300)
    assert float(lam) == pytest.approx(np.linalg.eigvalsh(H)[-1], rel=1e-8)
    v = np.arange(6.0)
    np.testing.assert_allclose(
        np.asarray(experiments.hvp(loss, params, jnp.asarray(v))), H @ v, rtol=1e-10
    )
    with pytest.raises(ValueError, match="probes"):
        experiments.hutchinson_trace(loss, params, jax.random.PRNGKey(0), probes=0)


# --- one SAM step against optax --------------------------------------------------


def _cnn_loss():
    model = CNN(jax.random.PRNGKey(3), classes=3, width=2)
    params, static = eqx.partition(model, eqx.is_array)
    rng = np.random.default_rng(4)
    X = jnp.asarray(rng.standard_normal((5, 1, 8, 8)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 5), jnp.int32)

    def loss(p):
        return experiments.cross_entropy(eqx.combine(p, static), X, y)

    return loss, params


def _optax_sam(loss, params, lr, rho):
    opt = optax.contrib.sam(
        optax.sgd(lr), optax.chain(optax.contrib.normalize(), optax.sgd(rho)), opaque_mode=True
    )
    updates, _ = opt.update(
        jax.grad(loss)(params), opt.init(params), params, grad_fn=lambda p, _: jax.grad(loss)(p)
    )
    return optax.apply_updates(params, updates)


def _close(a, b, rtol=1e-5):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-7)


def test_sam_step_matches_optax():
    loss, params = _cnn_loss()
    ours, radius = sam_step(loss, params, 0.05, L2, 0.2)
    _close(ours, _optax_sam(loss, params, 0.05, 0.2))
    assert float(radius) == pytest.approx(0.2)
    # LE-SAM below the cap is ℓ2-SAM at ρ_t = σ/(‖g‖ + ϱ); with a huge σ the cap ρ_max binds
    gnorm = float(optax.tree.norm(jax.grad(loss)(params)))
    le, r = sam_step(loss, params, 0.05, LESAM, 10.0, 0.5 * gnorm * 0.1)
    assert float(r) == pytest.approx(0.05, rel=1e-5)
    _close(le, _optax_sam(loss, params, 0.05, 0.05))
    capped, r = sam_step(loss, params, 0.05, LESAM, 0.2, 1e6)
    assert float(r) == pytest.approx(0.2)
    _close(capped, _optax_sam(loss, params, 0.05, 0.2))


def test_linf_step_by_hand():
    loss, params = _cnn_loss()
    g = jax.grad(loss)(params)
    hat = jax.tree.map(lambda p, gi: p + 0.01 * jnp.sign(gi), params, g)
    expected = jax.tree.map(lambda p, gi: p - 0.05 * gi, params, jax.grad(loss)(hat))
    ours, _ = sam_step(loss, params, 0.05, LINF, 0.01)
    _close(ours, expected)


# --- data ----------------------------------------------------------------------------

# scikit-learn's digits (its DESCR: 1,797 8x8 images, pixel values 0..16); the class sizes
# of the UCI optdigits test set it ships
DIGIT_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_digits_loader_shapes_and_labels():
    images, labels = experiments.load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.float64
    assert labels.shape == (1797,)
    assert images.min() == 0.0 and images.max() == 1.0
    assert np.all(np.isin(np.round(images * 16, 12), np.arange(17)))  # values k/16
    assert np.bincount(labels).tolist() == DIGIT_COUNTS
    X, y = experiments.binary_digits(4, 9)
    assert X.shape == (181 + 180, 64) and y.shape == (361,)
    assert (y == 1).sum() == 181 and (y == -1).sum() == 180
    np.testing.assert_array_equal(X[y == 1], images[labels == 4].reshape(-1, 64))
    for bad, name in (((4, 4), "negative"), ((10, 1), "positive"), ((1, 2.0), "negative")):
        with pytest.raises(ValueError, match=name):
            experiments.binary_digits(*bad)


def test_planted_patches():
    data = experiments.planted_patches(50, major=1.0, minor=0.3, noise=0.0, seed=0)
    sign = 2.0 * data.labels - 1.0
    np.testing.assert_allclose(data.images[:, 1, 1], sign * 1.0)
    np.testing.assert_allclose(data.images[:, 6, 6], sign * 0.3)
    assert data.major_mask.sum() == data.minor_mask.sum() == 4
    assert not np.any(data.major_mask & data.minor_mask)
    with pytest.raises(ValueError, match="minor"):
        experiments.planted_patches(10, major=0.1, minor=0.3)


# --- the command ------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--bogus"], ["--out", ""], ["--out", __file__]])
def test_cli_bad_flag_is_one_line(args):
    r = subprocess.run(
        [sys.executable, "-m", "experiments", *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_quick_command_end_to_end(tmp_path, capsys):
    # the command's entry point, in this process (JAX is already loaded and warm here)
    from experiments.__main__ import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[" in out and "wrote" in out  # progress lines
    diag = xr.load_dataset(tmp_path / "diagonal.nc")
    assert set(diag.low_share.dims) == {"method", "depth", "seed", "step"}
    for name in ("patches", "digits"):
        ds = xr.load_dataset(tmp_path / f"cnn_{name}.nc")
        assert set(ds.cam_minor_share.dims) == {"method", "seed", "checkpoint"}
        assert ds.sizes["method"] == 8  # 5 fixed, a sweep of 2 radii, and the best of it
    pngs = sorted((tmp_path / "figures").glob("*.png"))
    assert len(pngs) == 5 and len(list((tmp_path / "figures").glob("*.pdf"))) == 5
    import matplotlib.image

    for png in pngs:  # 5.5 in at 200 dpi
        assert matplotlib.image.imread(png).shape[1] == 1100
    page = (tmp_path / "experiments.md").read_text()
    assert "| claim | outcome | reason |" in page
    # a quick run judges nothing: every claim row says so, and no row carries an outcome
    rows = [r for r in page.splitlines() if r.startswith("| ") and "--quick run" in r]
    assert len(rows) == 10
    for label in ("supported", "contradicted", "inconclusive"):
        assert f"| **{label}** |" not in page
    # LE-SAM's cap-binding share on the page: the mean over seeds of the share of steps with
    # capped = 1, recomputed from the saved records (checkpoint means weighted equally: every
    # checkpoint after 0 holds `every` steps)
    for name in ("patches", "digits"):
        ds = xr.load_dataset(tmp_path / f"cnn_{name}.nc")
        le = list(ds.method.values).index("LE-SAM")
        share = ds.capped.values[le, :, 1:].mean(axis=1)
        half = (
            scipy.stats.t.ppf(0.975, share.size - 1) * np.std(share, ddof=1) / np.sqrt(share.size)
        )
        assert f"cap binding on {np.mean(share):+.3f} ± {half:.3f} of the steps" in page
    rm = xr.load_dataset(tmp_path / "regime_map.nc")
    X, y = experiments.binary_digits(4, 9)
    X = X[:, X.max(axis=0) > 0]
    mu = np.abs(X[y == 1].sum(axis=0) - X[y == -1].sum(axis=0)) / len(y)  # |mean of y x|
    np.testing.assert_allclose(_regime_map.theory_mu(X, y), mu, rtol=1e-14)
    for b, depth in enumerate(rm.depth.values):
        assert list(rm.theory.values[0, b]) == [
            analysis.regime(flows.L2SAM(1.0), mu[mu > 0], float(r), int(depth))
            for r in rm.ratio.values
        ]
    # the numbers are what they measure: shares and ranks in [0, 1], cosines in [-1, 1], a
    # positive loss; every method starts from the same θ₀, so at step 0 all agree exactly
    for var, lo, hi in (("low_share", 0, 1), ("dominant_rank", 0, 1), ("cos_l1", -1, 1),
                        ("cos_l2", -1, 1), ("loss", 0, np.inf)):  # fmt: skip
        v = diag[var].values
        assert np.all(np.isfinite(v[..., 0])), var
        assert np.all((v[np.isfinite(v)] >= lo - 1e-12) & (v[np.isfinite(v)] <= hi + 1e-12)), var
    for var in ("loss", "low_share"):
        first = diag[var].isel(step=0).values  # (method, depth, seed)
        np.testing.assert_allclose(first, np.broadcast_to(first[:1], first.shape), rtol=1e-12)
    assert np.all(diag.loss.isel(step=-1).values < diag.loss.isel(step=0).values)  # it trains
    # the page's L = 2 cosine (GD, ℓ1 direction): the mean ± Student-t 95 % half-width over
    # seeds, recomputed here with scipy
    c1 = diag.cos_l1.sel(depth=2).isel(step=-1).values[list(diag.method.values).index("GD")]
    half = scipy.stats.t.ppf(0.975, c1.size - 1) * np.std(c1, ddof=1) / np.sqrt(c1.size)
    assert f"{np.mean(c1):+.3f} ± {half:.3f} (GD)" in page


# --- the outcome rule ---------------------------------------------------------------

from experiments import _outcome  # noqa: E402


@pytest.mark.parametrize(
    "mean, half, predicted, label",
    [
        (0.30, 0.10, 1, "supported"),  # [0.2, 0.4] above 0
        (-0.30, 0.10, 1, "contradicted"),  # [-0.4, -0.2] below 0
        (0.05, 0.10, 1, "inconclusive"),  # [-0.05, 0.15] holds 0
        (-0.30, 0.10, -1, "supported"),
        (0.30, 0.10, -1, "contradicted"),
        (0.10, 0.10, 1, "inconclusive"),  # touching 0 is not excluding it
        (np.nan, 0.10, 1, "inconclusive"),  # a level never reached
        (0.30, np.nan, 1, "inconclusive"),  # one seed only: no interval
        (0.30, np.inf, -1, "inconclusive"),
    ],
)
def test_outcome_on_hand_made_intervals(mean, half, predicted, label):
    got = _outcome.outcome(mean, half, predicted)
    assert got.label == label
    assert got.reason  # every outcome says why
    if not np.isfinite(mean) or not np.isfinite(half):
        assert "missing" in got.reason
    else:
        assert f"{mean - half:+.3g}" in got.reason and f"{mean + half:+.3g}" in got.reason


def test_outcome_from_values_and_claims():
    # 5 paired differences 1..5: mean 3, sd √2.5, t_{0.975,4} = 2.776445 (t table):
    # half = 2.776445 · 1.581139 / √5 = 1.963243, interval [1.0368, 4.9632]: supported
    got = _outcome.case([1.0, 2.0, 3.0, 4.0, 5.0], 1)
    assert got.label == "supported" and "+1.04" in got.reason and "+4.96" in got.reason
    # NaN runs are dropped; with one finite value left there is no interval
    assert _outcome.case([np.nan, np.nan, 2.0], 1).label == "inconclusive"
    assert _outcome.case([np.nan] * 4, -1).label == "inconclusive"
    s, c, i = (_outcome.Outcome(x, x) for x in _outcome.OUTCOMES)
    assert _outcome.combine([s, s]).label == "supported"
    assert _outcome.combine([s, c, i]).label == "contradicted"
    assert _outcome.combine([s, i]).label == "inconclusive"
    assert _outcome.combine([]).label == "inconclusive"
    # power: t_{0.975,n-1}/√n from the t table
    assert _outcome.min_detectable(5) == pytest.approx(2.776445 / np.sqrt(5), rel=1e-6)
    assert _outcome.min_detectable(10) == pytest.approx(2.262157 / np.sqrt(10), rel=1e-6)
    for bad, name in ((lambda: _outcome.outcome(1, 1, 0), "predicted"),
                      (lambda: _outcome.outcome(1, -1, 1), "half"),
                      (lambda: _outcome.min_detectable(1), "n")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            bad()


# --- the real-data regime map ------------------------------------------------------------


def test_theory_regimes_at_the_closed_form_direct_scale():
    """ℓ2-SAM at L = 2 is direct exactly above α_direct = ρ(μ_(d) + μ_(d-1))/(√2 ‖μ‖)
    (docs/theory.md §14): for μ = (1, 2, 3), 5/√28 = 0.94491."""
    mu = np.array([1.0, 2.0, 3.0])
    a_direct = 5 / np.sqrt(28)
    got = _regime_map.theory_regimes(mu, [0.97 * a_direct, 1.03 * a_direct], 2)
    assert got[0] != "direct" and got[1] == "direct"


@pytest.mark.parametrize(
    "loss, lead, regime",
    [
        ([0.69, 0.68, 0.67], [3, 3, 3], "collapse"),  # final loss >= 0.95 log 2
        ([0.69, 0.5, 0.1], [0, 1, 3], "sequential"),  # another pixel first, the major at the end
        ([0.69, 0.5, 0.1], [0, 3, 3], "direct"),  # the major from loss 0.6 on
        ([0.69, 0.5, 0.3, 0.1], [0, 3, 1, 3], "excursion"),
        ([0.69, 0.5, 0.1], [3, 3, 1], "minor"),
    ],
)
def test_measured_regime_rule(loss, lead, regime):
    assert _regime_map.measured_regime(np.array(loss), np.array(lead), 3, 0.6) == regime


# --- LE-SAM's cap and the Grad-CAM headers ----------------------------------------------


def test_cap_binding_share_against_the_rule_step_by_step():
    """`capped` at checkpoint k (every = 1) is 1 exactly where σ_k/(‖g_k‖ + ϱ) >= ρ_max, with
    g_k the minibatch gradient at the parameters before step k, recomputed here."""
    from experiments._cnn import LESAM as KIND
    from experiments._cnn import Method, Schedule, cosine, init_params, train_seeds
    from experiments._tasks import patches_task

    task = patches_task(n_train=32, n_test=8, n_attr=2)
    schedule = Schedule(steps=12, every=1, batch=8, lr=0.2)
    params0, static = init_params((0,), 2, schedule)
    key = jax.random.fold_in(jax.random.PRNGKey(0), 1)

    def grad_norm(params, k):
        idx = jax.random.randint(jax.random.fold_in(key, k), (8,), 0, 32)
        g = jax.grad(lambda p: experiments.cross_entropy(eqx.combine(p, static), task.X[idx],
                                                         task.y[idx]))(params)  # fmt: skip
        return float(np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2)
                                 for x in jax.tree.leaves(g))))  # fmt: skip

    one = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    sigma = 1.0
    rho = 0.8 * sigma / grad_norm(one(params0), 0)  # binds early, not once σ_t has decayed
    recs, kept = train_seeds((0,), task, schedule, Method(KIND, rho, sigma))
    want = []
    for k in range(schedule.steps):
        before = jax.tree.map(lambda x, k=k: x[0, k], kept)  # params after k steps
        s_k = sigma * float(cosine(np.float32(k), schedule.steps))
        want.append(float(s_k / (grad_norm(before, k) + 1e-12) >= rho))
    got = recs["capped"][0, 1:]
    np.testing.assert_array_equal(got, want)
    assert 0 < np.mean(got) < 1  # both branches occur
    # the radius is ρ_max exactly on the capped steps
    np.testing.assert_allclose(recs["radius"][0, 1:][got == 1], rho, rtol=1e-6)


def _fake_task(every, n_ckpt):
    steps = np.arange(n_ckpt) * every
    maps = np.zeros((2, 1, n_ckpt, 1, 8, 8))
    return xr.Dataset(
        {
            "cam_maps": (("method", "seed", "checkpoint", "example", "row", "col"), maps),
            "attr_images": (("example", "row", "col"), np.zeros((1, 8, 8))),
            "attr_minor": (("example", "row", "col"), np.eye(8)[None] > 0),
            "attr_major": (("example", "row", "col"), np.zeros((1, 8, 8), bool)),
        },
        coords={
            "method": ["SGD", "ℓ2-SAM best"],
            "checkpoint": np.arange(n_ckpt),
            "step": ("checkpoint", steps),
        },  # fmt: skip
    )


def test_gradcam_headers_are_each_tasks_own_checkpoints():
    """The full run's schedules: patches every 25 steps to 500, digits every 30 to 600; the maps
    show 0, 10 %, 25 %, 50 %, 100 % of training, headed by that task's steps."""
    from experiments._figures import draw_maps, map_headers
    from experiments._run import FULL

    cnn = {}
    for name, sched in (("patches", FULL.patches_schedule), ("digits", FULL.digits_schedule)):
        cnn[name] = _fake_task(sched.every, sched.steps // sched.every + 1)
    fig = draw_maps(cnn)
    axes = np.array(fig.axes).reshape(4, -1)
    expected = {"patches": ["step 0", "step 50", "step 125", "step 250", "step 500"],
                "digits": ["step 0", "step 60", "step 150", "step 300", "step 600"]}  # fmt: skip
    for row, name in ((0, "patches"), (2, "digits")):
        assert [ax.get_title() for ax in axes[row, 1:]] == expected[name]
        assert map_headers(cnn[name]) == expected[name]


# --- the published page against the published results -----------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _t_interval(values):
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    half = scipy.stats.t.ppf(0.975, v.size - 1) * np.std(v, ddof=1) / np.sqrt(v.size)
    return f"{np.mean(v):+.3f} ± {half:.3f}"


@pytest.mark.parametrize("name", ["patches", "digits"])
def test_published_cnn_numbers(name):
    """docs/experiments.md's LE-SAM numbers, recomputed from the saved CNN records: the share
    of steps on which the cap binds (and whether it is below 0.3 in every seed), ρ̄ (LE-SAM's
    radius over its steps and seeds), the best sweep radius, and the final accuracy gap of
    LE-SAM to ℓ2-SAM at ρ̄."""
    page = (DOCS / "experiments.md").read_text()
    ds = xr.load_dataset(DOCS / "figures" / "data" / f"experiments_{name}.nc")
    m = list(ds.method.values)
    capped = ds.capped.values[m.index("LE-SAM"), :, 1:].mean(axis=1)
    met = "met" if np.all(capped < 0.3) else "not met"
    assert (f"cap binding on {_t_interval(capped)} of the steps (share per seed; its own regime "
            f"asks for < 0.3 in every seed: {met})") in page  # fmt: skip
    rho_bar = ds.radius.values[m.index("LE-SAM"), :, 1:].mean()
    assert f"ρ̄ = {rho_bar:.3f}" in page
    assert ds.method_rho.values[m.index("ℓ2-SAM ρ̄")] == pytest.approx(rho_bar, rel=1e-6)
    sweep = [x for x in m if x.startswith("ℓ2-SAM ρ=")]
    acc = [ds.test_acc.values[m.index(x), :, -1].mean() for x in sweep]
    best = float(sweep[int(np.argmax(acc))].split("=")[1])
    assert f"best (final test accuracy): ρ = {best:g}" in page
    gap = (
        ds.test_acc.values[m.index("LE-SAM"), :, -1]
        - ds.test_acc.values[m.index("ℓ2-SAM ρ̄"), :, -1]
    )
    assert f"{name}: {_t_interval(gap)}" in page


def test_published_regime_map_cells():
    """Every cell of the page's regime-map table and the agreement count, from the saved
    measured and theory columns."""
    page = (DOCS / "experiments.md").read_text()
    rm = xr.load_dataset(DOCS / "figures" / "data" / "experiments_regime_map.nc")
    agree = 0
    for p, pair in enumerate(rm.pair.values):
        for b, depth in enumerate(rm.depth.values):
            meas, theo = rm.measured.values[p, b, 1], rm.theory.values[p, b]
            cells = [
                f"{x} / {t}" + (" ✓" if x == t else "") for x, t in zip(meas, theo, strict=True)
            ]
            agree += sum(x == t for x, t in zip(meas, theo, strict=True))
            assert f"| {pair} | {depth} | " + " | ".join(cells) + " |" in page
    assert f"agree in {agree} of {rm.measured.values[:, :, 1].size} cells" in page


def test_the_power_column_counts_the_measured_cases_and_names_the_missing():
    """A case that never reached its level (NaN) is missing; the power is that of the cases
    measured (t_{0.975,4}/√5 = 2.776/2.236 = 1.24 sd at n = 5), not "n ≥ 0"."""
    from experiments._report import _power

    five, nan = np.arange(5.0), np.full(5, np.nan)
    assert _power([("a", five, 1), ("b", nan, 1)]).startswith("n ≥ 5: 1.24 sd")
    assert _power([("a", five, 1), ("b", nan, 1)]).endswith("; 1 of 2 cases missing")
    assert _power([("b", nan, 1)]) == "none: no case has two values"
