"""analysis/_reference.py: the reduced-ODE references, against closed forms, against each other
(two independent formulations of the same flow), and independent of the code they check."""

import ast
import inspect

import numpy as np
import pytest

from analysis import _reference

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


def test_imports_nothing_of_the_package():
    """Its value is independence: it imports neither flows nor analysis (only numpy, scipy and
    the standard library)."""
    tree = ast.parse(inspect.getsource(_reference))
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    names |= {
        (n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }
    assert names <= {"functools", "numpy", "scipy"}, names
    assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))


def test_argmax_changes_of_crossing_lines():
    """v(t) = (t, 1 − t, 0.9) on samples that straddle both crossings: closed-form times."""
    value = lambda t: np.array([t, 1 - t, np.full_like(t, 0.9)])  # noqa: E731
    seq, times = _reference.argmax_changes(value, np.linspace(0.0, 1.0, 11) + 0.05, 1e-15)
    # 1 − t leads until 0.1 (where 0.9 takes over), 0.9 until t = 0.9, then t
    assert seq == [1, 2, 0]
    np.testing.assert_allclose(times, [0.1, 0.9], rtol=1e-14)


def test_two_formulations_of_l2sam_at_depth_two_agree():
    """At L = 2 the scalar reduction (one ODE in T, docs/theory.md §9) and the flow in w
    (d ODEs, §8) are the same flow: the same j† path, switch times to 1e-9."""
    seq_t, times_t = _reference.scalar_switches(MU, 0.4, 1.0, 30.0)
    seq_w, times_w = _reference.l2sam_switches(MU, 0.4, 1.0, 2, w_max=1e6)
    assert seq_t == seq_w == [1, 2, 3, 4]  # μ_2 leads first, then each larger μ in turn
    np.testing.assert_allclose(times_t, times_w, rtol=1e-9)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_linf_escape_times_closed_form(depth):
    """dw/dτ = μ(w − ρ)^{L−1}: w − ρ = (α − ρ)e^{μτ} at L = 2, and
    (w − ρ)^{-(L−2)} = (α − ρ)^{-(L−2)} − (L − 2)μτ above; a start below ρ dies (inf)."""
    mu, alpha, rho, w_max = np.array([1.0, 3.0, 2.0]), np.array([0.5, 0.3, 0.05]), 0.1, 1e5
    got = _reference.linf_escape_times(mu, alpha, rho, depth, w_max=w_max)
    z0, z1 = alpha[:2] - rho, w_max - rho
    if depth == 2:
        want = np.log(z1 / z0) / mu[:2]
    else:
        p = depth - 2
        want = (z0**-p - z1**-p) / (p * mu[:2])
    np.testing.assert_allclose(got[:2], want, rtol=1e-9)
    assert got[2] == np.inf
