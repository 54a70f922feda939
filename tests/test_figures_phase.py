"""``python -m figures phase`` (issue 12, item 7): the user's own phase diagram is swept, saved
and drawn; its regimes agree with the scalar reduction of the balanced single-example flow
point by point and with the sympy bounds of :func:`analysis.l2sam_thresholds`; a rerun reads the
cache; a TOML file gives the same diagram as the flags; and every bad input is one line naming
its flag, before any computing."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import numpy as np
import pytest
import xarray as xr

import analysis
import figures
import flows
from analysis import _reference
from figures import _phase_cli
from tests.test_cli import one_line_error

MU = np.arange(1.0, 6.0)
MU3 = [1.0, 2.0, 3.0]
ROOT = Path(__file__).resolve().parents[1]
# A tiny (α, ρ) grid at L = 2 that crosses the collapse, sequential and direct regions.
FLAGS = ["--method", "l2sam", "--depth", "2", "--mu", "1,2,3,4,5"]
GRID = ["--alpha", "0.02:3:6", "--rho", "0.1:1:5"]


def _files(folder: Path) -> dict:
    """Every file under ``folder``: relative path -> (size, mtime in ns)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "jax-cache" not in p.parts
    }


@pytest.fixture(scope="module")
def flag_run(tmp_path_factory):
    """The command as a user runs it, in process (``figures.main``)."""
    out = tmp_path_factory.mktemp("phase") / "out"
    assert figures.main(["phase", *FLAGS, *GRID, "--out", str(out), "--quiet"]) == 0
    return out


def test_writes_the_figure_and_the_data(flag_run):
    for name in ("phase.pdf", "phase.png", "phase.nc"):
        path = flag_run / name
        assert path.is_file() and path.stat().st_size > 1000, path
    ds = xr.load_dataset(flag_run / "phase.nc")
    assert ds["code"].dims == ("alpha", "rho")
    np.testing.assert_allclose(ds["alpha"], np.geomspace(0.02, 3.0, 6), rtol=1e-15)
    np.testing.assert_allclose(ds["rho"], np.geomspace(0.1, 1.0, 5), rtol=1e-15)
    assert ds.attrs["swept"] == "alpha rho" and ds.attrs["loss"] == "logistic"
    assert "--alpha 0.02:3:6" in ds.attrs["command"]


def _reduced_regime(mu, alpha, rho, depth):
    """ℓ2-SAM's regime from the uniform start α, without :mod:`analysis`. L = 2: collapse below
    α_c = ρ k_c (k_c bisected on the scalar reduction at ρ = 1, analysis._reference.l2sam_alpha_c;
    the rays α = kρ), direct above the closed form α_direct = ρ(μ_(d) + μ_(d−1))/(√2‖μ‖) (where
    the major coordinate leads from τ = 0⁺ and for good), sequential between; each start 1% or
    more from both. Odd L (no collapse), from the j† path of the reduced flow
    (analysis._reference.l2sam_switches): "direct" when it is argmax μ throughout,
    "excursion" when it starts there and leaves it, else "sequential" (it starts on a minor
    coordinate)."""
    mu = np.asarray(mu, dtype=float)
    if depth % 2:
        seq, _ = _reference.l2sam_switches(mu, alpha, rho, depth)
        major = int(np.argmax(mu))
        if seq == [major]:
            return "direct"
        return "excursion" if seq[0] == major else "sequential"
    assert depth == 2
    alpha_c = rho * _reference.l2sam_alpha_c(mu=tuple(float(m) for m in mu))
    alpha_d = rho * np.sort(mu)[-2:].sum() / (np.sqrt(2.0) * np.linalg.norm(mu))
    assert min(abs(alpha / alpha_c - 1), abs(alpha / alpha_d - 1)) > 0.01
    return "collapse" if alpha < alpha_c else "sequential" if alpha < alpha_d else "direct"


