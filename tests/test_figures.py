"""Figures (issue 5): the quick CLI run writes every file, the drawn data agree with the
analysis functions at spot-checked points, and redrawing from saved data solves nothing.

The regime, minor-first and depth maps are spot-checked in tests/test_figures_maps.py; the path
figures (trajectories, linf_limits, discrete) in tests/test_figures_paths.py; the sweep cache
itself (hit, miss, resume after a kill) in tests/test_sweep.py.
"""

import numpy as np
import pytest

import analysis
import figures
import flows
import tests.helpers
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


def test_side_by_side_processes_give_the_serial_numbers(quick_run, tmp_path, capfd):
    """``jobs=2`` makes two figures in two spawned processes: each writes its files and the
    same numbers, bit for bit, as the quick run, which made each figure alone in a test
    process; the progress lines name their figure and no progress bar is drawn."""
    _, serial = quick_run
    names = ["steps", "lesam"]  # in the catalogue's order, as `make` returns them
    written = figures.make(names, out=tmp_path, cache=tmp_path / "cache", quick=True, jobs=2)
    assert list(written) == names
    assert all(p.stat().st_size > 1000 for paths in written.values() for p in paths)
    for name in names:
        got, want = _data(tmp_path / "cache", name), _data(serial, name)
        assert set(got) == set(want), name
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name}: {key}")
    out, err = capfd.readouterr()
    assert all(f"[{name}] computing (quick)" in out for name in names)
    assert "[steps]   " in out  # a progress line of the figure's own, named
    assert "chunk/s" not in out + err


def _checked_sqrt(x):
    import equinox as eqx
    import jax.numpy as jnp

    return {"y": jnp.sqrt(eqx.error_if(x, x < 0, "x must be >= 0"))}


def test_figure_sweeps_trace_checks_as_nan_so_that_jax_can_cache_them(tmp_path):
    """The figures' sweeps trace equinox's runtime checks as NaN, not as host callbacks (which
    JAX's persistent cache refuses to store): a failing check gives NaN (to its chunk, here of
    one point), not a failure."""
    from figures._common import Context, sweep

    ctx = Context(out=tmp_path, cache=tmp_path, quick=True, progress=False)
    r = sweep(ctx, _checked_sqrt, {"x": [4.0, -1.0]}, chunk_size=1)
    assert r["y"][0] == 2.0 and np.isnan(r["y"][1])
    assert not np.any(r["failed"])


def test_figure_groups_keep_shared_state_in_one_process():
    """The figures that share the boundary memo are one group, in the catalogue's order."""
    groups = figures._registry._groups(["depth", "lesam", "regime_map", "steps"])
    assert groups == [["regime_map", "depth"], ["lesam"], ["steps"]]


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True, "2"])
def test_bad_jobs_is_refused(jobs, tmp_path):
    with pytest.raises(ValueError, match="`jobs`"):
        figures.make(["lesam"], out=tmp_path, cache=tmp_path, quick=True, jobs=jobs)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_cli_jobs_is_a_positive_integer(capsys, value):
    one_line_error(capsys, lambda: figures.main(["--jobs", value, "--quiet"]), "--jobs")


# --- the committed figures against a fresh quick computation ---------------------------------


def _shared(quick, full, rtol=1e-9):
    """Indices into ``full`` of the values of ``quick`` (each must be there, to ``rtol``)."""
    idx = [int(np.flatnonzero(np.isclose(full, x, rtol=rtol, atol=0))[0]) for x in quick]
    return np.array(idx)


def test_quick_run_agrees_with_the_published_data(quick_run):
    """The caption tests read the committed docs/figures/data; this one recomputes. Every figure
    whose quick grid shares points (or whole runs) with the full one is compared there with the
    committed data, to the accuracy of the quick settings: so a change of code that changes a
    published figure fails here, not only a change of the data."""
    _, cache = quick_run
    quick = {name: _data(cache, name) for name in figures.FIGURES}
    full = {name: tests.helpers.published_data(name) for name in figures.FIGURES}
    # mechanism: the same runs saved on a 4× coarser grid; switch times by root finding
    q, f = quick["mechanism"], full["mechanism"]
    rows = _shared(q["taus"], f["taus"])
    for key in ("GD", "ℓ2-SAM"):
        for name in ("rates", "margin_grad"):
            np.testing.assert_allclose(
                q[f"{name}/{key}"], f[f"{name}/{key}"][rows], rtol=1e-8, atol=1e-8
            )
        np.testing.assert_array_equal(q[f"sequence/{key}"], f[f"sequence/{key}"])
        np.testing.assert_allclose(q[f"switch_t/{key}"], f[f"switch_t/{key}"], rtol=1e-9)
    # max_margin: the fitted rates and prefactors of (b), the rates of (c)
    q, f = quick["max_margin"], full["max_margin"]
    for key in ("GD", "ℓ2-SAM"):
        for name, rtol in (("rate/2", 1e-5), ("prefactor/2", 1e-4), ("rate/1", 1e-3)):
            np.testing.assert_allclose(q[f"{name}/{key}"], f[f"{name}/{key}"], rtol=rtol)
    # trajectories: α_c (quick to 1e-4), the j† sequences, and what does not hinge on α_c's digits
    q, f = quick["trajectories"], full["trajectories"]
    np.testing.assert_allclose(q["alpha_c"], f["alpha_c"], rtol=1e-4)
    for i in range(4):
        np.testing.assert_array_equal(q[f"sequence/l2/{i}"], f[f"sequence/l2/{i}"])
    for i in (0, 1):  # 2 α_c and 1.1 α_c: far enough from α_c for 1e-4 not to matter
        np.testing.assert_allclose(q[f"switch_t/l2/{i}"], f[f"switch_t/l2/{i}"], rtol=2e-3)
        np.testing.assert_allclose(q[f"tau_low/l2/{i}"], f[f"tau_low/l2/{i}"], rtol=2e-3)
    np.testing.assert_allclose(q["tau_low/gd"], f["tau_low/gd"], rtol=1e-3)
    # discrete: the same flows and iterates; the errors at the quick step sizes
    q, f = quick["discrete"], full["discrete"]
    cols = _shared(q["lrs"], f["lrs"])
    for key in ("GD", "ℓ2-SAM", "ℓ∞-SAM", "ℓ∞-SAM-slide"):
        np.testing.assert_allclose(q[f"flow_w/{key}"], f[f"flow_w/{key}"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(q[f"error/{key}"], f[f"error/{key}"][cols], rtol=1e-6)
    # linf_limits: the tie lines
    q, f = quick["linf_limits"], full["linf_limits"]
    for L in (3, 4):
        np.testing.assert_allclose(q[f"tie_a2/{L}"], f[f"tie_a2/{L}"], rtol=1e-12)
    # regime_map, minor_first: the boundaries, searched to the quick run's looser tolerance
    q, f = quick["regime_map"], full["regime_map"]
    depths = _shared(q["depths"], f["depths"])
    for key in ("k_c", "k_direct"):
        np.testing.assert_allclose(q[key], f[key][depths], rtol=0.05)
    q, f = quick["minor_first"], full["minor_first"]
    np.testing.assert_allclose([q["k_c"], q["k_direct"]], [f["k_c"], f["k_direct"]], rtol=0.05)
    # lesam_flatness: LE-SAM's mean radius on a coarser saving grid (trapezoidal rule)
    np.testing.assert_allclose(
        quick["lesam_flatness"]["rho_bar"], full["lesam_flatness"]["rho_bar"], rtol=1e-4
    )
