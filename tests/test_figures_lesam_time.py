r"""The LE-SAM-in-time figure (figures/_lesam.py, ``lesam_time``): its switch times, real times and
radii against an independent reduction, and the numbers of its caption in docs/gallery.md.

Independent source: the balanced single-example flow at L = 2 reduced to d scalars (derived from
docs/theory.md §2, §4, §5, as in tests/test_figures_lesam.py): with w⁽¹⁾ = w⁽²⁾ = w = α e^z,
N = ‖μ⊙w‖ and the loss gradient's norm ‖g‖ = √2|ℓ'(m)|N, the perturbed layer is
ŵ = w(1 − aμ), a = ρ_t/(√2N), ρ_t = min(σ(t)/‖g‖, ρ_max) (ℓ2-SAM: ρ_t = ρ), and the rescaled flow
is dz_j/dτ = μ_j(1 − aμ_j), with the real time dt/dτ = 1/|ℓ'(m̂)|, m̂ = ⟨μ, ŵ²⟩. j† is argmax z
(β = w² > 0). Solved by scipy (DOP853), switch times by root finding on its dense output.
"""

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.special

from figures import _lesam
from tests.helpers import gallery_caption, published_data, quick_data

MU = _lesam.MU
NAMES = list(_lesam.TIME_METHODS)
SIGMAS = {"LE-SAM": 0.35, "LE-SAM 0.1": 0.1, "LE-SAM 0.05": 0.05}


def _sigma(name, t):
    """σ(t) of run ``name``, written out (σ₀(1 + cos(πt/T))/2 annealed, 0 after T)."""
    if name == "LE-SAM cos":
        return 0.35 * 0.5 * (1.0 + np.cos(np.pi * min(t / 10.0, 1.0)))
    return SIGMAS[name]


def _radius(name, z, t):
    """(ρ_t, a) of the reduced flow at z and real time t."""
    alpha, rho_max = 0.11, 0.3
    w = alpha * np.exp(z)
    n = np.linalg.norm(MU * w)
    if name == "ℓ2-SAM":
        rho = rho_max
    else:
        lp = scipy.special.expit(-np.sum(MU * w**2))  # |ℓ'(m)|, logistic
        # ϱ = 1e-12 (flows.LESAM's eps): σ = 0 gives ρ_t = 0 where ‖g‖ underflows to 0
        rho = min(_sigma(name, t) / (np.sqrt(2.0) * lp * n + 1e-12), rho_max)
    return rho, rho / (np.sqrt(2.0) * n)


def _reduced(name, t1):
    """The reduced run of ``name`` from α = 0.11 to τ = t1: scipy's solution of (z, t)."""
    alpha = 0.11

    def field(tau, y):
        z, t = y[:-1], y[-1]
        _, a = _radius(name, z, t)
        w_hat = alpha * np.exp(z) * (1.0 - a * MU)
        m_hat = np.sum(MU * w_hat**2)
        # dt/dτ = 1 + e^m̂, capped at e^50: past t = T (which σ(t) reads) t is compared only
        # where dt/dτ < e^30 (flows' clock range), and uncapped it would overflow
        return np.append(MU * (1.0 - a * MU), np.exp(min(np.logaddexp(0.0, m_hat), 50.0)))

    return scipy.integrate.solve_ivp(
        field, (0.0, t1), np.zeros(MU.size + 1), method="DOP853", rtol=1e-12, atol=1e-14,
        dense_output=True,
    )  # fmt: skip


def _switches(sol, t1):
    """j† (0-based) sequence and switch times of a reduced run on (0, t1]."""
    taus = np.linspace(1e-9, t1, 20001)
    lead = np.argmax(sol.sol(taus)[:-1], axis=0)
    changes = np.flatnonzero(lead[1:] != lead[:-1])
    times = [
        scipy.optimize.brentq(
            lambda s, a=lead[k], b=lead[k + 1]: sol.sol(s)[b] - sol.sol(s)[a],
            taus[k], taus[k + 1], xtol=1e-15, rtol=1e-14,
        )
        for k in changes
    ]  # fmt: skip
    return [int(lead[0]), *(int(lead[k + 1]) for k in changes)], np.array(times)


@pytest.fixture(scope="module")
def data():
    return published_data("lesam_time")


@pytest.fixture(scope="module")
def reduced(data):
    t1 = float(data["tau_max"])
    return {name: _reduced(name, t1) for name in NAMES}


def test_setting(data):
    assert float(data["alpha"]) == 0.11 and float(data["rho_max"]) == 0.3
    assert MU.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert float(data["t_anneal"]) == 10.0


