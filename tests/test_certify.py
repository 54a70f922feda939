"""analysis._certify: the escape / settled certificates hold on independent integrations.

For random balanced states at L = 2…6, whenever the certificate says "settled on k", the
reduced ℓ2-SAM flow integrated by scipy (tests/helpers.py) keeps k as argmax w until it blows
up; whenever it says "escaped", w_max grows past 10³. The q-order guard flags states whose
order the exact flow cannot reach.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import analysis
import flows
from analysis import _reference
from analysis._certify import invariant_leader, keeps_invariant_order, time_scale, trapped

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize("depth", [2, 3, 4, 6])
def test_settled_states_stay_settled_on_the_reduced_flow(depth):
    rng = np.random.default_rng(depth)
    checked = 0
    for _ in range(40):
        w = rng.uniform(0.5, 6.0, MU.size)
        theta = np.tile(w, (depth, 1))
        escaped, leader, settled = (np.asarray(x) for x in analysis.certificate(theta, MU, 1.0))
        if not settled:
            continue
        assert escaped
        sol = _reference.l2sam_flow(MU, w, 1.0, depth, 50.0, w_max=1e4 * w.max())
        ts = np.linspace(sol.t[0], sol.t[-1], 2001)
        assert np.all(np.argmax(sol.sol(ts), axis=0) == leader)
        checked += 1
        if checked == 4:
            break
    assert checked >= 3  # the test exercised the certificate


def test_certificate_is_not_granted_to_a_leader_that_loses():
    # L = 2, w = (3, 1): index 0 leads but μ_1 > μ_0 lets index 1 overtake (reduced flow).
    mu = np.array([1.0, 2.0])
    theta = np.tile([3.0, 1.0], (2, 1))
    escaped, leader, settled = analysis.certificate(theta, mu, 0.1)
    assert bool(escaped) and int(leader) == 0 and not bool(settled)
    sol = _reference.l2sam_flow(mu, [3.0, 1.0], 0.1, 2, 20.0, w_max=1e6)
    assert np.argmax(sol.y[:, -1]) == 1


def test_depth1_certificate_is_exact():
    # L = 1: dw/dτ = μ exactly, so k leads forever iff w_k >= w_j and μ_k >= μ_j.
    mu = np.array([1.0, 2.0])
    assert bool(analysis.certificate([[2.0, 1.0]], mu, 0.5)[2]) is False  # 1 overtakes at τ=1
    assert bool(analysis.certificate([[1.0, 2.0]], mu, 0.5)[2]) is True


def test_invariant_order_and_leader():
    m = flows.L2SAM(1.0)
    theta0 = np.tile(np.full(5, 0.3), (4, 1))
    assert int(invariant_leader(m, theta0, MU)) == 4  # argmax μ_j α^{L-2}
    assert int(invariant_leader(m, theta0[:2], MU)) == -1  # the theorem is for L >= 3
    # exact ℓ∞-SAM: (w_j − ρ)^{−2} = (α − ρ)^{−2} − 2μ_jτ, so argmax μ_j blows up first
    assert int(invariant_leader(flows.LinfSAM(0.1), theta0, MU)) == 4
    assert int(invariant_leader(flows.LinfSAM(0.1, delta=0.01), theta0, MU)) == -1
    # L = 3, ρ = 0.1: blow-up at 1/(μ_j(α_j − ρ)) = 2, 3.3, 16.7: the minor coordinate first
    minor = np.tile([0.6, 0.25, 0.12], (3, 1))
    assert int(invariant_leader(flows.LinfSAM(0.1), minor, [1.0, 2.0, 3.0])) == 0
    # L = 2: the larger μ starts below ρ and never grows; the other escapes, e^{τ}
    assert int(invariant_leader(flows.LinfSAM(0.1), np.tile([0.3, 0.05], (2, 1)), [1, 2])) == 0
    assert not bool(keeps_invariant_order(m, theta0, np.tile(0.3 * MU**-0.5, (4, 1)), MU))
    w = 0.3 * MU**-0.5  # all q_j = μ_j w_j² equal: the order is lost
    assert not bool(keeps_invariant_order(m, theta0, np.tile(w, (4, 1)), MU))
    assert bool(keeps_invariant_order(m, theta0, theta0 * 2, MU))


def _linf_balanced(w0, mu, rho, depth, tau):
    r"""Exact ℓ∞-SAM, one balanced coordinate per column, w > 0 (docs/theory.md §11), in closed
    form: dw/dτ = μ (w − ρ)^{L−1}. L = 2: w − ρ = (w₀ − ρ) e^{μτ}; L >= 3 with u = w − ρ:
    u^{−(L−2)} = u₀^{−(L−2)} − (L−2) μ τ (the sign of u kept; below ρ the weight falls to 0
    at even L, where it is held, or creeps up to ρ at odd L). Rows: τ; inf after a blow-up."""
    w0, tau = np.asarray(w0)[None, :], np.asarray(tau)[:, None]
    u0 = w0 - rho
    if depth == 2:
        u = u0 * np.exp(mu * tau)
    else:
        k = depth - 2
        base = np.abs(u0) ** -k - np.sign(u0) ** depth * k * mu * tau
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.sign(u0) * np.where(base > 0, base ** (-1 / k), np.inf)
    return np.maximum(rho + u, 0.0)


@pytest.mark.parametrize("depth", [2, 3, 4, 5, 8])
def test_linf_decoupled_certificate_on_the_closed_form(depth):
    # Whenever the decoupled certificate settles a balanced state on k, k leads (argmax w,
    # β = w^L) at every τ of the closed form until it blows up (L >= 3) or τ = 40 / min μ.
    rng = np.random.default_rng(10 + depth)
    rho, checked, extra = 0.5, 0, 0
    for _ in range(400):
        w = rho * rng.uniform(0.2, 3.0, MU.size)
        theta = np.tile(w, (depth, 1))
        trap = trapped(flows.LinfSAM(rho), theta)
        _, k, plain = analysis.certificate(theta, MU, rho, trap)
        _, leader, settled = analysis.certificate(theta, MU, rho, trap, decoupled=True)
        assert int(leader) == int(k) and (bool(settled) or not bool(plain))
        if not settled:
            continue
        blow = (w[k] - rho) ** -(depth - 2) / ((depth - 2) * MU[k]) if depth > 2 else 40.0
        tau = np.linspace(0.0, blow, 4001)[1:-1]
        ws = _linf_balanced(w, MU, rho, depth, tau)
        assert np.all(np.argmax(ws, axis=1) == int(k))
        checked, extra = checked + 1, extra + (not bool(plain))
        if checked == 8:
            break
    assert checked >= 6 and extra >= 3  # the new comparison settled states GD's did not


def test_linf_decoupled_certificate_refuses_a_faster_follower():
    # μ = (1, 2), w = (1.2, 1.1), ρ = 0.5, L = 2: w_1 − ρ = 0.6 e^{2τ} overtakes 0.7 e^{τ}
    # at τ = ln(7/6) (closed form): index 0 leads now but is not settled.
    mu = np.array([1.0, 2.0])
    theta = np.tile([1.2, 1.1], (2, 1))
    _, leader, settled = analysis.certificate(theta, mu, 0.5, decoupled=True)
    assert int(leader) == 0 and not bool(settled)
    ws = _linf_balanced([1.2, 1.1], mu, 0.5, 2, [np.log(7 / 6) * 1.01])
    assert np.argmax(ws[0]) == 1


def test_linf_invariant_order_flags_float64_ties():
    # Above ρ a uniform start keeps w_j < w_k for μ_j < μ_k at every τ > 0 (closed form): a
    # state with two tied coordinates has lost that order, one with the order kept has not.
    m, depth = flows.LinfSAM(1.0), 5
    theta0 = np.full((depth, MU.size), 1.0 + 2e-7)
    # At τ = 1, u_j = (u₀^{−3} − 3μ_j)^{−1/3} increases with μ_j, by ~1e-19 relative: the
    # closed form evaluated in float64 ties every coordinate.
    exact = _linf_balanced(theta0[0], MU, 1.0, depth, [1.0])[0]
    assert np.all(exact == exact[0])
    assert not bool(keeps_invariant_order(m, theta0, np.tile(exact, (depth, 1)), MU))
    ordered = 1.0 + 2e-7 * (1 + 1e-3 * MU)
    assert bool(keeps_invariant_order(m, theta0, np.tile(ordered, (depth, 1)), MU))
    smooth = flows.LinfSAM(1.0, delta=0.01)  # no decoupling theorem for the smoothed sign
    assert bool(keeps_invariant_order(smooth, theta0, np.tile(exact, (depth, 1)), MU))


def test_linf_invariant_order_and_leader_vmap_over_rho_with_concrete_states():
    """Exact ℓ∞-SAM's theorem, vmapped over ρ with the state and μ concrete (NumPy): the
    leader argmax_{α_j > ρ} μ_j (α_j - ρ)^{L-2} (claim C2), by hand for α = (0.3, 0.6, 0.45),
    μ = (1, 2, 3), L = 3: ρ = 0.1 → (0.2, 1.0, 1.05): 2; ρ = 0.5 → only α_1 grows: 1; ρ = 0.7
    → none: -1. A state whose smallest layers put 0 ahead of 1 (0 is behind 1 for all τ > 0
    where both grow) breaks the order at ρ = 0.1 only."""
    theta0, mu = np.array([[0.3, 0.6, 0.45]] * 3), np.array([1.0, 2.0, 3.0])
    theta = np.array([[0.7, 0.65, 0.8]] * 3)
    rhos = jnp.array([0.1, 0.5, 0.7])
    leaders = jax.vmap(lambda r: invariant_leader(flows.LinfSAM(r), theta0, mu))(rhos)
    assert np.asarray(leaders).tolist() == [2, 1, -1]
    order = jax.vmap(lambda r: keeps_invariant_order(flows.LinfSAM(r), theta0, theta, mu))(rhos)
    assert np.asarray(order).tolist() == [False, True, True]


def test_time_scale_is_homogeneous():
    # The field is homogeneous of degree L-1 in (θ, e): time scales as s^(2-L).
    theta = np.full((4, 3), 0.5)
    mu = np.array([1.0, 2.0, 3.0])
    assert float(time_scale(theta, mu, 0.1)) == pytest.approx(0.5**-2)
    assert float(time_scale(10 * theta, mu, 1.0)) == pytest.approx(5.0**-2)


def test_perturbation_bound_bad_method():
    with pytest.raises(ValueError, match="method"):
        analysis.perturbation_bound("sam")


def _linf_coordinate_field(rho, mu, depth):
    """One coordinate's exact ℓ∞-SAM rescaled field, any layers (off the switching surfaces):
    dw_l/dτ = μ Π_{l'≠l} (w_l' − ρ sign Π_{l''≠l'} w_l'')."""

    def f(t, w):
        sig = np.array([np.sign(np.prod(np.delete(w, k))) for k in range(depth)])
        hat = w - rho * sig
        return np.array([mu * np.prod(np.delete(hat, k)) for k in range(depth)])

    return f


@pytest.mark.parametrize("depth", [2, 3, 4, 6])
def test_trapped_layers_shrink_on_the_unbalanced_field(depth):
    """Inside max|w_l| < ρ every |w_l| shrinks at even L (trapped); at odd L with a positive
    product they grow (not trapped). scipy on the field of one coordinate, up to the first
    switching surface (a weight at 0)."""
    import scipy.integrate

    rng = np.random.default_rng(depth)
    rho, mu = 0.5, 2.0
    f = _linf_coordinate_field(rho, mu, depth)
    zero = lambda t, w: np.min(np.abs(w)) - 1e-9  # noqa: E731
    zero.terminal = True
    grew = 0
    for _ in range(6):
        w0 = rng.uniform(0.05, 0.95 * rho, depth) * rng.choice([-1.0, 1.0], depth)
        if depth % 2:
            w0 = np.abs(w0)  # odd L: a positive product, the creeping case
        sol = scipy.integrate.solve_ivp(f, (0, 50), w0, rtol=1e-10, atol=1e-13, events=zero,
                                        dense_output=True)  # fmt: skip
        size = np.max(np.abs(sol.sol(np.linspace(0, sol.t[-1], 400))), axis=0)
        theta = np.stack([w0, np.full(depth, 2.0 * rho)], axis=1)  # coordinate 2: above ρ
        mask = np.asarray(trapped(flows.LinfSAM(rho), theta))
        if depth % 2 == 0:
            assert np.all(np.diff(size) <= 1e-12) and size[-1] < size[0]
            assert mask.tolist() == [True, False]
        else:
            grew += size[-1] > size[0]
            assert mask.tolist() == [False, False]
    assert depth % 2 == 0 or grew == 6  # the odd-depth states do escape the box bound


def test_trapped_is_exact_linf_only():
    theta = np.full((2, 2), 0.1)
    for method in (flows.GD(), flows.L2SAM(0.5), flows.LESAM(0.3, 0.5), flows.LinfSAM(0.5, 1e-3)):
        assert not np.any(np.asarray(trapped(method, theta)))
    assert np.all(np.asarray(trapped(flows.LinfSAM(0.5), theta)))
    assert not np.any(np.asarray(trapped(flows.LinfSAM(0.05), theta)))  # |w| >= ρ


def test_certificate_settles_a_minor_leader_over_a_trapped_major():
    # ℓ∞-SAM, L = 2, μ = (1, 2), ρ = 1: w_1 = ρ + (α_1 − ρ) e^{τ} grows for α_1 > ρ, while the
    # major coordinate, dead at 0 (a rounding residual 1e-14 left by sliding), never grows
    # (docs/theory.md §11). Without the trap, its comparison solution 1e-14 e^{2τ} would overtake.
    theta = np.tile([2.0, 1e-14], (2, 1))
    mu = np.array([1.0, 2.0])
    escaped, leader, settled = analysis.certificate(theta, mu, 1.0)
    assert bool(escaped) and int(leader) == 0 and not bool(settled)
    mask = trapped(flows.LinfSAM(1.0), theta)
    escaped, leader, settled = analysis.certificate(theta, mu, 1.0, mask)
    assert bool(escaped) and int(leader) == 0 and bool(settled)


@pytest.mark.parametrize("depth", [3, 4, 5])
def test_linf_tie_is_where_the_reduced_flows_blow_up_together(depth):
    rho, mu = 1.0, np.array([1.0, 2.0])
    m = flows.LinfSAM(rho)
    # w_max near the blow-up: τ* − τ(w_max) ~ w_max^{-(L-2)} / μ_j is below 1e-10 τ*, and τ
    # keeps its resolution there
    w_max = {3: 1e11, 4: 1e6, 5: 1e4}[depth]
    for a1 in (1.5, 3.0):
        a2 = float(analysis.linf_tie(m, mu, a1, depth))
        times = _reference.linf_escape_times(mu, [a1, a2], rho, depth, w_max=w_max)
        np.testing.assert_allclose(times[0], times[1], rtol=1e-8)
        for side, winner in ((0.99, 0), (1.01, 1)):  # α_2 just below / above the curve
            a = [a1, rho + side * (a2 - rho)]
            times = _reference.linf_escape_times(mu, a, rho, depth, w_max=w_max)
            assert int(np.argmin(times)) == winner
            assert analysis.limit_leader(m, mu, a, depth) == winner


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(method=flows.L2SAM(1.0)), "method"),
        (dict(method=flows.LinfSAM(1.0, 1e-3)), "method"),
        (dict(depth=2), "depth"),
        (dict(alpha_k=0.5), "alpha_k"),
        (dict(alpha_k=np.nan), "alpha_k"),
        (dict(mu=[1.0, -2.0]), "mu"),
        (dict(k=1, j=1), "differ"),
        (dict(j=2), "j"),
    ],
)
def test_linf_tie_bad_input(kwargs, name):
    args = {**dict(method=flows.LinfSAM(1.0), mu=[1.0, 2.0], alpha_k=2.0, depth=3), **kwargs}
    with pytest.raises(ValueError, match=name):
        analysis.linf_tie(**args)


