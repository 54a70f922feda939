r"""Figures 1, 2 and 6 (issue 12): the regimes against depth, the minor-first map, the depth maps.

Each quick figure's data are checked against :mod:`analysis` where they are most likely to be
wrong: the grid cells on both sides of every change of regime, the map rows on both sides of
:math:`\alpha_c` and :math:`\alpha_{direct}`, and the map colours on both sides of every switch
time of :func:`analysis.regime_path`. Independent sources: the closed-form thresholds at
:math:`L=2` (:math:`\alpha_{direct}` exact, the collapse and escape bounds sufficient; written
out below, not read from :func:`analysis.l2sam_thresholds`), the boundary :math:`\alpha_c` and
the j† sequences of the reduced flow in w integrated with scipy (tests/helpers.py), and the scale
invariance :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)` of the rescaled flow
(docs/theory.md §6).
"""

import numpy as np
import pytest
import scipy.optimize

import analysis
import flows
from analysis import _reference
from figures import _maps
from tests.helpers import gallery_caption, published_data, quick_data

MU = np.arange(1.0, 6.0)
NAMES = ("regime_map", "minor_first", "depth")
EXTS = ("pdf", "png")
COLLAPSE, SEQUENTIAL, DIRECT, UNDETERMINED, EXCURSION = (
    analysis.REGIMES.index(name)
    for name in ("collapse", "sequential", "direct", "undetermined", "excursion")
)
MAJOR = int(np.argmax(MU))
# k = α/ρ of the L = 2 thresholds: ρμ_min/(√2‖μ‖) (all shrink), ρμ_max/(√2‖μ‖) (all grow),
# ρ(μ_(d) + μ_(d−1))/(√2‖μ‖) (sequential | direct, exact); ‖μ‖ = √55
SHRINK, GROW, K_DIRECT = np.array([1.0, 5.0, 9.0]) / (np.sqrt(2.0) * np.sqrt(55.0))
K_C = _reference.l2sam_alpha_c()  # α_c/ρ at L = 2, by bisection on the reduced flow


@pytest.fixture(scope="module")
def quick(quick_figures):
    """The quick data of the three figures (``python -m figures --quick``, made once)."""
    out, _ = quick_figures
    assert all((out / f"{name}.{ext}").stat().st_size > 1000 for name in NAMES for ext in EXTS)
    return quick_data(quick_figures, NAMES)


def _path(alpha, depth, rho=1.0):
    return analysis.regime_path(
        flows.L2SAM(rho), MU, float(alpha), depth, collapse_tol=_maps.COLLAPSE_TOL
    )


def _assert_path_is_the_reduced_flows(alpha, depth, described):
    """analysis.regime_path at ``alpha`` visits what the reduced flow in w visits (scipy, to
    rtol 1e-12), at the same times, and that is the sequence the test ``described``."""
    seq, times = _reference.l2sam_switches(MU, float(alpha), 1.0, depth)
    path = _path(alpha, depth)
    assert seq == described and path.sequence == seq, (alpha, depth, seq, path.sequence)
    np.testing.assert_allclose(path.times, times, rtol=1e-7)
    return path


def _around(grid, value):
    """The grid values just below and just above ``value``."""
    return grid[grid < value].max(), grid[grid > value].min()


def _start_rates(k, depth):
    r"""The log-growth rates of |β_j| at τ = 0 over L α^{L−2}, by hand (docs/theory.md §8): from
    a uniform α, N = √L α^{L−1}‖μ‖ and ŵ_j = α(1 − κμ_j), κ = 1/(k√L‖μ‖), k = α/ρ."""
    kappa = 1.0 / (k * np.sqrt(depth) * np.linalg.norm(MU))
    return MU * (1 - kappa * MU) ** (depth - 1)


def _k_major_start(depth):
    """k = α/ρ below which j†(0⁺) is the major coordinate at odd L (the start rates' argmax
    leaves d there), by brentq on the hand rates."""
    gap = lambda k: _start_rates(k, depth)[-1] - _start_rates(k, depth)[:-1].max()  # noqa: E731
    return scipy.optimize.brentq(gap, 0.01, 1.0, xtol=1e-14)


