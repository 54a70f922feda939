"""analysis._check: the report passes in full mode, every row builder gives FAIL on a wrong
prediction, a stalled solve is a FAIL, the CLI's JSON and its ``--quick``."""

import contextlib
import io
import json
import os

import numpy as np
import pytest

import flows
from analysis import _check, _reference
from analysis.__main__ import main as analysis_main
from analysis._boundary import Boundary
from analysis._bounds import l2sam_thresholds
from tests.test_cli import one_line_error

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
MU4 = [1.0, 2.0, 3.0, 4.0]
ALPHA4 = [0.3, 0.1, 0.06, 0.04]  # C2's start: 1 wins, 2 held at rho = 0.1, 3 and 4 die


def _main(*args, tmp):
    """``python -m analysis check *args --json`` in this process (``--jobs 1``: the solves stay
    compiled here for the tests below): (exit status, JSON, stdout)."""
    path = tmp / "check.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = analysis_main(["check", "--jobs", "1", *args, "--json", str(path)])
    return status, json.loads(path.read_text()), out.getvalue()


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The full report (``python -m analysis check``), once per module: the row builders'
    solves are then compiled for the FAIL tests below."""
    return _main(tmp=tmp_path_factory.mktemp("full"))


def _assert_all_pass(status, report, stdout, quick):
    rows = report["rows"]
    assert status == 0 and report["quick"] is quick
    assert {r["claim"] for r in rows} == {"C1", "C2", "C3", "C4", "L>=3", "regression"}
    for r in rows:
        assert set(r) == {"claim", "setting", "prediction", "measurement", "tolerance", "result"}
        assert r["result"] == "PASS", r
    assert len(stdout.strip().splitlines()) == len(rows) + 2  # header, rows, summary
    return rows


@pytest.mark.slow
def test_check_full_mode_passes(full):
    """Every full-mode row: C1's SAM rows, C2 fate/GD/α_c, C3 multi-example, C4 scale,
    sequences and plateau, the odd-L and depth-path rows, the regression rows."""
    rows = _assert_all_pass(*full, quick=False)
    assert len(rows) == 26
    text = {r["setting"]: r["measurement"] for r in rows}
    assert sum("reference" in m for s, m in text.items() if s.startswith("l2-SAM rho=1, L=")) == 2
    assert any("(= 3.0 x 1.0)" in s and "reduction" in m for s, m in text.items())


def test_check_quick_flag_reaches_the_checks(monkeypatch, tmp_path):
    """``--quick`` runs the checks with quick=True (its rows are full mode's, with looser
    tolerances: the test above runs them tighter)."""
    seen = []
    row = _check.Row("C0", "s", "p", "m", "t", "PASS")
    monkeypatch.setattr(
        _check, "run_checks", lambda quick, progress, jobs: seen.append(quick) or [row]
    )
    status, report, stdout = _main("--quick", tmp=tmp_path)
    assert (status, seen, report["quick"], len(stdout.strip().splitlines())) == (0, [True], True, 3)


def test_check_reports_progress_on_stderr(monkeypatch, capsys):
    """Each check's start and end is a line on stderr (stdout keeps the table alone)."""
    calls = []
    checks = (lambda q: calls.append(q) or [], lambda q: [])
    assert _check.run_checks(quick=True, progress=True, jobs=1, checks=checks) == []
    assert calls == [True]
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[0] for line in err] == ["[1/2]", "[1/2]", "[2/2]", "[2/2]"]
    assert err[1].endswith("s") and "done in" in err[1]


def _check_here(quick):
    return [_check.Row("A", str(os.getpid()), "", "", "", "PASS")]


def _check_there(quick):
    return [_check.Row("B", str(os.getpid()), "", "", "", "PASS")] * 2


def test_checks_side_by_side_keep_their_order():
    """``jobs=2``: each check in a process of its own, not this one; the rows in the order of
    ``checks`` whatever order they were computed in."""
    rows = _check.run_checks(jobs=2, checks=(_check_here, _check_there))
    assert [r.claim for r in rows] == ["A", "B", "B"]
    pids = {r.setting for r in rows}
    assert len(pids) == 2 and str(os.getpid()) not in pids


@pytest.mark.parametrize("jobs", [0, 1.0, True])
def test_bad_jobs_is_refused(jobs):
    with pytest.raises(ValueError, match="`jobs`"):
        _check.run_checks(jobs=jobs, checks=())


def test_cli_jobs_is_a_positive_integer(capsys):
    one_line_error(capsys, lambda: analysis_main(["check", "--jobs", "0"]), "--jobs")


# --- every row builder gives FAIL on a wrong prediction (after ``full``: compiled) ----------


def _fails(row):
    assert row.result == "FAIL" and not row.measurement.startswith("error"), row
    return row


def test_direction_row_fails_on_a_wrong_prediction(full):
    data = _check._separable_data()
    l1 = _check.max_margin(data, 1)  # C1 (L = 1) goes to the l2 max-margin, not to this
    _fails(_check._direction_rows("C1", flows.GD(), "GD", data, 1, 0.1, l1, None, 1e200, 1e-4))


