"""Figures (issue 5): the quick CLI run writes every file, the drawn data agree with the
analysis functions at spot-checked points, and redrawing from saved data solves nothing.

The sweep cache itself (hit, miss, resume after a kill) is tested in tests/test_sweep.py; the
path figures (trajectories, linf_limits, discrete) in tests/test_figures_paths.py.
"""

import numpy as np
import pytest

import analysis
import figures
import flows
from figures import _maps

MU = np.arange(1.0, 6.0)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """``python -m figures --quick`` (in process, through the CLI entry point)."""
    root = tmp_path_factory.mktemp("figures")
    out, cache = root / "out", root / "cache"
    assert figures.main(["--quick", "--quiet", "--out", str(out), "--cache", str(cache)]) == 0
    return out, cache


def _data(cache, name):
    return figures.load_data(figures.Context(out=cache, cache=cache, quick=True), name)


def test_quick_run_writes_every_figure(quick_run):
    out, _ = quick_run
    for name in figures.FIGURES:
        for ext in ("pdf", "png"):
            path = out / f"{name}.{ext}"
            assert path.exists() and path.stat().st_size > 1000, path


def test_cli_help_lists_every_figure(capsys):
    with pytest.raises(SystemExit):
        figures.main(["--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in figures.FIGURES)


def test_unknown_figure_is_an_error():
    with pytest.raises(SystemExit):
        figures.main(["no_such_figure", "--quiet"])


def test_regime_map_agrees_with_analysis_regime(quick_run):
    """At the grid point nearest to α/ρ = 0.05, 0.6 and 5 (well inside each regime)."""
    _, cache = quick_run
    data = _data(cache, "regime_map")
    cls = data["regime"]  # (alpha, rho)
    log_ratio = np.log(data["alpha"][:, None] / data["rho"][None, :])
    names = {0: "collapse", 1: "sequential", 2: "direct"}
    for ratio, expected in ((0.05, "collapse"), (0.6, "sequential"), (5.0, "direct")):
        i, j = np.unravel_index(np.argmin(np.abs(log_ratio - np.log(ratio))), cls.shape)
        alpha, rho = float(data["alpha"][i]), float(data["rho"][j])
        got = analysis.regime(flows.L2SAM(rho), MU, alpha, collapse_tol=_maps.COLLAPSE_TOL)
        assert got == expected == names[int(cls[i, j])], (alpha, rho)


def test_regime_map_boundaries_follow_the_closed_form(quick_run):
    """Each row α/ρ above the exact α_direct ray is direct; below the all-shrink bound, collapse."""
    _, cache = quick_run
    data = _data(cache, "regime_map")
    ratio = data["alpha"][:, None] / data["rho"][None, :]
    k = np.array(analysis.l2sam_thresholds(MU, 1.0))  # thresholds scale with ρ
    assert np.all(data["regime"][ratio > 1.05 * k[2]] == 2)
    assert np.all(data["regime"][ratio < k[0]] == 0)
    assert np.all(data["regime"][(ratio > k[1]) & (ratio < 0.95 * k[2])] == 1)


def test_minor_first_map_agrees_with_switch_times(quick_run):
    _, cache = quick_run
    data = _data(cache, "minor_first")
    i = int(np.argmin(np.abs(data["alpha"] - 0.5)))  # a sequential row
    alpha = float(data["alpha"][i])
    path = analysis.regime_path(flows.L2SAM(1.0), MU, alpha, collapse_tol=_maps.COLLAPSE_TOL)
    assert path.regime == "sequential"
    tau, row = data["tau"], data["jdag"][i]
    edges = np.concatenate([[0.0], path.times, [np.inf]])
    expected = np.array(path.sequence)[np.searchsorted(edges, tau, side="right") - 1]
    # away from the switch times (within 1% of τ) the map's j† is the one analysis finds
    near = np.any(np.abs(tau[:, None] - path.times[None, :]) < 0.01 * tau[:, None], axis=1)
    reached = row >= 0
    assert np.array_equal(row[reached & ~near], expected[reached & ~near])


def test_redraw_solves_nothing(quick_run, tmp_path, monkeypatch):
    _, cache = quick_run

    def forbidden(*args, **kwargs):
        raise AssertionError("redraw must not solve")

    for name in ("solve", "iterate", "sweep"):
        monkeypatch.setattr(flows, name, forbidden)
    monkeypatch.setattr(analysis, "critical_alpha", forbidden)
    written = figures.make(out=tmp_path, cache=cache, quick=True, redraw=True, progress=False)
    assert set(written) == set(figures.FIGURES)
    assert all(p.exists() for paths in written.values() for p in paths)