def _index(data, depth):
    return int(np.flatnonzero(data["depths"] == depth)[0])


# --- regime_map: the regimes against depth, and the rays of the (ρ, α) plane -------------


def test_regime_map_cells_on_both_sides_of_every_change_agree_with_analysis(quick):
    """collapse | sequential | direct at even L; excursion | sequential | direct at odd L, where
    nothing collapses; direct throughout at L = 1, where β = α + μτ (dβ/dτ = μ for every method,
    docs/theory.md §15) puts the major coordinate ahead at every τ > 0."""
    data = quick["regime_map"]
    assert 1 in data["depths"]
    for i, depth in enumerate(data["depths"]):
        column = data["code"][i]
        changes = np.flatnonzero(column[1:] != column[:-1])
        if depth == 1:
            assert np.all(column == DIRECT)
            continue
        assert changes.size == 2, (depth, column)
        assert column[0] == (COLLAPSE if depth % 2 == 0 else EXCURSION) and column[-1] == DIRECT
        for m in changes:
            for cell in (m, m + 1):
                got = _path(data["k"][cell], depth).regime
                assert got == analysis.REGIMES[column[cell]], (depth, data["k"][cell])


def test_regime_map_boundaries_follow_the_closed_forms_and_the_cells(quick):
    data = quick["regime_map"]
    k, rtol = data["k"], _maps.K_RTOL[1]
    assert 2 in data["depths"] and 3 in data["depths"]
    for i, depth in enumerate(data["depths"]):
        column, k_c, k_direct = data["code"][i], data["k_c"][i], data["k_direct"][i]
        if depth == 1:  # every cell direct: no boundary below it
            assert np.isnan(k_c) and np.isnan(k_direct)
            continue
        if depth % 2:
            assert np.isnan(k_c) and not np.any(column == COLLAPSE)
        else:
            assert k[column == COLLAPSE].max() < k_c < k[column != COLLAPSE].min()
        assert k[column != DIRECT].max() < k_direct < k[column == DIRECT].min()
    k_c, k_direct = data["k_c"][_index(data, 2)], data["k_direct"][_index(data, 2)]
    assert SHRINK < k_c < GROW  # α_c lies strictly between the sufficient bounds
    assert k_c == pytest.approx(K_C, rel=_maps.K_RTOL[1])  # the search's rtol (quick run)
    assert k_direct == pytest.approx(K_DIRECT, rel=rtol)  # the exact sequential/direct ray
    assert np.allclose(data["bounds"], [SHRINK, GROW, K_DIRECT], rtol=1e-12)


def test_regime_map_plane_is_made_of_the_rays_of_the_depth_panel(quick):
    """Scale invariance: every (ρ, α) cell is classified by α/ρ against the L = 2 k's alone."""
    data = quick["regime_map"]
    plane, alpha, rho = data["plane"], data["alpha"], data["rho"]
    assert not np.any(plane == UNDETERMINED)
    ratio = alpha[:, None] / rho[None, :]
    k_c, k_direct = data["k_c"][_index(data, 2)], data["k_direct"][_index(data, 2)]
    ray = np.where(ratio < k_c, COLLAPSE, np.where(ratio < k_direct, SEQUENTIAL, DIRECT))
    far = (np.abs(np.log(ratio / k_c)) > 0.1) & (np.abs(np.log(ratio / k_direct)) > 0.1)
    assert far.sum() > 0.8 * far.size and np.array_equal(plane[far], ray[far])
    assert set(np.unique(plane).tolist()) == {COLLAPSE, SEQUENTIAL, DIRECT}
    # the cells nearest below and above the α_c ray at the smallest ρ it crosses, by analysis
    j = int(np.flatnonzero(k_c * rho > alpha[0])[0])
    assert rho[j] < 1
    below, above = _around(alpha, k_c * rho[j])
    assert _path(below, 2, rho[j]).regime == "collapse"
    assert _path(above, 2, rho[j]).regime == "sequential"


