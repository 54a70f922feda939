"""figures/_paths.py (trajectories, linf_limits, discrete): the quick run writes the files, and
what each figure draws agrees with analysis and with independent reductions, near the
boundaries of what it shows.

Independent sources: the scalar reduction of ℓ2-SAM at L = 2 (docs/theory.md §9,
log w_j = log α + μ_j τ − c μ_j² T(τ), dT/dτ = 1/‖μ⊙w‖, c = ρ/√2), the decoupled ℓ∞-SAM and GD
coordinates (dw/dτ = μ_j (w − ρ)^{L−1}, ρ = 0 for GD), and the order of explicit Euler.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import analysis
import figures
import flows
from analysis import _reference
from figures import _paths
from flows import _config
from tests.helpers import ROOT, gallery_caption, numpy_iterate, published_data, quick_data

NAMES = ("trajectories", "linf_limits", "discrete", "steps")


@pytest.fixture(scope="module")
def quick_run(quick_figures):
    """``python -m figures --quick`` (made once): the output folder and the four figures' data."""
    return quick_figures[0], quick_data(quick_figures, NAMES)


def test_quick_run_writes_pdf_and_png(quick_run):
    out, _ = quick_run
    for name in NAMES:
        for ext in ("pdf", "png"):
            path = out / f"{name}.{ext}"
            assert path.exists() and path.stat().st_size > 1000, path


# --- trajectories ----------------------------------------------------------------------


def _reduced_l2(alpha, rho=1.0, tau_max=80.0, mu=_paths.MU5):
    """The scalar reduction: j† sequence and switch times, whether it collapses, and the first τ
    at which the loss ℓ(Σ μ_j w_j²) falls to LOSS_LOW (NaN if it never does)."""
    # the log-weights on scipy's dense solution (analysis._reference.scalar_reduction: the norm
    # taken in logs, w spans 1e-40 .. 1e40), j† changes by brentq between 40,000 samples
    sol, lw = _reference.scalar_reduction(mu, alpha, rho, tau_max)
    ts = np.linspace(0, sol.t[-1], 40_001)[1:]
    values = lw(ts).T
    seq, times = _reference.argmax_changes(lw, ts, 1e-13)
    collapsed = np.max(values[-1]) < np.log(alpha) - 10
    # logistic loss log(1 + e^{-m}) = LOSS_LOW at the margin m* = -log(expm1(LOSS_LOW))
    level = -np.log(np.expm1(_paths.LOSS_LOW))
    margin = lambda t: np.sum(mu * np.exp(np.minimum(2 * lw(t), 700))) - level  # noqa: E731
    above = np.flatnonzero(np.sum(mu * np.exp(np.minimum(2 * values, 700)), axis=1) > level)
    low = np.nan
    if above.size and above[0] > 0:
        low = scipy.optimize.brentq(margin, ts[above[0] - 1], ts[above[0]], xtol=1e-13)
    return seq, np.array(times), collapsed, low


def test_trajectories_sequences_and_switch_times_match_the_reduction(quick_run):
    _, data = quick_run
    data = data["trajectories"]
    for i in range(len(_paths.ALPHA_RATIOS)):
        alpha = float(data[f"alpha/l2/{i}"])
        seq, times, collapsed, _ = _reduced_l2(alpha)
        assert not collapsed
        assert data[f"sequence/l2/{i}"].tolist() == seq, alpha
        np.testing.assert_allclose(data[f"switch_t/l2/{i}"], times, rtol=1e-5)
        path = analysis.regime_path(flows.L2SAM(1.0), _paths.MU5, alpha)
        assert path.regime == "sequential" and path.sequence == seq
    # minor first near α_c: j† visits coordinate 1 at 1.001 α_c and 1.01 α_c, not at 1.1 α_c
    seqs = [data[f"sequence/l2/{i}"].tolist() for i in range(4)]
    assert 0 in seqs[3] and 0 in seqs[2] and 0 not in seqs[1] and seqs[0] == [3, 4]
    # the last switch (to the major coordinate) comes later as α approaches α_c
    last = [float(data[f"switch_t/l2/{i}"][-1]) for i in range(4)]
    assert np.all(np.diff(last) > 0)
    # GD from the same α: j† = 5 from τ = 0⁺ (β_j = α² e^{2 μ_j τ})
    assert data["sequence/gd"].tolist() == [4]


