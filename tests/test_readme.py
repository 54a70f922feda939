"""The README's quick start runs, its commands match CI, and the code is ruff-clean."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_quickstart_runs_and_prints_what_it_claims(capsys):
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    exec(compile(code, "README-quickstart", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("escaped")


def test_ci_runs_exactly_the_readme_test_command():
    block = re.search(r"Install and run the tests:\n\n```bash\n(.*?)\n```", README, re.S).group(1)
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert block.strip() in [line.strip() for line in ci_lines]


def test_ruff_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_backends_example_runs_on_the_quickstart_problem(capsys):
    """The Backends example: one engine trajectory per ρ, each equal to its own solve."""
    quick = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S).group(1)
    code = re.search(r"## Backends\n.*?```python\n(.*?)```", README, re.S).group(1)
    scope = {}
    exec(compile(quick + code, "README-backends", "exec"), scope)
    capsys.readouterr()
    many, flows = scope["many"], scope["flows"]
    assert many.t_end.shape == (1000,)
    one = flows.solve(flows.L2SAM(scope["rho"][500]), scope["data"], scope["theta0"], t1=30.0,
                      rescaled=True, backend="diffrax")  # fmt: skip
    assert many.status_name[500] == one.status_name
    assert abs(float(many.t_end[500]) - float(one.t_end)) <= 1e-9 * float(one.t_end)