def test_regime_map_odd_depth_band_starts_on_the_major_coordinate(quick):
    """At odd L the cells below k_major (where j†(0⁺) leaves d, by the start rates by hand) are
    ``excursion``, those above it ``sequential``. The last excursion cell's reduced flow (scipy,
    its own vector field) starts on d and makes a minor excursion; the first sequential cell
    starts on a minor coordinate (its start rates by hand)."""
    data = quick["regime_map"]
    k = data["k"]
    i = _index(data, 3)
    column, k_major = data["code"][i], _k_major_start(3)
    assert 0.2 < k_major < 0.35  # the band: k from the smallest start to about 0.29
    far = np.abs(np.log(k / k_major)) > 0.02
    below = far & (k < k_major)
    assert below.sum() >= 2 and np.all(column[below] == EXCURSION)
    assert np.all(column[far & (k > k_major) & (k < data["k_direct"][i])] == SEQUENTIAL)
    last, first = _around(k, k_major)
    seq, _ = _reference.l2sam_switches(MU, last, 1.0, 3)
    assert seq[0] == MAJOR and len(seq) > 1 and seq[-1] == MAJOR  # major first, an excursion
    assert int(np.argmax(_start_rates(first, 3))) != MAJOR  # minor first (the cells test: last)


# --- the j† maps: every switch of analysis.regime_path, and the colours around it --------


def _assert_row_follows_the_switches(row, grid, clocks, sequence):
    """Between two switches the map shows the index analysis visits, except within one grid
    cell of a switch (the map reads j† at the grid's clock values)."""
    cell = grid[1] / grid[0]
    edges = np.r_[0.0, clocks, np.inf]
    checked = 0
    for m, index in enumerate(sequence):
        inside = (grid > edges[m] * cell) & (grid < edges[m + 1] / cell) & (row >= 0)
        assert np.all(row[inside] == index), (m, index, row[inside])
        checked += inside.sum()
    assert checked >= (row >= 0).sum() - 3 * len(clocks)


MARKS = ("mark_rows", "switch_times", "switch_clock", "switch_after", "switch_late")


def _check_marks(row_of, alphas, grid, marks, depth):
    """Every switch of analysis.regime_path at each marked row is drawn, at its time, and the
    map's row follows the sequence; a switch after the row's run stopped (in the blow-up) is
    drawn past the row's end, and the row ends on the index before it."""
    rows, times, clocks, after, late = marks
    assert len(rows) > 0
    for i, ts, ss, js, lt in zip(rows, times, clocks, after, late, strict=True):
        path = _path(alphas[i], depth)
        n = len(path.times)
        assert path.regime in ("sequential", "excursion", "direct")
        assert js[:n].tolist() == path.sequence[1:] and np.all(js[n:] == -1) and not any(lt[n:])
        np.testing.assert_allclose(ts[:n], path.times, rtol=1e-12)
        assert np.all(np.isfinite(ss[:n])) and np.all((ss[:n] > grid[0]) & (ss[:n] < grid[-1]))
        assert np.all(np.diff(ss[:n]) > 0)
        row = row_of(i)
        on_time = n - int(lt[:n].sum())
        assert not any(lt[:on_time]) and all(lt[on_time:n])  # the late ones are the last ones
        if on_time < n:  # past the row's end, in order; its last grid point is just before
            assert row[-1] == -1
            s_end, last = ss[on_time] / _maps.LATE_STEP, grid[row >= 0][-1]
            assert last <= s_end < last * grid[1] / grid[0]
            steps = _maps.LATE_STEP ** np.arange(1, n - on_time + 1)
            np.testing.assert_allclose(ss[on_time:n], s_end * steps, rtol=1e-12)
        _assert_row_follows_the_switches(row, grid, ss[:on_time], path.sequence[: on_time + 1])


def test_minor_first_dots_are_every_switch_and_the_map_follows_them(quick):
    data = quick["minor_first"]
    marks = tuple(data[key] for key in MARKS)
    assert not np.any(data["switch_late"])  # at L = 2 every switch is inside the map
    _check_marks(lambda i: data["jdag"][i], data["alpha"], data["tau"], marks, 2)
    # the row just above α_c: j† leaves 2 for 1 and comes back (not monotone), then climbs to 5
    row = int(np.argmin(np.abs(data["alpha"] - 0.36)))
    assert row in data["mark_rows"]
    _assert_path_is_the_reduced_flows(data["alpha"][row], 2, [1, 0, 1, 2, 3, 4])