def test_trajectories_alpha_c_is_the_boundary_of_the_reduction(quick_run):
    """The drawn α_c is the reduction's to the rtol of the quick search (1e-4)."""
    _, data = quick_run
    np.testing.assert_allclose(
        float(data["trajectories"]["alpha_c"]), _reference.l2sam_alpha_c(), rtol=2e-4
    )


def _first_below(taus, loss, level):
    below = np.flatnonzero(loss < level)
    return taus[below[0]] if below.size else np.inf


def test_trajectories_loss_drops_before_the_major_takes_over(quick_run):
    """The caption: the loss stays up longer as α → α_c, falls long before the last switch, and
    GD from 1.001 α_c falls first."""
    _, data = quick_run
    data = data["trajectories"]
    taus = data["taus"]
    drop = [_first_below(taus, data[f"loss/l2/{i}"], 1e-3) for i in range(4)]
    # 2 α_c: the loss starts below 1e-3: the margin α²Σμ_j = 15 (2 α_c)² = 7.2 > ln 1000 = 6.9
    assert drop[0] == 0.0
    assert np.all(np.diff(drop[1:]) > 0)  # 1.1 → 1.01 → 1.001 α_c: later and later
    for i in (2, 3):  # 1.01 and 1.001 α_c: the loss is down well before j† reaches 5
        assert drop[i] < 0.5 * float(data[f"switch_t/l2/{i}"][-1])
    assert _first_below(taus, data["loss/gd"], 1e-3) < min(drop[1:])


def _margin_carried(data, i):
    """Run ``l2/i`` where the loss first falls to LOSS_LOW: j† (0-based), its share
    μ_j β_j / m of the margin m = Σ μ_j β_j, and over the saved τ where the loss falls from
    1e-1 to LOSS_LOW, the ratio of d log m/dτ to d log β_j†/dτ (central differences)."""
    taus, beta, loss = data["taus"], data[f"beta/l2/{i}"], data[f"loss/l2/{i}"]
    margin = beta @ _paths.MU5
    k = np.flatnonzero(loss <= _paths.LOSS_LOW)[0]
    j = int(np.argmax(beta[k]))
    fall = (loss <= 1e-1) & (loss >= _paths.LOSS_LOW)
    rate = np.gradient(np.log(margin), taus)[fall] / np.gradient(np.log(beta[:, j]), taus)[fall]
    return j, _paths.MU5[j] * beta[k, j] / margin[k], rate


def test_trajectories_loss_falls_with_the_minor_coordinate_that_escapes(quick_run):
    """docs/theory.md §16: d log m/dτ = Σ_j (μ_j β_j/m) d log β_j/dτ, the coordinates' growth
    rates weighted by their shares of the margin. From 1.01 and 1.001 α_c the loss reaches 1e-3
    while j† = 1 (the most minor coordinate) carries the margin, and while it falls from 1e-1 to
    1e-3 the margin grows at β_1's rate: the loss does not wait for the major coordinate."""
    _, data = quick_run
    for i in (2, 3):
        j, share, rate = _margin_carried(data["trajectories"], i)
        assert j == 0 and share > 0.99, (i, j, share)
        assert rate.size >= 3 and np.all(np.abs(rate - 1) < 0.01), (i, rate)


def test_trajectories_plateau_and_last_switch_against_the_reduction(quick_run):
    """Panel (f): at each α/α_c − 1 the τ of the last switch and of the loss reaching 1e-3 are
    those of the scalar reduction; both grow as α → α_c."""
    _, data = quick_run
    data = data["trajectories"]
    alpha_c = float(data["alpha_c"])
    for gap, last, low in zip(data["gaps"], data["tau_last"], data["tau_low"], strict=True):
        seq, times, _, low_ref = _reduced_l2((1 + gap) * alpha_c)
        assert seq[-1] == 4
        np.testing.assert_allclose(last, times[-1], rtol=1e-5)
        np.testing.assert_allclose(low, low_ref, rtol=1e-6)
    assert np.all(np.diff(data["tau_last"]) < 0) and np.all(np.diff(data["tau_low"]) < 0)
    assert np.all(data["tau_low"] < data["tau_last"])


