r"""The LE-SAM figure (figures/_lesam.py): its quick data agree with :mod:`analysis` at points next
to the regime boundaries, and each statement of its README caption holds.

Independent sources: ℓ2-SAM(ρ_max) classified on its own (the large-σ limit of LE-SAM, science.md
§5: the cap binds wherever ‖∇L‖ < σ/ρ_max), the exact α_direct of analysis.l2sam_thresholds
(sympy), and the small-σ scaling of the uncapped flow: with ℓ' ≈ -1/2 (margins ≪ 1) the rescaled
flow dw/dτ = μ⊙ŵ, ŵ = w − σ μ⊙w / (2|ℓ'| ‖μ⊙w‖²), is invariant under (w, σ) → (λw, λ²σ), so the
collapse boundary obeys α_c ∝ √σ as σ → 0.
"""

import numpy as np
import pytest

import analysis
import flows
from figures import _lesam
from tests.helpers import quick_data

MU = _lesam.MU
REGIMES = analysis.REGIMES


@pytest.fixture(scope="module")
def quick(quick_figures):
    """``python -m figures --quick`` (made once): the LE-SAM figure's files and saved data."""
    out, _ = quick_figures
    return [out / "lesam.pdf", out / "lesam.png"], quick_data(quick_figures, ["lesam"])["lesam"]


def _regime(method, alpha):
    return analysis.regime(method, MU, float(alpha), collapse_tol=_lesam.COLLAPSE_TOL)


def test_writes_pdf_and_png(quick):
    paths, _ = quick
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_map_is_at_the_public_defaults(quick):
    _, data = quick
    assert float(data["rho_max"]) == 0.3 and float(data["sigma_default"]) == 0.35
    assert not np.any(data["regime"] == REGIMES.index("undetermined"))
    assert float(data["l2_direct"]) == pytest.approx(analysis.l2sam_thresholds(MU, 0.3).direct)


def test_large_sigma_columns_are_l2sam_at_rho_max(quick):
    """Caption: for σ ≳ 0.22 the map's regimes are ℓ2-SAM(ρ_max)'s, cell by cell."""
    _, data = quick
    alpha_c = 0.3 * 0.34726881  # README table, k_c = α_c/ρ at L = 2 (scale invariance)
    alpha_d = analysis.l2sam_thresholds(MU, 0.3).direct  # exact
    a = data["alpha"]
    l2 = np.where(a < alpha_c, 0, np.where(a < alpha_d, 1, 2))
    cols = data["sigma"] >= 0.22
    assert cols.sum() >= 3
    assert np.array_equal(data["regime"][:, cols], np.repeat(l2[:, None], cols.sum(), axis=1))