def test_minor_first_rows_on_both_sides_of_alpha_c_and_alpha_direct(quick):
    data = quick["minor_first"]
    alpha, jdag = data["alpha"], data["jdag"]
    assert SHRINK < float(data["k_c"]) < GROW
    assert float(data["k_c"]) == pytest.approx(K_C, rel=_maps.K_RTOL[1])
    assert float(data["k_direct"]) == pytest.approx(K_DIRECT, rel=_maps.K_RTOL[1])
    row = {a: i for i, a in enumerate(alpha)}
    below_c, above_c = _around(alpha, float(data["k_c"]))
    below_d, above_d = _around(alpha, K_DIRECT)
    assert _path(below_c, 2).regime == "collapse" and np.any(jdag[row[below_c]] == -2)
    assert _path(above_c, 2).regime == "sequential" and not np.any(jdag[row[above_c]] < 0)
    assert _path(below_d, 2).regime == "sequential" and jdag[row[below_d]][0] != MAJOR
    assert _path(above_d, 2).regime == "direct" and np.all(jdag[row[above_d]] == MAJOR)


def test_minor_first_gd_strip_is_the_major_coordinate_throughout(quick):
    """GD from the same starts: w_j = α e^{μ_j τ} (docs/theory.md §8), so j† = argmax μ at every
    τ > 0, whatever α: the strip is j† = 5 in every cell, and every run reaches the axis' end."""
    data = quick["minor_first"]
    assert data["jdag_gd"].shape == data["jdag"].shape
    assert np.all(data["jdag_gd"] == MAJOR)


def test_minor_first_rows_start_on_the_coordinate_the_start_rates_name(quick):
    """j† at the first clock value (τ = 10⁻³) is the argmax of the start rates by hand: the μ_j
    nearest α‖μ‖/(√2ρ) at L = 2 (docs/theory.md §9), so 2, 3 or 4 between α_c and α_direct."""
    data = quick["minor_first"]
    starts = np.array([int(np.argmax(_start_rates(a, 2))) for a in data["alpha"]])
    mid = np.linalg.norm(MU) * data["alpha"] / np.sqrt(2.0)  # the parabola's peak in μ
    far = np.abs(mid - np.round(mid - 0.5) - 0.5) > 0.02  # not within 0.02 of a midpoint
    np.testing.assert_array_equal(data["jdag"][far, 0], starts[far])
    band = (data["alpha"] > float(data["k_c"])) & (data["alpha"] < float(data["k_direct"]))
    assert set(starts[band].tolist()) <= {1, 2, 3} and band.sum() >= 3


def test_depth_draws_alpha_c_at_every_even_depth_and_none_at_odd(quick):
    """Every row agrees with the α_c line: none above it collapses, none below it escapes, and the
    rows below it collapse, but for at most the one next to it, whose run can still linger near
    the saddle at the axis' end (the time there grows as |α/α_c − 1|^(−(L−2)/2), L ≥ 4)."""
    data, ks = quick["depth"], quick["regime_map"]
    alpha = data["alpha"]
    collapsed, escaped = int(flows.Status.COLLAPSED), int(flows.Status.ESCAPED)
    for i, depth in enumerate(data["depths"]):
        jdag, status, k_c = data["jdag"][i], data["status"][i], data["k_c"][i]
        same = np.flatnonzero(ks["depths"] == depth)[0]  # one search serves both figures
        np.testing.assert_array_equal(
            [k_c, data["k_direct"][i]], [ks["k_c"][same], ks["k_direct"][same]]
        )
        np.testing.assert_array_equal(np.any(jdag == -2, axis=1), status == collapsed)
        if depth % 2:
            assert np.isnan(k_c) and not np.any(status == collapsed)
            continue
        below = alpha < k_c
        assert not np.any(status[~below] == collapsed) and not np.any(status[below] == escaped)
        assert np.sum(below & (status != collapsed)) <= 1 and status[0] == collapsed