def test_trajectories_caption_log_law():
    """The caption's rates, from the reduction alone: near α_c the last switch comes about 21
    later and the loss falls to 1e-3 about 2.3–2.4 later per decade of α/α_c − 1 (a logarithm)."""
    alpha_c = _reference.l2sam_alpha_c()  # the quick run's α_c is only good to 1e-4
    runs = [_reduced_l2((1 + gap) * alpha_c) for gap in (1e-4, 1e-3, 1e-2)]
    last = np.array([r[1][-1] for r in runs])
    low = np.array([r[3] for r in runs])
    np.testing.assert_allclose(-np.diff(last), 21.0, rtol=0.05)
    np.testing.assert_allclose(-np.diff(low), 2.35, rtol=0.05)


# --- linf_limits -----------------------------------------------------------------------


def _theory_class(a1, a2, depth, rho=_paths.RHO_LIMIT):
    """Claim C2 by hand: below ρ a coordinate stalls (odd L) or dies (even L); above, the first
    to blow up, argmax μ_j (α_j − ρ)^{L−2}, wins (ties do not occur on the grid)."""
    mu = _paths.MU2
    score = [
        m * (a - rho) ** (depth - 2) if a > rho else -np.inf
        for m, a in zip(mu, (a1, a2), strict=True)
    ]
    if max(score) == -np.inf:
        return "stalled" if depth % 2 else "collapse"
    return "minor" if score[0] > score[1] else "major"


def test_linf_limits_follow_claim_c2_everywhere_on_the_grid(quick_run):
    _, data = quick_run
    data = data["linf_limits"]
    a = data["alpha"]
    for depth in (3, 4):
        cls = np.array(_paths.LIMIT_CODES)[data[f"class/{depth}"]]
        expected = [[_theory_class(x, y, depth) for y in a] for x in a]
        assert cls.tolist() == expected, depth
        assert {"minor", "major"} <= set(cls.ravel())


def test_linf_limits_tie_curve_and_the_points_beside_it(quick_run):
    """The drawn curve is the closed form; the grid points nearest to it on each side, on every
    column α_1 > ρ, agree with the reduced per-coordinate flows."""
    _, data = quick_run
    data = data["linf_limits"]
    a, rho = data["alpha"], float(data["rho"])
    for depth in (3, 4):
        a1 = data[f"tie_a1/{depth}"]
        closed = rho + (1.0 / 2.0) ** (1.0 / (depth - 2)) * (a1 - rho)
        np.testing.assert_allclose(data[f"tie_a2/{depth}"], closed, rtol=1e-14)
        cls = np.array(_paths.LIMIT_CODES)[data[f"class/{depth}"]]
        for i in np.flatnonzero(a > rho):
            tie = rho + 0.5 ** (1.0 / (depth - 2)) * (a[i] - rho)
            for j in (np.flatnonzero(a < tie)[-1], np.flatnonzero(a > tie)[0]):
                times = _reference.linf_escape_times(_paths.MU2, [a[i], a[j]], rho, depth)
                assert cls[i, j] == ("minor" if np.argmin(times) == 0 else "major"), (a[i], a[j])


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_linf_limits_caption_gd_sentence_is_true(depth):
    """The caption's GD (its black line, and the note in panel (a)): at L ≥ 3 GD ends on
    argmax μ_j α_j^{L−2} (its blow-up times 1/((L−2) μ_j α_j^{L−2}), docs/theory.md §8), so its
    minor coordinate wins below the line; at L = 2, w_j = α_j e^{μ_j τ}, so
    β_2/β_1 ∝ e^{2(μ_2 − μ_1)τ} → ∞: always e₂."""
    winners = set()
    for a in ((1.5, 1.5), (3.0, 1.2)):
        if depth == 2:
            expected = 1
        else:
            blowup = [
                1 / ((depth - 2) * m * x ** (depth - 2)) for m, x in zip(_paths.MU2, a, strict=True)
            ]
            expected = int(np.argmin(blowup))
        assert analysis.regime_path(flows.GD(), _paths.MU2, a, depth=depth).sequence[-1] == expected
        winners.add(expected)
    # the major wins from (1.5, 1.5); from (3, 1.2) the minor wins at L ≥ 3, not at L = 2
    assert winners == ({1} if depth == 2 else {0, 1})