def test_linf_limit_row_fails_on_a_wrong_prediction(full):
    _fails(_check._linf_limit_row(MU4, ALPHA4, 2, 0.1, 1e12, j_star=3))  # e_1 wins, not e_4


def test_linf_fate_row_fails_on_a_wrong_prediction(full):
    held = np.array([False, True, False, False])
    _fails(_check._linf_fate_row(MU4, ALPHA4, 0.1, dies=held, stays=held))  # 2 is held, lives


def test_gd_row_fails_on_a_wrong_prediction(full):
    _fails(_check._gd_row(MU4, ALPHA4, j=0))  # GD ends on argmax mu = 4, whatever the start


def test_linf_alpha_c_row_fails_on_a_wrong_prediction(full):
    _fails(_check._linf_alpha_c_row(MU4, 0.1, 1e-8, alpha_c=0.1 * (1 + 3e-3)))  # it is rho


def test_l1_single_row_fails_on_a_wrong_prediction(full):
    _fails(_check._l1_single_row(MU, 1.0, 0.5, ref=np.eye(5)[3]))  # e_5, not e_4


def test_alpha_c_row_fails_on_a_wrong_prediction(full):
    wrong = _reference.l2sam_alpha_c() * (1 + 1e-5)  # off by 5 times the tolerance 2e-6
    _fails(_check._alpha_c_row(MU, 1.0, 1e-6, reference=lambda: wrong))


def test_alpha_s_row_fails_on_a_wrong_prediction(full):
    wrong = l2sam_thresholds(MU, 1.0).direct * (1 + 1e-5)
    _fails(_check._alpha_s_row(MU, 1.0, 1e-6, predicted=wrong))


def test_regimes_row_fails_on_a_wrong_prediction(full):
    b = l2sam_thresholds(MU, 1.0)
    swapped = {"sequential": 0.99 * b.all_shrink, "collapse": 1.01 * b.all_grow}
    _fails(_check._regimes_row(MU, 1.0, swapped | {"direct": 1.01 * b.direct}))


def test_scale_row_fails_on_a_wrong_prediction(full):
    """Against the reduction's α_c at λρ = 3 (rays: 3 k_c) and the sympy α_s at 3: each wrong
    by 1e-5 (5 times the tolerance) is a FAIL (the full report has the right pair's PASS)."""
    k_c, k_s = _reference.l2sam_alpha_c(), l2sam_thresholds(MU, 1.0).direct
    found = {"c": k_c, "s": k_s}
    wrong_c = lambda: 3 * k_c * (1 + 1e-5)  # noqa: E731
    _fails(_check._scale_row(MU, 1.0, 3.0, 1e-6, found, alpha_c=wrong_c, alpha_s=3 * k_s))
    wrong_s = 3 * k_s * (1 + 1e-5)
    _fails(_check._scale_row(MU, 1.0, 3.0, 1e-6, found, alpha_c=lambda: 3 * k_c, alpha_s=wrong_s))


def test_sequence_row_fails_on_a_wrong_prediction(full):
    a_c = _reference.l2sam_alpha_c()
    seq, times = _reference.scalar_switches(MU, 2 * a_c, 1.0, 200.0)
    late = lambda: (seq, times * (1 + 1e-5))  # noqa: E731
    _fails(_check._sequence_row(MU, 1.0, 2 * a_c, a_c, reference=late))


def test_plateau_row_fails_on_a_wrong_prediction(full):
    wrong = lambda mu_j, rho: float(np.log1p(np.exp(-mu_j * rho**2)))  # beta_j = rho^2  # noqa: E731
    _fails(_check._plateau_row(MU, 1.0, _reference.l2sam_alpha_c() * (1 + 1e-6), height=wrong))


def test_odd_depth_row_fails_where_weights_decrease(full):
    """The odd-L claim (no α_c: no weight ever decreases) made at L = 2, where it is wrong."""
    row = _fails(_check._odd_depth_row(MU, 1.0, 2))
    assert "exists=True" in row.measurement and "collapsed" in row.measurement


def test_odd_depth_row_fails_on_a_failed_search(full, monkeypatch):
    """exists=False from a search that classified nothing is not the reason: a FAIL."""
    failed = Boundary(float("nan"), (float("nan"), float("nan")), 0, 0, False)
    monkeypatch.setattr(_check, "critical_alpha", lambda *args, **kwargs: failed)
    row = _fails(_check._odd_depth_row(MU, 1.0, 3))
    assert "exists=False" in row.measurement and "(0 solves)" in row.measurement


def test_path_rows_against_the_tests_reference(full):
    """The L = 3, 4 path rows against analysis._reference.l2sam_switches (scipy on the
    reduced flow, written apart from analysis._check): PASS; its times 1e-5 late: FAIL."""
    for depth in (3, 4):
        seq, times = _reference.l2sam_switches(MU, 0.5, 1.0, depth)
        row = _check._path_row(MU, 1.0, 0.5, depth, reference=lambda s=seq, t=times: (s, t))
        assert row.result == "PASS", row
        late = lambda s=seq, t=times: (s, t * (1 + 1e-5))  # noqa: E731
        _fails(_check._path_row(MU, 1.0, 0.5, depth, reference=late))


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