def test_depth_dots_are_every_switch_and_the_maps_follow_them(quick):
    """At every depth, including L = 3 from a small start: 5 → 3 → 5 late in the run (the
    minor coordinate leads |β| briefly while the q_j keep their order, docs/theory.md §10)."""
    data = quick["depth"]
    n = data["jdag"].shape[-1]
    for i, depth in enumerate(data["depths"]):
        keep = data["mark_rows"][i] >= 0
        marks = tuple(data[key][i][keep] for key in MARKS)
        grid = _maps.tau_grid(int(depth), n)
        _check_marks(lambda r, i=i: data["jdag"][i][r], data["alpha"], grid, marks, int(depth))
    i = int(np.flatnonzero(data["depths"] == 3)[0])
    row = int(np.argmin(np.abs(data["alpha"] - 0.1)))
    assert row in data["mark_rows"][i]
    _assert_path_is_the_reduced_flows(data["alpha"][row], 3, [MAJOR, 2, MAJOR])


def test_switches_after_a_run_stopped_are_drawn_past_its_end_in_order():
    """L = 4 just above α_c (the full depth figure): j† goes 1 → 4 → 5 deep in the blow-up. On a
    row whose run stopped between the two switches (a clock equal to τ, for the test), the first
    is drawn at its time and the second past the row's end."""
    alpha = 0.23
    path = _assert_path_is_the_reduced_flows(alpha, 4, [0, 3, MAJOR])
    t_end = float(np.mean(path.times))  # the run stopped between the two switches
    grid = _maps.tau_grid(4, 60)
    row_tau = np.where(grid <= t_end, grid, np.nan)
    rows, times, clock, after, late = _maps._switch_marks(
        np.array([alpha]), [alpha], 4, row_tau[None], (np.array([t_end]), np.array([t_end])), grid
    )
    assert rows.tolist() == [0] and after[0].tolist() == [3, MAJOR]
    assert late[0].tolist() == [False, True]
    np.testing.assert_allclose(clock[0], [path.times[0], t_end * _maps.LATE_STEP], rtol=1e-12)


# --- the captions of docs/gallery.md: each number stated, and the committed data give it ----


def _states(caption, *texts):
    for text in texts:
        assert text in caption, text


def _edge_states(below, above, stated, digits):
    """A change between two grid values ``below`` < ``above`` is stated as ``stated`` (a
    string with ``digits`` decimals): the cell pair meets the rounding interval of ``stated``."""
    half = 0.5 * 10.0**-digits
    assert below < above and below < float(stated) + half and above > float(stated) - half


def test_regime_map_caption_states_what_its_data_show():
    cap, data = gallery_caption("regime_map"), published_data("regime_map")
    depths, k, code = data["depths"], data["k"], data["code"]
    _states(cap, "96 values of α/ρ", "24 × 24 grid", "L = 1, …, 8", "to 0.3%")
    assert k.size == 96 and data["plane"].shape == (24, 24) and depths.tolist() == [*range(1, 9)]
    assert _maps.K_RTOL[0] / 2 <= 3e-3  # the search's cell: rtol 0.6%, k to half of it
    # L = 1: direct throughout, no boundary
    _states(cap, "Every start is direct (j† = 5 from τ = 0⁺), with no boundary")
    one = _index(data, 1)
    assert np.all(code[one] == DIRECT) and np.isnan(data["k_c"][one] + data["k_direct"][one])
    # k_c at the even depths, falling; k_direct rising from L = 2 to L = 8
    _states(cap, "(0.347, 0.223, 0.179, 0.154 at L = 2, 4, 6, 8)")
    k_c = [data["k_c"][_index(data, L)] for L in (2, 4, 6, 8)]
    assert [f"{v:.3f}" for v in k_c] == ["0.347", "0.223", "0.179", "0.154"]
    # L = 2 against the reduced flow's α_c (scipy bisection, analysis._reference), to the 0.3 %
    # the search promises; and the L = 4 column against the reduced flow at depth 4: the rows on
    # either side of k_c collapse and escape there
    assert abs(k_c[0] / K_C - 1) <= 3e-3
    col = code[_index(data, 4)]
    below, above = k[k < k_c[1]].max(), k[k > k_c[1]].min()
    assert col[k == below][0] == COLLAPSE and col[k == above][0] != COLLAPSE
    _reference.l2sam_switches(MU, float(above), 1.0, 4)  # escapes (raises otherwise)
    assert np.all(np.diff(k_c) < 0) and np.all(np.isnan(data["k_c"][depths % 2 == 1]))
    _states(cap, "0.857 at L = 2, where the closed form gives 0.858, to 1.71 at L = 8")
    k_direct = data["k_direct"][depths >= 2]
    assert f"{k_direct[0]:.3f}" == "0.857" and f"{K_DIRECT:.3f}" == "0.858"
    # the closed form of docs/theory.md §9, written out: ρ(μ_(d) + μ_(d−1))/(√2‖μ‖)
    assert K_DIRECT == pytest.approx((5 + 4) / (np.sqrt(2) * np.linalg.norm(MU)), rel=1e-12)
    assert abs(k_direct[0] / K_DIRECT - 1) <= 3e-3
    assert f"{k_direct[-1]:.2f}" == "1.71" and np.all(np.diff(k_direct) > 0)
    # sequential in a band at every L >= 2; excursion below it at odd L, ending where stated
    for L in range(2, 9):
        column = code[_index(data, L)]
        assert np.any(column == SEQUENTIAL) and (np.any(column == EXCURSION) == bool(L % 2))
    _states(cap, "ends at α/ρ = 0.29, 0.20 and 0.17 at L = 3, 5 and 7")
    for L, stated in ((3, "0.29"), (5, "0.20"), (7, "0.17")):
        column = code[_index(data, L)]
        below, above = k[column == EXCURSION], k[column == SEQUENTIAL]
        assert np.all(k[k <= below.max()] == below)  # one band, from the smallest start up
        _edge_states(below.max(), above.min(), stated, 2)
        _edge_states(below.max(), above.min(), f"{_k_major_start(L):.2f}", 2)