# --- discrete --------------------------------------------------------------------------


def test_discrete_is_order_one(quick_run):
    """Explicit Euler on a smooth field is first order: GD and ℓ2-SAM slopes within 0.1 of 1.
    The ℓ∞-SAM errors are of order η where no iterate froze at w_1 = 0."""
    _, data = quick_run
    data = data["discrete"]
    lrs = data["lrs"]
    for key in ("GD", "ℓ2-SAM"):
        assert abs(float(data[f"slope/{key}"]) - 1) < 0.1, key
        err = data[f"error/{key}"]  # the least-squares slope of log error against log η
        ok = np.isfinite(err) & (err > 0)
        expected = np.polyfit(np.log(lrs[ok]), np.log(err[ok]), 1)[0]
        np.testing.assert_allclose(float(data[f"slope/{key}"]), expected, rtol=1e-12)
    for key in ("ℓ∞-SAM", "ℓ∞-SAM-slide"):
        # the errors scatter (a weight meets its switching surface inside a step), so a fitted
        # slope depends on the range: first order is tested as error / η staying within a
        # factor 3 over every η, down to 2^-9, where an iterate lands exactly on w_1 = 0 and
        # steps off it (sign(0) = +1, docs/theory.md §3) instead of being frozen there
        ratio = data[f"error/{key}"] / lrs
        assert np.max(ratio) < 3 * np.min(ratio), key
    assert lrs[-1] == 2.0**-9


_DISCRETE_WITHOUT_FLAGS = """
import sys
from pathlib import Path

import flows

flows.configure()
from figures import _common, _paths

ctx = _common.Context(out=Path(sys.argv[1]), cache=Path(sys.argv[1]), quick=True, progress=False)
_common.save_data(ctx, "discrete", _paths.compute_discrete(ctx), 0.0)
"""


def test_discrete_data_do_not_depend_on_the_fast_compile_flags(quick_run, tmp_path):
    """The quick `discrete` data of a fresh process with SAMFLOWS_XLA_FAST_COMPILE=off (XLA free
    to contract a * b + c to fused multiply-adds) equal those of this session, made under
    flows.configure()'s flags (no FMA), to 1e-12 on every number: rounding differs, and nothing
    that rounding decides reaches the figure. The weights are O(1) and every error is above 1e-5.
    With sign(0) = 0 it did: an ℓ∞ iterate at η = 2^-9 landed exactly on w_1 = 0 and froze
    there, with errors 0.0046 and 0.0255 under the two settings (docs/theory.md §3)."""
    _, data = quick_run
    here = data["discrete"]
    flags = _config.fast_compile_flags("", _config._jaxlib_version()).split()
    session = os.environ.get("XLA_FLAGS", "").split()
    assert set(flags) <= set(session)  # this session runs with them (where they apply)
    env = dict(os.environ, SAMFLOWS_XLA_FAST_COMPILE="off")
    env["XLA_FLAGS"] = " ".join(f for f in session if f not in flags)
    subprocess.run(
        [sys.executable, "-c", _DISCRETE_WITHOUT_FLAGS, str(tmp_path)],
        cwd=ROOT, env=env, check=True, timeout=600,
    )  # fmt: skip
    fresh = figures.load_data(figures.Context(out=tmp_path, cache=tmp_path, quick=True), "discrete")
    assert sorted(fresh) == sorted(here)
    for key, value in here.items():
        if np.asarray(value).dtype.kind == "f":
            np.testing.assert_allclose(fresh[key], value, rtol=0, atol=1e-12, err_msg=key)
        else:
            np.testing.assert_array_equal(fresh[key], value, err_msg=key)


