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
