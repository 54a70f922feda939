"""analysis._check: the report's rows can fail, a stalled solve is a FAIL, the CLI's JSON."""

import json
import subprocess
import sys

import flows
from analysis import _check


def test_check_cli_quick_json(tmp_path):
    path = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "analysis", "check", "--quick", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(path.read_text())["rows"]
    assert {r["claim"] for r in rows} == {"C1", "C2", "C3", "C4", "L>=3"}
    for r in rows:
        assert set(r) == {"claim", "setting", "prediction", "measurement", "tolerance", "result"}
        assert r["result"] == "PASS", r
    assert len(proc.stdout.strip().splitlines()) == len(rows) + 2  # header, rows, summary


def test_a_stalled_solve_or_an_error_is_a_fail():
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(0.5, 2, 2)

    def stalled():
        traj = flows.solve(flows.GD(), data, theta0, t1=10.0, rescaled=True, max_steps=2)
        return "never reached", bool(_check._finished(traj))

    row = _check._row("C0", "setting", "prediction", "tol", stalled)
    assert row.result == "FAIL" and "max_steps" in row.measurement
    row = _check._row("C0", "s", "p", "t", lambda: 1 / 0)
    assert row.result == "FAIL" and "ZeroDivisionError" in row.measurement
    assert _check.failed([row])


def test_blowup_row_fails_on_a_wrong_prediction():
    # The closed-form row must be able to fail: a wrong shift (ρ where GD has none) is caught.
    good = _check._blowup_row(flows.GD(), "GD", [1.0, 2.0], 0.5, 3, 0.0)
    bad = _check._blowup_row(flows.GD(), "GD", [1.0, 2.0], 0.5, 3, 0.1)
    assert good.result == "PASS" and bad.result == "FAIL"