def _plain_slide_reference(alpha, rho, mu, t1, ts):
    """The ℓ∞-SAM plain flow of the sliding case by hand (docs/theory.md §7, §11): while w_j > 0,
    ẇ_j = −ℓ'(m̂) μ_j (w_j − ρ) with m̂ = Σ μ_j (w_j − ρ)²; w_1 stops at 0, where its two layers'
    ŵ = ∓ρ chatter in step and keep its share μ_1 ρ² of m̂ (continuous through the death)."""
    dead = lambda t, w, alive: w[0]  # noqa: E731
    dead.terminal = True

    def f(t, w, alive):
        m_hat = np.sum(mu * (w - rho) ** 2)
        speed = 1.0 / (1.0 + np.exp(m_hat))  # −ℓ'(m̂) of the logistic loss
        return speed * mu * (w - rho) * np.array([alive, 1.0])

    kw = dict(method="DOP853", rtol=1e-12, atol=1e-14, dense_output=True)
    a = scipy.integrate.solve_ivp(
        f, (0, t1), np.asarray(alpha, float), args=(1.0,), events=dead, **kw
    )
    t_dead = a.t[-1]
    b = scipy.integrate.solve_ivp(f, (t_dead, t1), [0.0, a.y[1, -1]], args=(0.0,), **kw)
    before = a.sol(np.minimum(ts, t_dead)).T
    after = b.sol(np.maximum(ts, t_dead)).T
    return np.where(ts[:, None] < t_dead, before, after), t_dead


def test_discrete_sliding_flow_and_iterates(quick_run):
    """α_1 < ρ < α_2: the drawn flow is the hand-integrated sliding flow; after w_1 dies the
    iterates that keep moving chatter around 0 with amplitude at most η ρ μ_1 (one step of size
    η |ℓ'| μ_1 |ŵ|, |ŵ| ≤ ρ near 0, |ℓ'| ≤ 1)."""
    _, data = quick_run
    data = data["discrete"]
    rho, key = float(data["rho"]), "ℓ∞-SAM-slide"
    assert str(data[f"status/{key}"]) == "ok"
    t, w = data[f"flow_t/{key}"], data[f"flow_w/{key}"]
    ref, t_dead = _plain_slide_reference(data["alpha_slide"], rho, _paths.MU2, t[-1], t)
    np.testing.assert_allclose(w, ref, rtol=1e-7, atol=1e-9)
    assert np.all(np.abs(w[t > t_dead, 0]) < 1e-12)
    for lr in _paths.LRS_SHOWN:
        ti, wi = data[f"iter_t/{key}/{lr}"], data[f"iter_w/{key}/{lr}"]
        late = ti > t_dead + 2.0
        assert np.max(np.abs(wi[late, 0])) <= lr * rho * _paths.MU2[0] + 1e-15, lr


# --- captions: every number a caption states, in the committed data --------------------------


def _states(caption, *texts):
    for text in texts:
        assert text in caption, text


