r"""``analysis.regime_path`` of exact ℓ∞-SAM (the Filippov flow) against the closed forms of
tests/test_filippov.py's module docstring (docs/theory.md §11): each balanced coordinate follows
:math:`dw_j/d\tau=\mu_j(w_j-\rho)^{L-1}` on its own."""

import numpy as np
import pytest

import flows


def _closed_form_w(depth, mu, alpha, rho, tau):
    r"""Balanced exact ℓ∞-SAM, rescaled, w_j(τ) ≥ 0 (module doc): :math:`L=2`:
    :math:`\rho+(\alpha-\rho)e^{\mu\tau}`; :math:`L\ge3`, :math:`\delta=|w-\rho|`:
    :math:`\delta^{-(L-2)}=\delta_0^{-(L-2)}\mp(L-2)\mu\tau` (− above ρ and below it at even
    L: blow-up or death; + below it at odd L: creeping up to ρ). A dead weight stays 0."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    tau = np.asarray(tau, dtype=float)[..., None]
    if depth == 2:
        w = rho + (alpha - rho) * np.exp(mu * tau)
    else:
        k = depth - 2
        sign = np.where((alpha > rho) | (depth % 2 == 0), -1.0, 1.0)
        with np.errstate(invalid="ignore"):
            delta = (np.abs(alpha - rho) ** -k + sign * k * mu * tau) ** (-1 / k)
        w = np.where(alpha > rho, rho + delta, rho - delta)
    return np.where(w > 0, w, 0.0)


# (α/ρ per coordinate, μ = (1, 2, 3)): at L = 2 the limit is argmax μ over α_j > ρ (index 2,
# after index 0 led: sequential), at L ≥ 3 the first blow-up, argmax μ_j(α_j − ρ)^{L−2}
# (index 0, a minor feature: claim C2); below ρ everywhere: collapse (even L) or stalled.
_BELOW, _ABOVE, _MIXED = (0.5,) * 3, (2.0,) * 3, (1.4, 0.5, 1.1)
LINF_PATHS = {
    2: [(_MIXED, "sequential", [0, 2]), (_BELOW, "collapse", [0]), (_ABOVE, "direct", [2])],
    3: [(_MIXED, "minor", [0]), (_BELOW, "stalled", [2]), (_ABOVE, "direct", [2])],
    4: [(_MIXED, "minor", [0]), (_BELOW, "collapse", [0]), (_ABOVE, "direct", [2])],
}  # fmt: skip


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_regime_path_of_exact_linf_closed_form(depth):
    """``analysis.regime_path`` of the exact (Filippov) ℓ∞-SAM flow at L = 2, 3, 4 against
    the closed forms: the regime, the path of j† and, at L = 2, the switch time, where
    0.4 e^τ = 0.1 e^{3τ}: τ = ln 2. The limit is ``analysis.limit_leader``'s."""
    import analysis

    rho, mu = 0.5, np.array([1.0, 2.0, 3.0])
    for ratio, regime, sequence in LINF_PATHS[depth]:
        alpha = rho * np.array(ratio)
        r = analysis.regime_path(flows.LinfSAM(rho), mu, alpha, depth)
        assert (r.regime, r.sequence) == (regime, sequence), (ratio, r)
        w = _closed_form_w(depth, mu, alpha, rho, [1e-9])[0]
        assert int(np.argmax(w)) == sequence[0]  # at τ = 0⁺ (the tie rule's choice)
        if regime not in ("collapse", "stalled"):
            assert analysis.limit_leader(flows.LinfSAM(rho), mu, alpha, depth) == sequence[-1]
        if len(sequence) > 1:
            np.testing.assert_allclose(r.times, [np.log(2.0)], rtol=1e-9)
            np.testing.assert_allclose(
                _closed_form_w(depth, mu, alpha, rho, [np.log(2.0)])[0, [0, 2]], 0.5 * 1.8
            )


@pytest.mark.parametrize("depth, tau", [(2, np.log(4 / 3) / 2), (3, 5 / 6)])
def test_tied_start_keeps_its_observed_switch(depth, tau):
    r"""Balanced exact ℓ∞-SAM from α = (0.3, 0.3, 0.25, 0.25), ρ = 0.1, μ = (1, 2, 3, 4): the
    tied pairs separate only for τ > 0 (their strict order is not asked of the start), so the
    observed switch 2 → 4 stands, at its closed-form time w₂ = w₄: 0.2 e^{2τ} = 0.15 e^{4τ}
    (L = 2: τ = ln(4/3)/2) and 1/0.2 − 2τ = 1/0.15 − 4τ (L = 3: τ = 5/6, before coordinate 4's
    blow-up at 1/0.6)."""
    import analysis

    rho, mu, alpha = 0.1, np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.3, 0.3, 0.25, 0.25])
    r = analysis.regime_path(flows.LinfSAM(rho), mu, alpha, depth)
    assert (r.regime, r.sequence) == ("sequential", [1, 3])
    np.testing.assert_allclose(r.times, [tau], rtol=1e-9)
    w = _closed_form_w(depth, mu, alpha, rho, [tau])[0]
    np.testing.assert_allclose(w[1], w[3], rtol=1e-12)  # the closed form agrees: a tie there