@pytest.mark.parametrize("name", NAMES)
def test_switches_agree_with_the_reduced_flow(data, reduced, name):
    """(a): every run's j† sequence, and its switch times to 1e-7."""
    sequence, times = _switches(reduced[name], float(data["tau_max"]))
    assert data[f"sequence/{name}"].tolist() == sequence
    np.testing.assert_allclose(data[f"switch_tau/{name}"], times, rtol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_real_time_and_radius_agree_with_the_reduced_flow(data, reduced, name):
    """(b), (c): the real time t(τ), ρ_t and σ(t) at every saved τ where t is finite."""
    sol, tau = reduced[name], data[f"tau/{name}"]
    y = sol.sol(tau)
    # the clock's relative error grows with e^m (3e-6 at flows' default rtol 1e-8; the figure's
    # runs take rtol 1e-11): 1e-6 here, where a clock read at m instead of m̂ is off by >1e-2
    np.testing.assert_allclose(data[f"t/{name}"], y[-1], rtol=1e-6, atol=1e-12)
    if name == "ℓ2-SAM":
        return
    rho = [_radius(name, z, t)[0] for z, t in zip(y[:-1].T, data[f"t/{name}"], strict=True)]
    np.testing.assert_allclose(data[f"rho/{name}"], rho, rtol=1e-7, atol=1e-12)
    sigma = [_sigma(name, t) for t in data[f"t/{name}"]]
    np.testing.assert_allclose(data[f"sigma/{name}"], sigma, rtol=1e-12, atol=1e-15)


def _start_radius(sigma):
    r"""ρ_0 = σ/‖g(0)‖ in closed form: w = α, m = α²Σμ, ‖g‖ = √2 α‖μ‖/(1 + e^m)."""
    alpha = 0.11
    g = np.sqrt(2.0) * alpha * np.linalg.norm(MU) * scipy.special.expit(-(alpha**2) * MU.sum())
    return sigma / g, g


def test_caption_numbers(data):
    caption = gallery_caption("lesam_time")
    # the default σ: the cap binds from the start (σ/ρ_max > ‖g(0)‖), the flow is ℓ2-SAM's
    rho0, g0 = _start_radius(0.35)
    assert 0.35 / 0.3 > g0 and f"{g0:.3f}" in caption and "1.17" in caption
    g_max = float(np.max(data["grad_norm/LE-SAM"]))
    assert g_max < 0.35 / 0.3 and f"at most {g_max:.3f}" in caption
    np.testing.assert_array_equal(data["sequence/LE-SAM"], data["sequence/ℓ2-SAM"])
    np.testing.assert_allclose(data["switch_tau/LE-SAM"], data["switch_tau/ℓ2-SAM"], rtol=1e-9)
    np.testing.assert_allclose(data["rho/LE-SAM"], 0.3, rtol=1e-12)  # ‖ε‖ to rounding
    assert not data["budget/LE-SAM"].any()  # the exact test: ε is ℓ2-SAM(ρ_max)'s
    # smaller σ: the branch acts at the start, ρ_0 = σ/‖g(0)‖
    for name, sigma in (("LE-SAM 0.1", 0.1), ("LE-SAM 0.05", 0.05)):
        want, _ = _start_radius(sigma)
        assert data[f"rho/{name}"][0] == pytest.approx(want, rel=1e-9)
        assert f"{want:.3f}" in caption
        assert data[f"rho/{name}"][-1] == pytest.approx(0.3, rel=1e-12)  # capped by the end
        capped = int(np.argmin(data[f"budget/{name}"]))  # the first capped point, capped after
        assert not data[f"budget/{name}"][capped:].any() and data[f"t/{name}"][capped] <= 1.7
    # the stated switch times and sequences
    for name in NAMES:
        for t in data[f"switch_tau/{name}"]:
            assert f"{t:.2f}" in caption, (name, t)
    assert data["regime/LE-SAM 0.05"] == "direct" and data["sequence/LE-SAM 0.05"].tolist() == [4]
    # annealed: ρ_t = 0 (GD) once σ(t) = 0, at t ≥ T, until the clock's cap
    cos = data["t/LE-SAM cos"]
    assert np.all(data["rho/LE-SAM cos"][cos >= 10.0] == 0.0)
    back = np.flatnonzero(data["budget/LE-SAM cos"])[0]  # the first point back on the branch
    assert f"t = {data['t/LE-SAM cos'][back]:.1f}" in caption
    # the clock's range: ℓ2-SAM's last finite t, and the margin at its first switch (reduced)
    assert f"τ = {data['tau/ℓ2-SAM'][-1]:.2f}" in caption and 4e10 < data["t/ℓ2-SAM"][-1] < 6e10
    first = float(data["switch_tau/ℓ2-SAM"][0])
    assert first > data["tau/ℓ2-SAM"][-1] and data["switch_tau/LE-SAM cos"][0] > 2.87
    w = 0.11 * np.exp(_reduced("ℓ2-SAM", first).y[:-1, -1])
    assert f"m = {np.sum(MU * w**2):.0f}" in caption


def test_quick_run_agrees_with_the_published_data(quick_figures, data):
    """A fresh quick computation: the same runs, saved on a coarser τ grid."""
    quick = quick_data(quick_figures, ["lesam_time"])["lesam_time"]
    for name in NAMES:
        assert quick[f"sequence/{name}"].tolist() == data[f"sequence/{name}"].tolist()
        np.testing.assert_allclose(quick[f"switch_tau/{name}"], data[f"switch_tau/{name}"],
                                   rtol=1e-9)  # fmt: skip
        tau_q, tau_f = quick[f"tau/{name}"], data[f"tau/{name}"]
        shared = np.isin(tau_f, tau_q)
        assert shared.sum() >= 10  # the points of the quick linspace (step 0.05) reached
        keys = ["t"] + (["rho"] if name != "ℓ2-SAM" else [])
        for key in keys:
            np.testing.assert_allclose(quick[f"{key}/{name}"][np.isin(tau_q, tau_f)],
                                       data[f"{key}/{name}"][shared], rtol=1e-7)  # fmt: skip