def test_trajectories_caption_numbers_are_the_published_data():
    caption, data = gallery_caption("trajectories"), published_data("trajectories")
    _states(
        caption, "ρ = 1", "α = 1.001, 1.1 and 2 α_c", f"α_c = {float(data['alpha_c']):.4f}"
    )
    assert float(data["rho"]) == 1.0 and data["ratios"].tolist() == [2.0, 1.1, 1.01, 1.001]
    assert f"α_c = {float(data['alpha_c']):.4f}" == "α_c = 0.3473"
    # j† near α_c, and when it reaches 5 (the last switch)
    _states(caption, "(2 → 1 → 2 → 3 → 4 → 5)")
    for i in (2, 3):
        assert (data[f"sequence/l2/{i}"] + 1).tolist() == [2, 1, 2, 3, 4, 5]
    last = [float(data[f"switch_t/l2/{i}"][-1]) for i in (3, 2, 1, 0)]
    assert [f"{t:.1f}" for t in last[:3]] + [f"{last[3]:.2f}"] == ["46.2", "24.5", "3.3", "0.23"]
    _states(caption, "τ = 46.2 from 1.001 α_c, 3.3 from 1.1 α_c, 0.23 from 2 α_c")
    # the same from the scalar reduction of docs/theory.md §9 (scipy, analysis._reference)
    for i, stated in ((3, "46.2"), (1, "3.3"), (0, "0.23")):
        seq, times = _reference.scalar_switches(
            _paths.MU5, float(data[f"alpha/l2/{i}"]), 1.0, 60.0
        )
        assert seq == data[f"sequence/l2/{i}"].tolist()
        assert f"{times[-1]:.{len(stated.split('.')[1])}f}" == stated, (i, times[-1])
    # (e): the loss at 1e-3, the margin carried by j† = 1, and GD
    assert _paths.LOSS_LOW == 1e-3
    low = [f"{float(data[f'tau_low/l2/{i}']):.2f}" for i in (1, 2, 3)]
    assert low == ["1.15", "4.43", "6.84"]
    _states(caption, "τ = 1.15, 4.43 and\n6.84".replace("\n", " "), "from 1.1, 1.01 and 1.001 α_c")
    for i in (2, 3):
        j, share, rate = _margin_carried(data, i)
        assert j == 0 and share > 0.99 and np.all(np.abs(rate - 1) < 0.01), (i, share, rate)
        # what panel (d) draws: the same window and rates, every drawn share above 0.99
        loss, drawn_share, drawn_rate = _paths.margin_while_falling(data, i)
        np.testing.assert_allclose(drawn_rate, rate, rtol=1e-12)
        assert loss.max() <= 1e-1 and loss.min() >= 1e-3 and np.all(drawn_share > 0.99)
    _states(caption, "j† = 1", "over 99% of the margin", "β₁'s rate to within 1%")
    _states(caption, "above the dotted 0.99", "between the dotted 0.99 and 1.01")
    assert f"{float(data['tau_low/gd']):.2f}" == "0.17" and data["sequence/gd"].tolist() == [4]
    _states(caption, "GD from 1.001 α_c (black) reaches 10⁻³ at τ = 0.17")
    assert float(data["tau_low/l2/0"]) == 0.0
    _states(caption, "from 2 α_c the loss starts below 10⁻³")
    # (f): the range of α/α_c − 1, the fitted range and the laws per decade
    gaps = data["gaps"]
    assert np.isclose(gaps[0], 1e-4) and np.isclose(gaps[-1], 0.3) and _paths.GAP_FIT == 1e-2
    _states(caption, "10⁻⁴ to 0.3", "up to α/α_c − 1 = 10⁻²")
    near = gaps <= _paths.GAP_FIT
    for key, text in (("tau_last", "21.0"), ("tau_low", "2.33")):
        slope = np.polyfit(np.log10(gaps[near]), data[key][near], 1)[0]  # independent refit
        np.testing.assert_allclose(float(data[f"law/{key}"][0]), slope, rtol=1e-12)
        assert f"{-slope:#.3g}" == text, key
    _states(caption, "21.0 (j† reaches 5) and 2.33 (loss at 10⁻³) more per decade")


def test_linf_limits_caption_numbers_are_the_published_data():
    caption, data = gallery_caption("linf_limits"), published_data("linf_limits")
    a = data["alpha"]
    assert float(data["rho"]) == 1.0 and data["depths"].tolist() == [2, 3, 4] and a.size == 30
    _states(caption, "L = 2, 3 and 4", "ρ = 1", "30×30 starts", "all 900 starts of each depth")
    for depth in (2, 3, 4):
        agree = data[f"leader/{depth}"] == data[f"c2_leader/{depth}"]
        assert agree.shape == (30, 30) and int(agree.sum()) == 900, depth
        cls = set(np.array(_paths.LIMIT_CODES)[data[f"class/{depth}"]].ravel())
        # 0 (collapse, or a stall at L = 3), e₁ and e₂, each from some start
        assert cls == {"stalled" if depth == 3 else "collapse", "minor", "major"}, depth
    # L = 2: the major wins whenever α₂ > ρ, the minor when only α₁ > ρ, β → 0 when neither is
    cls = np.array(_paths.LIMIT_CODES)[data["class/2"]]
    above1, above2 = np.meshgrid(a > 1, a > 1, indexing="ij")
    assert np.all(cls[above2] == "major") and np.all(cls[above1 & ~above2] == "minor")
    assert np.all(cls[~above1 & ~above2] == "collapse")
    # the slopes of the tie lines, and GD's lines through the origin
    for depth, text in ((3, "slope 1/2 at L = 3"), (4, "1/√2 at L = 4")):
        slope = np.polyfit(data[f"tie_a1/{depth}"], data[f"tie_a2/{depth}"], 1)[0]
        np.testing.assert_allclose(slope, 0.5 ** (1 / (depth - 2)), rtol=1e-12)
        np.testing.assert_allclose(data[f"gd_a2/{depth}"], a * 0.5 ** (1 / (depth - 2)), rtol=1e-14)
        _states(caption, text)
    assert "tie_a1/2" not in data and "gd_a2/2" not in data  # no line at L = 2


