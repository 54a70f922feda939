"""analysis._limits: the flow's end over per-coordinate starts, against independent reductions.

Exact ℓ∞-SAM from starts balanced across layers decouples (docs/theory.md §11): each coordinate
follows dw/dτ = μ_j (w − ρ)^{L−1}, so the limit is the first coordinate to blow up. The expected
values come from scipy on those scalar ODEs (tests/helpers.py), from the closed forms below
ρ (L odd: w ↑ ρ, stalled; L even: w reaches 0, collapse) and of the tie curve, and for ℓ2-SAM
from the q-order and the reduced flow in w (tests.helpers.l2sam_limit), never from the code.
"""

import numpy as np
import pytest

import analysis
import flows
from analysis import _reference
from tests.helpers import l2sam_limit

RHO, MU = 1.0, np.array([1.0, 2.0])


def _expected(a1, a2, depth):
    """The reduced computation's verdict: regime name and limit index (or -1)."""
    times = _reference.linf_escape_times(MU, [a1, a2], RHO, depth)
    if np.all(np.isinf(times)):
        return ("stalled" if depth % 2 else "collapse"), -1
    k = int(np.argmin(times))
    return ("minor" if k == 0 else "major"), k


@pytest.mark.parametrize("depth", [3, 4])
def test_limit_map_near_the_tie_curve_and_the_rho_lines(depth):
    """Points 1% off the tie curve μ_1(α_1−ρ)^{L−2} = μ_2(α_2−ρ)^{L−2} on both sides, and 1% off
    the lines α_j = ρ on both sides."""
    m = flows.LinfSAM(RHO)
    a1 = np.array([0.99, 1.01, 2.0])
    # the tie curve through α_1 = 2, in closed form: α_2 = ρ + (μ_1/μ_2)^{1/(L−2)} (α_1 − ρ)
    tie = RHO + (MU[0] / MU[1]) ** (1 / (depth - 2)) * (2.0 - RHO)
    a2 = np.array([0.5, 0.99, 1.01, RHO + 0.99 * (tie - RHO), RHO + 1.01 * (tie - RHO)])
    out = analysis.limit_map(m, MU, (a1, a2), depth=depth, progress=False)
    assert out.code.shape == (3, 5) and [a.tolist() for a in out.alphas] == [
        a1.tolist(),
        a2.tolist(),
    ]
    names = np.array(analysis.REGIMES)[out.code]
    for i, x in enumerate(a1):
        for j, y in enumerate(a2):
            regime, k = _expected(x, y, depth)
            got = "major" if names[i, j] in ("direct", "sequential") else names[i, j]
            assert (got, int(out.leader[i, j])) == (regime, k), (x, y)
    # the two points beside the tie curve at α_1 = 2 fall on either side of it
    assert out.leader[2, 3] == 0 and out.leader[2, 4] == 1


def test_limit_map_l2_minor_survives_by_sliding():
    # L = 2 (docs/theory.md §11): w_j = ρ + (α_j − ρ) e^{μ_j τ}; only α_1 > ρ grows, so e_1 wins
    # while w_2 dies and slides at 0; with both above ρ the faster (major) one wins.
    out = analysis.limit_map(flows.LinfSAM(RHO), MU, ([0.5, 1.5], [0.5, 1.2]), progress=False)
    names = np.array(analysis.REGIMES)[out.code]
    assert names.tolist() == [["collapse", "direct"], ["minor", "sequential"]]
    assert out.leader.tolist() == [[-1, 1], [0, 1]]


def test_limit_map_l2sam_against_the_q_order_and_the_reduced_flow():
    # Another method through the same run: ℓ2-SAM at L = 3 (odd: every start above ρ/√3
    # escapes). The grid holds all three escape regimes: direct (e.g. α = (0.2, 0.3)),
    # sequential (α = (0.3, 0.2), (0.5, 0.3)) and minor (α = (0.5, 0.2): q = μα = (0.5, 0.4)).
    a1, a2 = [0.2, 0.3, 0.5], [0.2, 0.3]
    out = analysis.limit_map(flows.L2SAM(0.1), MU, (a1, a2), depth=3, progress=False)
    names = np.array(analysis.REGIMES)[out.code]
    got = [[(names[i, j], int(out.leader[i, j])) for j in range(2)] for i in range(3)]
    want = [[l2sam_limit(MU, [x, y], 0.1, 3) for y in a2] for x in a1]
    assert got == want
    assert {name for row in want for name, _ in row} == {"direct", "sequential", "minor"}


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(alphas=([1.0, 2.0],)), "alphas"),
        (dict(alphas=np.ones((2, 3))), "alphas"),
        (dict(alphas=([1.0], [-1.0])), "alphas"),
        (dict(mu=[1.0, 1.0]), "mu"),
        (dict(depth=0), "depth"),
        (dict(max_passes=0), "max_passes"),
        (dict(method="sam"), "method"),
    ],
)
def test_limit_map_bad_input(kwargs, name):
    args = {**dict(method=flows.LinfSAM(1.0), mu=MU, alphas=([2.0], [0.5])), **kwargs}
    with pytest.raises(ValueError, match=name):
        analysis.limit_map(**args, progress=False)
