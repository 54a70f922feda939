"""Command lines (issue 15): a user error is one line on stderr and exit status 2, with no
traceback, before anything is computed."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import figures
import flows
from analysis import _check
from analysis.__main__ import main as analysis_main
from figures import _registry
from flows.__main__ import main as flows_main
from samflows_cli import ArgumentParser


def one_line_error(capsys, call, *needles):
    """Run ``call()``; it must exit 2 with exactly one stderr line containing ``needles``."""
    with pytest.raises(SystemExit) as info:
        call()
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def no_computing(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a command-line error must stop the run before any computing")

    for name in ("solve", "iterate", "sweep"):
        monkeypatch.setattr(flows, name, forbidden)
    monkeypatch.setattr(_check, "run_checks", forbidden)
    monkeypatch.setattr(_registry, "make", forbidden)


def test_flows_demo_refuses_unknown_flags(capsys, no_computing):
    one_line_error(capsys, lambda: flows_main(["--bogus-flag"]), "python -m flows", "--bogus-flag")


def test_flows_demo_bogus_flag_as_a_process():
    """The real entry point: one stderr line, exit 2, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "flows", "--bogus-flag"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--bogus-flag" in lines[0], proc.stderr


def test_analysis_check_refuses_json_in_a_missing_folder(capsys, no_computing, tmp_path):
    path = tmp_path / "missing" / "check.json"
    one_line_error(capsys, lambda: analysis_main(["check", "--json", str(path)]), "--json")
    assert not (tmp_path / "missing").exists()


def test_analysis_check_refuses_json_that_is_a_folder(capsys, no_computing, tmp_path):
    one_line_error(capsys, lambda: analysis_main(["check", "--json", str(tmp_path)]), "--json")


def test_analysis_check_refuses_unknown_flags(capsys, no_computing):
    one_line_error(capsys, lambda: analysis_main(["check", "--bogus"]), "--bogus")
    one_line_error(capsys, lambda: analysis_main(["bogus"]), "bogus")


def test_figures_redraw_from_an_empty_cache(capsys, no_computing, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["--redraw", "regime_map", "--cache", str(empty), "--out", str(tmp_path / "o")]
    one_line_error(capsys, lambda: figures.main(args), "--redraw", "regime_map")
    assert not (tmp_path / "o").exists()  # nothing written either


@pytest.mark.parametrize("option", ["--out", "--cache"])
def test_figures_folder_options_that_are_files(capsys, no_computing, tmp_path, option):
    afile = tmp_path / "afile"
    afile.write_text("x")
    one_line_error(capsys, lambda: figures.main([option, str(afile), "--quick"]), option, "file")
    other = "--cache" if option == "--out" else "--out"
    # a folder below a file cannot be created
    args = [option, str(afile / "sub"), other, str(tmp_path / "ok"), "--quick"]
    one_line_error(capsys, lambda: figures.main(args), option, "cannot create")


def test_figures_refuses_unknown_figures_and_flags(capsys, no_computing):
    one_line_error(capsys, lambda: figures.main(["no_such_figure"]), "no_such_figure")
    one_line_error(capsys, lambda: figures.main(["--bogus"]), "--bogus")


def test_figures_make_checks_paths_before_computing(no_computing, tmp_path):
    """The library entry point raises the same errors as ValueError."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="--out"):
        _registry.check_paths(None, out=afile, cache=tmp_path / "c")


# ``--help`` through the real entry points (runpy, as ``python -m`` runs them), then the heavy
# packages this process holds.
HELP_CHILD = textwrap.dedent(
    """
    import json, runpy, sys
    for argv in (["figures", "--help"], ["figures", "phase", "--help"], ["analysis", "--help"],
                 ["analysis", "check", "--help"], ["figures", "--bogus"]):
        sys.argv = list(argv)
        try:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            assert stop.code == (2 if argv[-1] == "--bogus" else 0), (argv, stop.code)
    heavy = ("jax", "flows", "matplotlib", "equinox", "figures._registry", "analysis._check")
    print(json.dumps(sorted(name for name in heavy if name in sys.modules)))
    """
)


def test_help_and_bad_flags_load_no_jax():
    """``python -m figures --help`` (and ``phase``, ``analysis``, a bad flag) answers without
    importing JAX, flows or matplotlib: the parsers are built first, the rest imported after."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run(
        [sys.executable, "-c", HELP_CHILD], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_a_value_may_start_with_a_minus_sign(capsys):
    """``--alpha -1:3:32`` is the flag's value (argparse alone reads it as an unknown flag); a
    value that does not read as a number needs ``--flag=VALUE``, and the error says so."""
    parser = ArgumentParser(prog="tool")
    parser.add_argument("--alpha")
    parser.add_argument("--out")
    args = parser.parse_args(["--alpha", "-1:3:32", "--out", "-.5,2"])
    assert (args.alpha, args.out) == ("-1:3:32", "-.5,2")
    assert parser.parse_args(["--alpha", "-1e-3"]).alpha == "-1e-3"
    assert parser.parse_args(["--out=-x"]).out == "-x"
    one_line_error(capsys, lambda: parser.parse_args(["--out", "-x"]), "written --out=VALUE")
    line = one_line_error(capsys, lambda: parser.parse_args(["--out"]), "expected one argument")
    assert "VALUE" not in line  # a value left out is not one that starts with '-'