def test_minor_first_caption_states_what_its_data_show():
    cap, data = gallery_caption("minor_first"), published_data("minor_first")
    alpha, start = data["alpha"], data["jdag"][:, 0]
    _states(cap, "α_c = 0.347", "α_direct = 0.857")
    assert f"{float(data['k_c']):.3f}" == "0.347" and f"{float(data['k_direct']):.3f}" == "0.857"
    _states(cap, "j† = 2 up to α = 0.477", "3 up to 0.667, 4 up to α_direct")
    band = (alpha > float(data["k_c"])) & (alpha < float(data["k_direct"]))
    assert set(start[band].tolist()) == {1, 2, 3}
    for j, stated in ((1, "0.477"), (2, "0.667")):
        _edge_states(alpha[band & (start == j)].max(), alpha[start == j + 1].min(), stated, 3)
        # closed form (docs/theory.md §9): j†(0⁺) is the μ_j nearest α‖μ‖/(√2ρ), so it moves
        # from j to j + 1 (0-based) at α = √2ρ(μ_j + μ_{j+1})/(2‖μ‖); the map reads j† from
        # τ = 10⁻³ on, where the rates have moved a little: its edge is within one row of it
        edge = np.sqrt(2) * (MU[j] + MU[j + 1]) / (2 * np.linalg.norm(MU))
        step = alpha[1] / alpha[0]  # the grid is geometric
        assert f"{edge:.3f}" == stated
        assert alpha[band & (start == j)].max() / step < edge < alpha[start == j + 1].min() * step
    assert f"{data['bounds'][1]:.3f}" == "0.477"  # the dotted bound
    assert alpha[start == 3].max() < float(data["k_direct"]) < alpha[start == 4].min()
    _states(cap, "on six rows of the grid", "on the row α = 0.3595")
    rows = data["mark_rows"]
    assert rows.size == 6
    m = int(np.flatnonzero(np.round(alpha[rows], 2) == 0.36)[0])
    assert f"{alpha[rows[m]]:.4f}" == "0.3595"
    after, times = data["switch_after"][m], data["switch_times"][m]
    assert [start[rows[m]], *after[after >= 0]] == [1, 0, 1, 2, 3, 4]
    stated = ", ".join(f"{t:.2f}" for t in times[after >= 0])
    _states(cap, f"2 → 1 → 2 → 3 → 4 → 5 at τ = {stated} (the mechanism")
    # the same sequence from α = 0.36 itself (the mechanism figure's run), its last four
    # switches earlier
    mech = published_data("mechanism")
    assert float(mech["alpha"]) == 0.36 and alpha[rows[m]] < 0.36
    assert mech["sequence/ℓ2-SAM"].tolist() == [1, *after[after >= 0].tolist()]
    assert np.all(mech["switch_t/ℓ2-SAM"][1:] < times[after >= 0][1:])
    _states(cap, "makes its last four switches earlier")
    # "climbs to 5": every row between α_c and α_direct does by τ = 20 except the stated 2,
    # which end below α = 0.352 on another index
    last = data["jdag"][:, -1]
    short = band & (last != MAJOR)
    assert float(data["tau"][-1]) == 20.0 and _states(cap, "up to τ = 20") is None
    assert short.sum() == 2 and alpha[short].max() < 0.352 < alpha[band & (last == MAJOR)].min()
    _states(cap, "the 2 rows between α_c and α = 0.352 have not reached 5 by τ = 20")
    _states(cap, "GD from the same starts (written in the panel", "has j† = 5 in every cell")
    assert np.all(data["jdag_gd"] == MAJOR)