def test_codes_agree_with_the_reduction(flag_run):
    """The scalar reduction (:func:`_reduced_regime`) at one point of each region and at points
    next to the boundaries."""
    ds = xr.load_dataset(flag_run / "phase.nc")
    regimes = ds.attrs["regimes"].split()
    seen = set()
    for i, j in ((0, 4), (2, 2), (3, 1), (4, 4), (5, 0), (1, 0)):
        alpha, rho = float(ds["alpha"][i]), float(ds["rho"][j])
        expected = _reduced_regime(MU, alpha, rho, 2)
        assert regimes[int(ds["code"][i, j])] == expected, (alpha, rho)
        seen.add(expected)
    assert seen == {"collapse", "sequential", "direct"}


def test_codes_respect_the_sympy_bounds(flag_run):
    """α <= α_shrink collapses; α > α_direct (exact) is direct; between α_grow and α_direct
    sequential (:func:`analysis.l2sam_thresholds`, closed forms)."""
    ds = xr.load_dataset(flag_run / "phase.nc")
    regimes = np.array(ds.attrs["regimes"].split())
    seen = set()
    for j, rho in enumerate(ds["rho"].values):
        shrink, grow, direct = analysis.l2sam_thresholds(MU, float(rho))
        for i, alpha in enumerate(ds["alpha"].values):
            got = regimes[int(ds["code"][i, j])]
            if alpha <= shrink:
                assert got == "collapse", (alpha, rho)
            elif alpha > direct * 1.01:
                assert got == "direct", (alpha, rho)
            elif grow <= alpha < direct * 0.99:
                assert got == "sequential", (alpha, rho)
            else:
                continue
            seen.add(got)
    assert seen == {"collapse", "sequential", "direct"}  # the grid tests every bound


def test_the_picture_draws_the_codes(flag_run):
    ds = xr.load_dataset(flag_run / "phase.nc")
    fig = _phase_cli.draw(ds)
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")  # both span a decade or more
    assert "rho" in ax.get_xlabel() and "alpha" in ax.get_ylabel()
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names == [figures._common.REGIME_NAMES[k] for k in np.unique(ds["code"])]
    assert "$L=2$" in ax.get_title() and r"$\mu=(1, 2, 3, 4, 5)$" in ax.get_title()
    assert fig.get_size_inches()[0] == pytest.approx(2.7)
    mesh = ax.collections[0]
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).ravel(), ds["code"].values.ravel())


def test_rerun_reads_the_cache(flag_run):
    """The same command again computes nothing: the cache folder is unchanged, file by file."""
    before = _files(flag_run / "cache")
    assert any(name.endswith("result.npz") for name in before)
    first = xr.load_dataset(flag_run / "phase.nc")
    assert figures.main(["phase", *FLAGS, *GRID, "--out", str(flag_run), "--quiet"]) == 0
    assert _files(flag_run / "cache") == before
    xr.testing.assert_identical(first["code"], xr.load_dataset(flag_run / "phase.nc")["code"])


def test_interrupted_run_resumes_from_its_chunks(flag_run, tmp_path):
    """A run stopped after its chunks were written (no result.npz yet) reuses every chunk file
    as it is and only assembles the result."""
    cache = tmp_path / "cache"
    shutil.copytree(flag_run / "cache", cache)
    (result,) = cache.glob("*/result.npz")
    result.unlink()
    chunks = {k: v for k, v in _files(cache).items() if "/chunks/" in k}
    assert chunks
    out = tmp_path / "out"
    args = [*FLAGS, *GRID, "--out", str(out), "--cache", str(cache), "--quiet"]
    assert figures.main(["phase", *args]) == 0
    after = _files(cache)
    assert {k: v for k, v in after.items() if "/chunks/" in k} == chunks
    assert result.is_file()
    xr.testing.assert_identical(
        xr.load_dataset(flag_run / "phase.nc")["code"], xr.load_dataset(out / "phase.nc")["code"]
    )