@pytest.mark.parametrize("depth", [2, 3, 4, 5])
def test_the_escape_certificate_is_exactly_a_layer_above_the_bound(depth):
    """docs/theory.md §12: escape is certified when some coordinate's smallest layer
    :math:`a_k=\\min_lw_{lk}` exceeds e, and not when every :math:`a_j\\le e` (a start just
    below e may still collapse, e.g. ℓ2-SAM at L = 2)."""
    e = 0.3
    for factor, expected in ((1 + 1e-3, True), (1 - 1e-3, False)):
        theta = np.full((depth, 2), 0.1)
        theta[:, 1] = 2.0  # coordinate 1: every layer large but one
        theta[0, 1] = factor * e
        escaped, _, _ = analysis.certificate(theta, [1.0, 2.0], e)
        assert bool(escaped) is expected, (depth, factor)


@pytest.mark.parametrize("depth", [2, 4])
def test_the_trapped_box_is_exactly_rho(depth):
    """docs/theory.md §11: exact ℓ∞-SAM traps coordinate j while every :math:`|w_{lj}|<\\rho`;
    one layer just above ρ leaves the box."""
    rho = 0.3
    theta = np.full((depth, 3), 0.1)
    theta[-1, 1] = rho * (1 - 1e-3)
    theta[-1, 2] = rho * (1 + 1e-3)
    assert np.asarray(trapped(flows.LinfSAM(rho), theta)).tolist() == [True, True, False]
