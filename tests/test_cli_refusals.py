"""Command lines refuse what they cannot honour in one stderr line (exit 2), before computing,
and end on Ctrl-C with one line and exit status 130 (128 + SIGINT)."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import analysis
import figures
import flows
from figures import _registry
from figures._common import Context, load_data, save_data
from samflows_cli import run_command
from tests.test_cli import one_line_error


def _forbidden(*args, **kwargs):
    raise AssertionError("a command-line error must stop the run before any computing")


@pytest.fixture
def no_computing(monkeypatch):
    for owner, name in ((analysis, "phase_diagram"), (flows, "sweep"), (_registry, "make")):
        monkeypatch.setattr(owner, name, _forbidden)


PHASE = ["phase", "--method", "l2sam", "--alpha", "0.1:1:3", "--rho", "0.1:1:3"]


def test_grids_too_large_to_allocate(capsys, no_computing, tmp_path):
    out = ["--out", str(tmp_path / "o")]
    huge_axis = ["phase", "--method", "l2sam", "--rho", "1", "--alpha", "1e-3:10:10000000"]
    one_line_error(capsys, lambda: figures.main([*huge_axis, "--depth", "2,3", *out]), "--alpha")
    square = ["phase", "--method", "l2sam", "--alpha", "1e-3:10:4096", "--rho", "0.01:1:4096"]
    line = one_line_error(capsys, lambda: figures.main([*square, *out]), "4096 x 4096")
    assert str(4096 * 4096) in line
    depth = ["phase", "--method", "l2sam", "--rho", "1", "--alpha", "0.1:1:3"]
    one_line_error(capsys, lambda: figures.main([*depth, "--depth", "1:10000000", *out]), "--depth")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "toml, key",
    [
        ("out = 5", "out"),
        ("cache = false", "cache"),
        ('method = ["l2sam"]', "method"),
        ("method = {a = 1}", "method"),
        ('width = ["column"]', "width"),
        ("collapse_tol = true", "collapse_tol"),
        ("alpha = [0.1, true]", "alpha"),
        ("depth = 2.5", "depth"),
    ],
)
def test_config_values_of_the_wrong_type(capsys, no_computing, tmp_path, toml, key):
    path = tmp_path / "c.toml"
    path.write_text(toml + "\n")
    call = lambda: figures.main([*PHASE, "--config", str(path), "--out", str(tmp_path / "o")])  # noqa: E731
    one_line_error(capsys, call, "--config", f"`{key}`")


def test_binary_config_empty_out_and_outputs_that_are_folders(capsys, no_computing, tmp_path):
    binary = tmp_path / "c.toml"
    binary.write_bytes(bytes(range(256)))
    out = ["--out", str(tmp_path / "o")]
    one_line_error(
        capsys, lambda: figures.main([*PHASE, "--config", str(binary), *out]), "not valid TOML"
    )
    one_line_error(capsys, lambda: figures.main([*PHASE, "--out="]), "--out must name a folder")
    one_line_error(capsys, lambda: figures.main(["--out=", "--redraw"]), "--out must name a folder")
    for name in ("phase.nc", "phase.png"):
        (tmp_path / name / "x").mkdir(parents=True)
        one_line_error(
            capsys, lambda: figures.main([*PHASE, "--out", str(tmp_path)]), name, "is a folder"
        )
        (tmp_path / name / "x").rmdir()
        (tmp_path / name).rmdir()


def _damage(npz, how):
    if how == "garbage":
        npz.write_bytes(b"not a zip file at all")
    elif how == "truncated":
        npz.write_bytes(npz.read_bytes()[:40])
    else:  # the right format, other arrays
        with open(npz, "wb") as fh:
            np.savez(fh, other=np.ones(2))


@pytest.mark.parametrize("how", ["garbage", "truncated", "wrong keys"])
def test_damaged_figure_data_is_refused(capsys, no_computing, tmp_path, how):
    ctx = Context(out=tmp_path / "out", cache=tmp_path / "cache", quick=False)
    data = {"eta": np.array([2.0**-9, 2.0**-8]), "slope": np.array(0.373)}
    npz = save_data(ctx, "discrete", data, 1.0)
    loaded = load_data(ctx, "discrete")
    assert set(loaded) == set(data) and np.array_equal(loaded["eta"], data["eta"])
    _damage(npz, how)
    args = ["--redraw", "discrete", "--cache", str(ctx.cache), "--out", str(ctx.out)]
    one_line_error(capsys, lambda: figures.main(args), "--redraw", "discrete", "damaged")


def test_ctrl_c_is_one_line_and_status_130(capsys, tmp_path):
    def interrupted(argv):
        raise KeyboardInterrupt

    assert run_command("python -m tool", interrupted) == 130
    assert capsys.readouterr().err == "python -m tool: interrupted\n"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a figure's computation takes seconds after its first line: interrupted inside it
    cmd = [sys.executable, "-m", "figures", "regime_map", "--quick"]
    cmd += ["--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")]
    # as from a terminal: a test worker may run with SIGINT ignored, which a child inherits
    # (and Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert proc.stdout.readline().startswith("[regime_map] computing")  # inside main
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    # progress bars share stderr; the interruption itself is one line, without a traceback
    assert err.splitlines()[-1] == "python -m figures: interrupted", err
    assert "Traceback" not in err and err.count("interrupted") == 1, err