def test_map_cells_next_to_each_boundary_agree_with_analysis(quick):
    """Both cells of every α-adjacent pair with different regimes, in three σ columns."""
    _, data = quick
    code, alphas, sigmas = data["regime"], data["alpha"], data["sigma"]  # code: (alpha, sigma)
    checked = 0
    for j in (0, code.shape[1] // 2, code.shape[1] - 1):
        for i in np.flatnonzero(code[1:, j] != code[:-1, j]):
            for k in (i, i + 1):
                got = _regime(flows.LESAM(float(sigmas[j]), 0.3), alphas[k])
                assert got == REGIMES[code[k, j]], (alphas[k], sigmas[j])
                checked += 1
    assert checked >= 8  # collapse|sequential and sequential|direct in each column, or so


def test_public_default_regimes_are_l2sam_at_rho_max():
    """Caption: at σ = 0.35 the boundaries are ℓ2-SAM(ρ_max)'s (1% either side of each)."""
    alpha_c = 0.3 * 0.34726881  # README table, k_c = α_c/ρ at L = 2 (scale invariance)
    alpha_d = analysis.l2sam_thresholds(MU, 0.3).direct  # exact
    cases = {0.99 * alpha_c: "collapse", 1.01 * alpha_c: "sequential"}
    cases.update({0.99 * alpha_d: "sequential", 1.01 * alpha_d: "direct"})
    for a, want in cases.items():
        assert _regime(flows.L2SAM(0.3), a) == want
        assert _regime(flows.LESAM(0.35, 0.3), a) == want


def test_small_sigma_keeps_a_sequential_band_minor_first():
    """Caption: for small σ both boundaries follow √σ, with a sequential band between
    α ≈ 0.275√σ and 0.41√σ; inside it j† starts on a minor index and ends on argmax μ."""
    sigma = 1e-3
    for k, want in ((0.26, "collapse"), (0.34, "sequential"), (0.42, "direct")):
        assert _regime(flows.LESAM(sigma, 0.3), k * np.sqrt(sigma)) == want
    path = analysis.regime_path(
        flows.LESAM(sigma, 0.3), MU, 0.34 * np.sqrt(sigma), collapse_tol=_lesam.COLLAPSE_TOL
    )
    assert path.sequence[0] < MU.size - 1 and path.sequence[-1] == MU.size - 1


def test_collapse_boundary_scales_as_root_sigma():
    """σ_c(2α) / σ_c(α) → 4 as σ → 0 (the (w, σ) → (λw, λ²σ) invariance), along σ as drawn."""
    s1, s2 = (_lesam._sigma_boundary(a, "collapse") for a in (0.01, 0.02))
    assert s2 / s1 == pytest.approx(4.0, rel=0.01)
    assert 0.01 / np.sqrt(s1) == pytest.approx(0.275, rel=0.01)  # the caption's constants
    assert 0.015 / np.sqrt(_lesam._sigma_boundary(0.015, "direct")) == pytest.approx(0.41, rel=0.02)


def _at_loss(data, name, key, level):
    """Log-log interpolation of ``key`` at the last crossing of the loss ``level``."""
    loss, values = data[f"loss/{name}"], data[f"{key}/{name}"]
    i = np.flatnonzero(loss >= level)[-1]
    f = np.log(level / loss[i]) / np.log(loss[i + 1] / loss[i])
    return float(np.exp(np.log(values[i]) + f * np.log(values[i + 1] / values[i])))


def test_sharpness_caption_numbers(quick):
    """Caption: at loss 1e-3, tr H ≈ 0.26 (GD), 0.15 (LE-SAM), 0.099 (ℓ2-SAM), λ_max likewise
    ordered; LE-SAM is flatter than GD but not than ℓ2-SAM(ρ_max)."""
    _, data = quick
    trace = {n: _at_loss(data, n, "trace", 1e-3) for n in _lesam.SHARP_METHODS}
    top = {n: _at_loss(data, n, "top", 1e-3) for n in _lesam.SHARP_METHODS}
    assert trace == pytest.approx({"GD": 0.256, "LE-SAM": 0.150, "ℓ2-SAM": 0.0993}, rel=0.03)
    assert top == pytest.approx({"GD": 0.227, "LE-SAM": 0.126, "ℓ2-SAM": 0.0854}, rel=0.03)
    for level in (1e-2, 1e-4, 1e-6):
        for key in ("trace", "top"):
            gd, le, l2 = (_at_loss(data, n, key, level) for n in ("GD", "LE-SAM", "ℓ2-SAM"))
            assert gd > le > l2, (level, key)


def test_lesam_cap_binds_after_the_start(quick):
    """Caption: ‖∇L‖ starts above σ/ρ_max (the loss-equated branch is active) and stays below
    it once the loss is under about 0.2: LE-SAM is then ℓ2-SAM(ρ_max) from a different state."""
    _, data = quick
    g, loss = data["grad_norm/LE-SAM"], data["loss/LE-SAM"]
    below = g < 0.35 / 0.3
    assert not below[0]
    first = int(np.argmax(below))
    assert below[first:].all()
    assert 0.17 < loss[first] < 0.22
