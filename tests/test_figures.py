"""Figures (issue 5): the quick CLI run writes every file, the drawn data agree with the
analysis functions at spot-checked points, and redrawing from saved data solves nothing.

The regime, minor-first and depth maps are spot-checked in tests/test_figures_maps.py; the path
figures (trajectories, linf_limits, discrete) in tests/test_figures_paths.py; the sweep cache
itself (hit, miss, resume after a kill) in tests/test_sweep.py.
"""

import pytest

import analysis
import figures
import flows
from tests.test_cli import one_line_error


@pytest.fixture(scope="module")
def quick_run(quick_figures):
    """``python -m figures --quick`` (tests/conftest.py: each figure made once in the run)."""
    return quick_figures


def _data(cache, name):
    return figures.load_data(figures.Context(out=cache, cache=cache, quick=True), name)


def test_quick_run_writes_every_figure(quick_run, tmp_path):
    """The quick run wrote every figure; the CLI entry point redraws them all from its data."""
    out, cache = quick_run
    argv = ["--quick", "--quiet", "--redraw", "--out", str(tmp_path), "--cache", str(cache)]
    assert figures.main(argv) == 0
    for folder in (out, tmp_path):
        for name in figures.FIGURES:
            for ext in ("pdf", "png"):
                path = folder / f"{name}.{ext}"
                assert path.exists() and path.stat().st_size > 1000, path
            # the data each figure was drawn from lies beside it, intact
            assert figures.load_data(figures.Context(out=folder, cache=folder, quick=True), name)


def test_cli_help_lists_every_figure(capsys):
    with pytest.raises(SystemExit):
        figures.main(["--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in figures.FIGURES)


def test_unknown_figure_is_an_error():
    with pytest.raises(SystemExit):
        figures.main(["no_such_figure", "--quiet"])


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


def test_cli_executor_is_a_checked_choice(capsys):
    one_line_error(capsys, lambda: figures.main(["--executor", "slurm", "--quiet"]), "--executor")
