r"""The sparsity figure (figures/_regression.py): its published data hold the reference code's
printed test losses, and each statement of its gallery caption holds.

Independent sources: the test losses printed in the reference code's notebook
(tml-epfl/understanding-sam, ``diagonal_linear_nets/diag_nets_sam.ipynb``, after 10**4 + 1
updates at η = 5/d), the ground truth that generated the data (docs/theory.md §18), and plain
NumPy on the saved arrays.
"""

import numpy as np
import pytest

from tests.helpers import gallery_caption, published_data

L1, SUPPORT, DISTANCE, TEST_LOSS = range(4)


@pytest.fixture(scope="module")
def data():
    return published_data("sparsity")


def _row(data, key, rho):
    return data[key][list(np.round(data["rho"], 12)).index(rho)]


# The notebook's printed numbers: GD and n_SAM_GD from u0 = 0.1, GD and one_SAM_GD from u0 = 0.02.
PRINTED = [
    ("GD/discrete/0.1", None, 0.015056044189449159),
    ("USAM/discrete/0.1", 0.01, 0.015143589149560101),
    ("USAM/discrete/0.1", 0.03, 0.01532189739609112),
    ("USAM/discrete/0.1", 0.1, 0.01598195225147282),
    ("USAM/discrete/0.1", 0.3, 0.018241642036376265),
    ("GD/discrete/0.02", None, 0.0006337885714222886),
    ("1-SAM/discrete/0.02", 0.01, 0.0004663830742908966),
    ("1-SAM/discrete/0.02", 0.03, 0.00023853572282255735),
    ("1-SAM/discrete/0.02", 0.1, 1.5396958089444108e-05),
    ("1-SAM/discrete/0.02", 0.3, 0.024183218285324055),
]


@pytest.mark.parametrize("key, rho, printed", PRINTED)
def test_discrete_runs_give_the_reference_codes_printed_test_losses(data, key, rho, printed):
    assert int(data["steps"]) == 10**4 + 1 and float(data["lr"]) == pytest.approx(5 / 30)
    got = data[key][TEST_LOSS] if rho is None else _row(data, key, rho)[TEST_LOSS]
    assert abs(got - printed) <= 1e-10


def test_caption_statements_hold(data):
    caption = gallery_caption("sparsity")
    truth = data["truth"]
    stated = [(data["GD/discrete/0.1"], "{:.5f} for GD at α = 0.1"),
              (_row(data, "USAM/discrete/0.1", 0.3), "{:.5f} for unnormalised SAM at ρ = 0.3"),
              (_row(data, "1-SAM/discrete/0.02", 0.1), "{:.3e} for 1-SAM at α = 0.02")]  # fmt: skip
    for values, text in stated:
        assert text.format(values[TEST_LOSS]) in caption, text
    # the minimum-ℓ1 interpolator is the ground truth: ‖β*‖₁ = 1.499, 3 non-zero coordinates
    assert np.count_nonzero(truth) == 3 and "3 coordinates above 1e-3" in caption
    np.testing.assert_allclose(data["min_l1"][[L1, DISTANCE]], [np.sum(np.abs(truth)), 0],
                               atol=1e-10)  # fmt: skip
    assert f"‖β‖₁ = {np.sum(np.abs(truth)):.3f}" in caption
    one, gd = _row(data, "1-SAM/flow/0.1", 0.3), data["GD/flow/0.1"]
    assert f"‖β‖₁ = {one[L1]:.4f}, {int(one[SUPPORT])} such coordinates" in caption
    assert int(one[SUPPORT]) == 3 and f"test loss {one[TEST_LOSS]:.0e}" in caption
    assert int(gd[SUPPORT]) == 30 and f"has 30 and {gd[TEST_LOSS]:.4f}" in caption
    for alpha in ("0.1", "0.02"):
        for kind in ("flow", "discrete"):
            usam = data[f"USAM/{kind}/{alpha}"]
            assert np.all(np.diff(usam[:, L1]) > 0) and np.all(np.diff(usam[:, TEST_LOSS]) > 0)
            one = data[f"1-SAM/{kind}/{alpha}"]
            assert np.all(one[:, L1] < data[f"GD/{kind}/{alpha}"][L1])
        flow, limit = data[f"GD/flow/{alpha}"], data[f"gd_limit/{alpha}"]
        assert abs(flow[L1] / limit[L1] - 1) < 2e-4
    assert "within 0.02 % of the limit's at both α" in caption
    flow, limit = data["GD/flow/0.02"], data["gd_limit/0.02"]
    assert f"{flow[TEST_LOSS]:.2e} against the limit's {limit[TEST_LOSS]:.2e}" in caption
    stuck = _row(data, "1-SAM/discrete/0.02", 0.3)
    assert f"loss {stuck[TEST_LOSS]:.4f}, off the flow" in caption
    assert _row(data, "1-SAM/flow/0.02", 0.3)[TEST_LOSS] < 1e-3 * stuck[TEST_LOSS]