def test_toml_gives_the_same_diagram(flag_run, tmp_path):
    """The TOML file of the same settings hits the same cache entry (the same configuration)
    and gives the same Dataset; a flag overrides the file (here ``--alpha``)."""
    config = tmp_path / "phase.toml"
    config.write_text(
        'method = "l2sam"\ndepth = 2\nmu = [1, 2, 3, 4, 5]\n'
        'alpha = "0.5:4:3"\nrho = "0.1:1:5"\nloss = "logistic"\n'
    )
    cache = flag_run / "cache"
    before = _files(cache)
    out = tmp_path / "out"
    args = [
        "--config",
        str(config),
        "--alpha",
        "0.02:3:6",
        "--out",
        str(out),
        "--cache",
        str(cache),
    ]
    assert figures.main(["phase", *args, "--quiet"]) == 0
    assert _files(cache) == before
    a, b = xr.load_dataset(flag_run / "phase.nc"), xr.load_dataset(out / "phase.nc")
    for name in ("code", "first", "last", "n_switches"):
        xr.testing.assert_identical(a[name], b[name])


def test_depth_axis_as_a_process(tmp_path):
    """``python -m figures phase`` in a fresh process, with depth as the second axis."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "figures", "phase", "--method", "l2sam", "--rho", "1"]
    cmd += ["--alpha", "0.1:2:3", "--depth", "2:3", "--mu", "1,2,3", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout
    ds = xr.load_dataset(out / "phase.nc")
    assert ds["code"].dims == ("depth", "alpha")
    regimes = ds.attrs["regimes"].split()
    # L = 2: 0.1 is below the all-shrink bound ρμ_1/(√2‖μ‖) = 0.189 (collapse), 2 above
    # α_direct = ρ(μ_3 + μ_2)/(√2‖μ‖) = 0.945 (direct); L = 3 from the reduced flow.
    expected = {(2, 0): "collapse", (2, 2): "direct"}
    expected |= {(3, i): _reduced_regime(MU3, float(ds["alpha"][i]), 1.0, 3) for i in (0, 2)}
    for k, depth in enumerate(ds["depth"].values):
        for i in (0, 2):
            assert regimes[int(ds["code"][k, i])] == expected[int(depth), i], (depth, i)
    assert (out / "phase.png").is_file() and (out / "phase.pdf").is_file()


def test_exact_linf_sign_without_delta(tmp_path):
    """Without --delta, ℓ∞-SAM takes the exact sign (the Filippov flow). On a balanced start
    the coordinates decouple, dw_j/dτ = μ_j (w_j − ρ)^{L−1} (docs/theory.md §11): at L = 2,
    α < ρ collapses and α > ρ escapes with the largest μ_j ahead from the start (direct).
    Every cell is checked against this rule."""
    out = tmp_path / "out"
    args = ["phase", "--method", "linfsam", "--rho", "0.5,0.8", "--alpha", "0.2,0.6,0.7,1.5"]
    args += ["--mu", "1,2,3", "--out", str(out), "--quiet"]
    assert figures.main(args) == 0
    ds = xr.load_dataset(out / "phase.nc")
    assert "exact sign" in _phase_cli.title(ds)
    regimes = ds.attrs["regimes"].split()
    for i, alpha in enumerate(ds["alpha"].values):
        for j, rho in enumerate(ds["rho"].values):
            got = regimes[int(ds["code"][i, j])]
            assert got == ("collapse" if alpha < rho else "direct"), (alpha, rho)


def test_help_documents_ranges_methods_and_examples(capsys):
    with pytest.raises(SystemExit) as info:
        figures.main(["phase", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for needle in ("START:STOP:COUNT", "log-spaced", "--config", "lesam", "--rho-max", "examples:"):
        assert needle in text, needle


@pytest.fixture
def no_computing(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a command-line error must stop the run before any computing")

    monkeypatch.setattr(analysis, "phase_diagram", forbidden)
    monkeypatch.setattr(flows, "sweep", forbidden)


def _bad_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('method = "l2sam"\nrho = 1\nalpha = "0.1:1:4"\ndepth = "2:3"\nradius = 2\n')
    return ["--config", str(path)]


BASE = ["--alpha", "0.1:1:4", "--rho", "0.1:1:3"]
BAD = {
    "unknown method": (["--method", "sgd", *BASE], ["--method", "sgd"]),
    "parameter of another method": (
        ["--method", "l2sam", *BASE, "--sigma", "0.3"],
        ["--sigma does not belong to l2sam (its parameters: --rho)"],
    ),
    "missing parameter": (
        ["--method", "lesam", "--alpha", "0.1:1:4", "--sigma", "0.1:1:3"],
        ["--rho-max", "required"],
    ),
    "reversed range": (
        ["--method", "l2sam", "--alpha", "1:0.1:5", "--rho", "0.1:1:3"],
        ["--alpha", "reversed"],
    ),
    "empty range": (
        ["--method", "l2sam", "--alpha", "0.1:1:4", "--rho", "1:2:0"],
        ["--rho", "empty"],
    ),
    "range of logarithms": (
        ["--method", "l2sam", "--alpha", "-1:3:32", "--rho", "0.1:1:3"],
        ["--alpha", "'-1:3:32'", "not their logarithms"],
    ),
    "malformed range": (
        ["--method", "l2sam", "--alpha", "0.1:1", "--rho", "0.1:1:3"],
        ["--alpha", "START:STOP:COUNT"],
    ),
    "depth 0": (["--method", "l2sam", *BASE, "--depth", "0"], ["--depth", ">= 1"]),
    "depth range with 0": (
        ["--method", "l2sam", "--rho", "1", "--alpha", "0.1:1:3", "--depth", "0:3"],
        ["--depth", ">= 1"],
    ),
    "malformed mu": (["--method", "l2sam", *BASE, "--mu", "1,2,x"], ["--mu", "malformed"]),
    "mu without a unique largest": (
        ["--method", "l2sam", *BASE, "--mu", "1,5,5"],
        ["--mu", "unique largest"],
    ),
    "one swept axis": (
        ["--method", "l2sam", "--alpha", "0.1:1:4", "--rho", "1"],
        ["exactly two", "got 1: --alpha"],
    ),
    "three swept axes": (["--method", "l2sam", *BASE, "--depth", "2,3"], ["exactly two", "got 3"]),
    "no method": (BASE, ["--method", "required"]),
    "linfsam without rho": (
        ["--method", "linfsam", "--alpha", "0.1:1:4", "--depth", "2,3"],
        ["--rho", "required for linfsam"],
    ),
    "delta of another method": (
        ["--method", "l2sam", *BASE, "--delta", "1e-3"],
        ["--delta does not belong to l2sam (its parameters: --rho)"],
    ),
    "delta not a number": (
        ["--method", "linfsam", *BASE, "--delta", "x"],
        ["--delta: 'x' is not a number > 0"],
    ),
    "delta negative": (
        ["--method", "linfsam", *BASE, "--delta", "-1e-3"],
        ["--delta: '-1e-3' is not a number > 0"],
    ),
    "collapse-tol not a number": (
        ["--method", "l2sam", *BASE, "--collapse-tol", "x"],
        ["--collapse-tol", "invalid float value: 'x'"],
    ),
    "collapse-tol above 1": (
        ["--method", "l2sam", *BASE, "--collapse-tol", "1.5"],
        ["--collapse-tol: 1.5 is not in (0, 1)"],
    ),
    "unknown loss": (
        ["--method", "l2sam", *BASE, "--loss", "hinge"],
        ["--loss: 'hinge' is not logistic or exponential"],
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_flag(case, capsys, no_computing, tmp_path):
    args, needles = BAD[case]
    out = ["--out", str(tmp_path / "out")]
    one_line_error(capsys, lambda: figures.main(["phase", *args, *out]), *needles)
    assert not (tmp_path / "out").exists()


def test_toml_with_unknown_keys_is_an_error(capsys, no_computing, tmp_path):
    call = lambda: figures.main(["phase", *_bad_toml(tmp_path), "--out", str(tmp_path / "o")])  # noqa: E731
    one_line_error(capsys, call, "--config", "unknown key(s) radius")


def test_unreadable_toml_is_an_error(capsys, no_computing, tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("method = l2sam\n")  # a string without quotes
    call = lambda: figures.main(["phase", "--config", str(path), "--out", str(tmp_path)])  # noqa: E731
    one_line_error(capsys, call, "--config", "not valid TOML")


def test_bad_input_as_a_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "figures", "phase", "--method", "l2sam", "--rho", "1"]
        + ["--alpha", "1:0.1:5", "--depth", "2,3", "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--alpha" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", [["--collapse-tol", "2"], ["--delta", "0"]])
def test_bad_input_is_refused_under_python_O(tmp_path, flag):
    """The settings are checked with real errors, which ``python -O`` keeps (it drops asserts)."""
    proc = subprocess.run(
        [sys.executable, "-O", "-m", "figures", "phase", "--method", "linfsam", "--rho", "1"]
        + ["--alpha", "0.1:1:4", "--depth", "2,3", *flag, "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and flag[0] in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "integer", "expected"),
    [
        ("1e-3:10:5", False, [1e-3, 1e-2, 1e-1, 1.0, 10.0]),
        ("2:5", True, [2, 3, 4, 5]),
        ("0.5,2", False, [0.5, 2.0]),
        ("3", True, 3),
        ([1, 2, 4], True, [1, 2, 4]),
    ],
)
def test_parse_values(text, integer, expected):
    got = _phase_cli.parse_values(text, integer=integer)
    np.testing.assert_allclose(got, expected, rtol=1e-14)
    assert np.ndim(got) == np.ndim(expected)


@pytest.mark.parametrize(
    "settings, want",
    [
        (dict(method="gd"), flows.GD()),
        (dict(method="l2sam", rho=0.3), flows.L2SAM(0.3)),
        (dict(method="l2sam-layer", rho=0.3), flows.L2SAM(0.3, per_layer=True)),
        (dict(method="linfsam", rho=0.3), flows.LinfSAM(0.3)),  # delta: optional, exact sign
        (dict(method="linfsam", rho=0.3, delta=0.01), flows.LinfSAM(0.3, delta=0.01)),
        (dict(method="lesam", sigma=0.2, rho_max=0.5), flows.LESAM(0.2, 0.5)),
    ],
)
def test_each_method_name_gives_its_flows_template(settings, want, tmp_path):
    """The command's method names, with their parameters fixed (α and L the two axes), give
    the flows method written out by hand."""
    s = _phase_cli.DEFAULTS | dict(alpha="0.1:1:3", depth="2,3", out=str(tmp_path)) | settings
    got = _phase_cli.check_settings(s)["template"]
    assert type(got) is type(want)
    assert bool(eqx.tree_equal(got, want))


def test_documented_command_is_accepted_as_written(monkeypatch, tmp_path):
    """docs/phase-diagrams.md's command, word for word, up to the sweep (which is stopped here)."""
    page = (ROOT / "docs" / "phase-diagrams.md").read_text()
    line = next(s for s in page.splitlines() if s.startswith("python -m figures phase "))
    argv = shlex.split(line)[3:]
    seen = {}

    class Stop(Exception):
        pass

    def stop(cfg, **kwargs):
        seen.update(cfg)
        raise Stop

    monkeypatch.setattr(_phase_cli, "compute", stop)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Stop):
        figures.main(argv)
    assert seen["method"] == "l2sam" and seen["swept"] == ["alpha", "rho"]
    np.testing.assert_allclose(seen["values"]["alpha"], np.geomspace(1e-3, 10.0, 256), rtol=1e-15)
    np.testing.assert_allclose(seen["values"]["rho"], np.geomspace(0.01, 1.0, 64), rtol=1e-15)
    assert seen["values"]["depth"] == 3 and seen["mu"].tolist() == [1, 2, 3, 4, 5]