def test_depth_caption_states_what_its_data_show():
    cap, data = gallery_caption("depth"), published_data("depth")
    alpha = data["alpha"]
    # L = 2 is computed with the others but drawn in the minor-first figure, from the same runs
    _states(cap, "at (a) L = 3 and (b) L = 4", "the map is the minor-first figure")
    two = published_data("minor_first")
    rows = np.isin(alpha, two["alpha"])
    np.testing.assert_array_equal(data["jdag"][_index(data, 2)][rows], two["jdag"])
    _states(cap, "at ‖θ‖ = 10⁴‖θ₀‖")
    assert all(_maps.ESCAPE_PATH[int(L)] == 1e4 for L in data["depths"] if L >= 3)
    i = _index(data, 3)
    start = data["jdag"][i][:, 0]
    _states(cap, "At L = 3 a start below α = 0.29 leads on the major coordinate")
    below = alpha < data["k_direct"][i]
    _edge_states(alpha[below & (start == MAJOR)].max(), alpha[below & (start != MAJOR)].min(),
                 "0.29", 2)  # fmt: skip
    assert np.all(start[alpha <= alpha[below & (start == MAJOR)].max()] == MAJOR)

    def path(stated):  # the j† path of the marked L = 3 row at α = stated, and its times
        rows = data["mark_rows"][i]
        m = int(np.flatnonzero((rows >= 0) & (np.round(alpha[rows], 1) == stated))[0])
        after = data["switch_after"][i][m]
        return [start[rows[m]], *after[after >= 0]], data["switch_times"][i][m]

    _states(cap, "5 → 3 → 5 at α = 0.1", "5 → 2 → 3 → 5 at α = 0.2", "0.03 apart in τ")
    assert path(0.1)[0] == [4, 2, 4]
    sequence, times = path(0.2)
    assert sequence == [4, 1, 2, 4] and f"{times[2] - times[1]:.2f}" == "0.03"
    # both paths also on the reduced flow at L = 3 (scipy Radau, analysis._reference)
    rows = data["mark_rows"][i]
    for stated, expected in ((0.1, [4, 2, 4]), (0.2, [4, 1, 2, 4])):
        row = rows[(rows >= 0) & (np.round(alpha[np.maximum(rows, 0)], 1) == stated)][0]
        seq, ref_times = _reference.l2sam_switches(MU, float(alpha[row]), 1.0, 3)
        assert seq == expected, (stated, seq)
    assert f"{ref_times[2] - ref_times[1]:.2f}" == "0.03"  # 0.2: the switches to 3 and to 5
    _states(cap, "the 7 rows between α_c and α = 0.24", "5 of them on j† = 1")
    i = _index(data, 4)
    rows = np.flatnonzero((alpha > data["k_c"][i]) & (alpha < 0.24))
    ends = [data["jdag"][i][r][data["jdag"][i][r] >= 0][-1] for r in rows]
    assert rows.size == 7 and ends.count(0) == 5
    assert all(data["jdag"][i][r][-1] == -1 for r in rows)  # where their runs stopped