def test_discrete_caption_numbers_are_the_published_data():
    caption, data = gallery_caption("discrete"), published_data("discrete")
    assert float(data["rho"]) == 0.5 and float(data["T"]) == 20.0 and float(data["alpha"]) == 0.35
    assert data["alpha_slide"].tolist() == [0.35, 0.6]
    _states(caption, "ρ = 0.5, t ≤ 20", "α = 0.35 and (b)", "α = (0.35, 0.6)")
    _states(caption, "η = 0.5,\n0.125, 0.03125".replace("\n", " "), "(α = 0.35)")
    assert _paths.LRS_SHOWN == (0.5, 0.125, 0.03125)
    # w₁ dies at t ≈ 4.2 (the first saved time with the flow's w₁ at 0), then the iterates chatter
    t, w = data["flow_t/ℓ∞-SAM-slide"], data["flow_w/ℓ∞-SAM-slide"]
    assert f"{t[np.argmax(np.abs(w[:, 0]) < 1e-12)]:.1f}" == "4.2"
    _states(caption, "w₁ dies at t ≈ 4.2", "from t = 4.5 on", "within 0.013 (η = 0.5)")
    _states(caption, "in its inset on a ±0.02 scale")
    assert (_paths.CHATTER_FROM, _paths.CHATTER_SCALE) == (4.5, 0.02)
    for lr in _paths.LRS_SHOWN:
        ti, wi = data[f"iter_t/ℓ∞-SAM-slide/{lr}"], data[f"iter_w/ℓ∞-SAM-slide/{lr}"]
        late = wi[ti >= 4.5, 0]
        assert np.any(late > 0) and np.any(late < 0), lr  # both sides of 0
        if lr == 0.5:
            assert f"{np.max(np.abs(late)):.3f}" == "0.013"
    # (c): the comparison times, the range of η and the slopes
    assert float(data["T"]) / _paths.N_SAVED == 0.5
    lrs = data["lrs"]
    np.testing.assert_array_equal(lrs, 2.0 ** -np.arange(1, 11))
    _states(caption, "t = kη = 0, 0.5, …, 20", "η = 2⁻¹…2⁻¹⁰")
    slopes = {
        k: f"{float(data[f'slope/{k}']):.2f}" for k in ("GD", "ℓ2-SAM", "ℓ∞-SAM", "ℓ∞-SAM-slide")
    }
    assert slopes == {"GD": "1.00", "ℓ2-SAM": "0.99", "ℓ∞-SAM": "0.99", "ℓ∞-SAM-slide": "0.99"}
    _states(caption, "GD 1.00, ℓ2-SAM 0.99", "(α = 0.35) 0.99", "sliding 0.99")


# --- minor first under finite steps -------------------------------------------------------------


def _steps_cell(data, lr, ratio):
    """(column, row) of the steps map at step size ``lr`` (None: the flow) and α/α_c ``ratio``."""
    k = 0 if lr is None else 1 + int(np.flatnonzero(np.isclose(data["lrs"], lr))[0])
    return k, int(np.flatnonzero(np.isclose(data["ratios"], ratio))[0])


