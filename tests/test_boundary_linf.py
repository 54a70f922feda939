"""``analysis.critical_alpha`` of exact ℓ∞-SAM: α_c = ρ at every depth (claim C2)."""

import pytest

import flows


@pytest.mark.parametrize("depth", [2, 3])
def test_critical_alpha_is_rho_at_every_depth(depth):
    """Claim C2 (docs/theory.md §11, §17), from a uniform balanced start: each coordinate follows
    dw/dτ = μ_j(w − ρ)^{L−1} on its own, with the equilibrium w = ρ, so below ρ every
    coordinate dies (even L: collapse) or creeps up to ρ (odd L: stalled), and above it
    grows: α_c = ρ exactly, k_c = α_c/ρ = 1, for every μ and depth. The search brackets it
    to 1e-8; ρ = 0.3 checks the ray α = k_c ρ. It integrates nothing: every uniform start is
    decided at τ = 0 by the certificates (analysis._run.start_code); the flow on both sides of
    ρ is integrated against the closed form in tests/test_filippov.py,
    test_alpha_c_sides_are_the_closed_form
    (and in the C2 row of `python -m analysis check`)."""
    import analysis

    rho = 0.3
    b = analysis.critical_alpha(
        flows.LinfSAM(rho), [1.0, 2.0, 3.0, 4.0, 5.0], depth=depth, full_output=True
    )
    lo, hi = b.bracket
    assert b.exists and lo <= rho <= hi and hi - lo <= 1e-8 * lo, b