@pytest.mark.parametrize(
    ("lr", "ratio"), [(0.5, 0.905), (0.25, 0.905), (0.25, 0.975), (0.25, 1.025), (0.125, 0.985)]
)
def test_steps_cells_against_a_numpy_iterate(lr, ratio):
    """Cells of the published map on both sides of each column's collapse edge, from an
    independent numpy SAM update (tests.helpers.numpy_iterate): collapsed where the loss at
    t = 60 is above its start, else j† = argmax |β_j| at t = 60."""
    data = published_data("steps")
    alpha = ratio * float(data["alpha_c"])
    method = flows.L2SAM(1.0)
    thetas = numpy_iterate(
        method, _paths.DATA5, flows.balanced_init(alpha, 2, 5), lr, round(60.0 / lr)
    )
    beta = np.prod(thetas[[0, -1]], axis=1)  # (2, d): β at t = 0 and t = 60
    loss = np.log1p(np.exp(-beta @ _paths.MU5))
    expected = -2 if loss[1] > loss[0] else int(np.argmax(np.abs(beta[1])))
    k, i = _steps_cell(data, lr, ratio)
    assert data["jdag"][k, i] == expected, (lr, ratio, loss, beta[1])


def test_steps_caption_numbers_are_the_published_data():
    caption, data = gallery_caption("steps"), published_data("steps")
    r, lrs, j = data["ratios"], data["lrs"], data["jdag"]
    assert r.size == 41 and np.allclose(r[[0, -1]], [0.905, 1.305]) and float(data["t"]) == 60.0
    _states(caption, "t = kη = 60", "α/α_c = 0.905, …, 1.305 (41 rows", "η = 2⁻¹, …, 2⁻⁸")
    np.testing.assert_array_equal(lrs, 2.0 ** -np.arange(1, 9))
    # α_c of the flow, also from the reduced ODE of analysis._reference (scipy)
    _states(caption, f"α_c = {float(data['alpha_c']):.4f}", "α_c = 0.3473")
    np.testing.assert_allclose(float(data["alpha_c"]), _reference.l2sam_alpha_c(), rtol=1e-6)
    flow = j[0]
    assert np.all(flow[r < 1] == -2) and np.all(flow[r > 1] >= 0)  # the flow collapses below
    # minor first begins: just above α_c every column is on the minor coordinate at t = 60
    assert np.all(j[:, _steps_cell(data, None, 1.005)[1]] == 0)
    _states(caption, "Just above α_c, j† has moved from 2 to the minor coordinate 1")
    assert np.isclose(r[flow == 1].max(), 1.145) and np.all(flow[r > 1.15] == 2)
    _states(caption, "above α = 1.145 α_c the flow has moved on to 3")
    for k, lr in enumerate(lrs, start=1):
        assert np.array_equal(j[k], flow) == (lr <= 2.0**-5), lr
    _states(caption, "From η = 2⁻⁵ down every column is the flow's, row for row")

    def lowest_escape(lr):
        return f"{r[j[_steps_cell(data, lr, 1.005)[0]] != -2].min():.3f}"

    assert [lowest_escape(lr) for lr in (2.0**-4, 2.0**-3, 2.0**-2)] == ["0.995"] * 2 + ["0.975"]
    _states(caption, "0.995 α_c at η = 2⁻⁴ and 2⁻³, 0.975 α_c at 2⁻²")
    half = j[_steps_cell(data, 0.5, 1.005)[0]]
    assert np.all(half != -2) and np.all(half[r < 1] == 0)
    _states(caption, "at 2⁻¹ every start from 0.905 α_c up escapes, onto j† = 1 below α_c")


def test_steps_quick_run_is_the_published_map_on_its_grid(quick_run):
    """A fresh quick computation (every 5th α, η = 2⁻¹…2⁻⁴, α_c to 1e-4) gives the published
    map's cells there: the code that drew the committed figure still draws it."""
    _, data = quick_run
    quick, full = data["steps"], published_data("steps")
    rows = [int(np.flatnonzero(np.isclose(full["ratios"], x))[0]) for x in quick["ratios"]]
    cols = [0] + [1 + int(np.flatnonzero(np.isclose(full["lrs"], x))[0]) for x in quick["lrs"]]
    np.testing.assert_array_equal(quick["jdag"], full["jdag"][np.ix_(cols, rows)])
    np.testing.assert_allclose(float(quick["alpha_c"]), float(full["alpha_c"]), rtol=1e-4)
