"""Shared test fixtures: the list of all methods, datasets, and an independent numpy SAM.

The reduced-ODE references (scipy on hand-written fields) are in analysis._reference, shared
with ``python -m analysis check``.

Adding a method means adding one line to ``all_methods``.
"""

import types
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import scipy.integrate
import scipy.special

import flows
from analysis import _reference

ROOT = Path(__file__).resolve().parents[1]


def cosine_sigma(t):
    """An annealed LE-SAM budget σ(t) (the training schedule of the LE-SAM paper)."""
    return 0.35 * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t / 2.0, 1.0)))


def lesam_schedule_l2(mu, alpha, rho_max, sigma, *, t_max, w_max=1e3, collapse=1e-6, t_stop=None):
    r"""An independent reference: the balanced L = 2 LE-SAM rescaled flow with a schedule σ(t)
    read on the real clock, written out by hand (docs/theory.md §4, §5) and solved with scipy.

    State (w, t): both layers equal w (the flow keeps them equal), ``m = Σ μ_j w_j²``,
    ``∇m = μ⊙w`` per layer (``‖∇m‖ = √2‖μ⊙w‖``), ``‖∇L‖ = ‖∇m‖/(1+e^m)`` (logistic),
    ``ρ_t = min(σ(t)/(‖∇L‖ + 1e-12), ρ_max)``, ``ŵ = w − ρ_t μ⊙w/‖∇m‖``,
    ``dw/dτ = μ⊙ŵ``, ``dt/dτ = 1 + e^{m(ŵ)}``. Stops (terminal events) when ``‖w‖`` falls to
    ``collapse`` times its start (the collapse event of flows.solve), ``max w`` reaches
    ``w_max``, or the real time t reaches ``t_stop`` (if given). DOP853, rtol 1e-12, dense
    output; ``σ`` is called on Python floats.
    """
    mu = np.asarray(mu, dtype=float)

    def f(tau, y):
        w, t = y[:-1], y[-1]
        norm_gm = np.sqrt(2.0) * np.linalg.norm(mu * w)
        grad = norm_gm / (1.0 + np.exp(mu @ (w * w)))
        rho = min(float(sigma(t)) / (grad + 1e-12), rho_max)
        hat = w - rho * mu * w / norm_gm
        return np.append(mu * hat, 1.0 + np.exp(mu @ (hat * hat)))

    y0 = np.append(np.full(mu.size, float(alpha)), 0.0)
    down = lambda tau, y: np.linalg.norm(y[:-1]) / np.linalg.norm(y0[:-1]) - collapse  # noqa: E731
    up = lambda tau, y: np.max(y[:-1]) - w_max  # noqa: E731
    late = lambda tau, y: y[-1] - (np.inf if t_stop is None else t_stop)  # noqa: E731
    down.terminal = up.terminal = late.terminal = True
    down.direction, up.direction, late.direction = -1, 1, 1
    return scipy.integrate.solve_ivp(
        f, (0.0, t_max), y0, method="DOP853", rtol=1e-12, atol=1e-15 * alpha, dense_output=True,
        events=[down, up, late],
    )  # fmt: skip


def annealed_switches(mu, alpha, rho_max, sigma, t_off):
    r"""(sequence, switch times τ) of j† for :func:`lesam_schedule_l2` with a schedule that is 0
    from the real time ``t_off`` on: scipy until t = t_off (changes by
    :func:`analysis._reference.dense_argmax_changes`), then GD's flow,
    :math:`w_j(\tau)=w_j(\tau_0)e^{\mu_j(\tau-\tau_0)}`, whose overtakes of the leader are
    closed forms, until argmax μ leads."""
    mu = np.asarray(mu, dtype=float)
    sol = lesam_schedule_l2(mu, alpha, rho_max, sigma, t_max=1e3, t_stop=t_off)
    assert sol.status == 1 and sol.t_events[2].size == 1  # it reached t = t_off
    w_part = types.SimpleNamespace(t=sol.t, sol=lambda s: np.asarray(sol.sol(s))[:-1])
    sequence, times = _reference.dense_argmax_changes(w_part)
    times, tau0, w = list(times), sol.t[-1], sol.y[:-1, -1]
    while sequence[-1] != np.argmax(mu):  # the earliest overtake of the leader a
        a = sequence[-1]
        after = {k: np.log(w[a] / w[k]) / (mu[k] - mu[a]) for k in range(mu.size) if mu[k] > mu[a]}
        k = min(after, key=after.get)
        sequence.append(k)
        times.append(tau0 + after[k])
    return sequence, np.array(times), tau0


def all_methods():
    """One instance of every method (ids for pytest parametrisation)."""
    return {
        "gd": flows.GD(),
        "l2sam": flows.L2SAM(0.3),
        "l2sam_layer": flows.L2SAM(0.3, per_layer=True),
        "linfsam": flows.LinfSAM(0.05),
        "lesam": flows.LESAM(0.35, 0.3),
        "lesam_capped": flows.LESAM(5.0, 0.2),
    }


def smooth_methods():
    """Methods with a smooth (or Lipschitz) vector field: every method but ℓ∞-SAM."""
    return {k: m for k, m in all_methods().items() if not isinstance(m, flows.LinfSAM)}


def separable_data(n=4, d=3, seed=0):
    """A random dataset separable by a positive teacher w > 0, with margins >= 0.2·‖w‖.

    The teacher is positive because a balanced even-depth network only reaches
    β ≥ 0: with a teacher outside the positive orthant the loss has a finite
    minimiser, ‖∇L‖ → 0 in finite time and the ℓ2-SAM direction g/‖g‖ becomes
    undefined there (the solvers then stall, status max_steps).
    """
    rng = np.random.default_rng(seed)
    w = np.abs(rng.normal(size=d)) + 0.1
    X = rng.normal(size=(n, d))
    y = np.sign(X @ w)
    X += 0.2 * y[:, None] * w / np.linalg.norm(w)  # push every point away from the boundary
    return flows.Dataset(X, y)


def numpy_perturbation(method, g, t=0.0):
    """An independent numpy implementation of each perturbation rule (docs/theory.md §2)."""
    if isinstance(method, flows.GD):
        return np.zeros_like(g)
    if isinstance(method, flows.L2SAM):
        rho = float(method.rho)
        if method.per_layer:
            return rho * g / np.linalg.norm(g, axis=1, keepdims=True)
        return rho * g / np.linalg.norm(g)
    if isinstance(method, flows.LinfSAM):
        if method.delta is None:  # the exact sign, with sign(0) = +1 (docs/theory.md §2, §3)
            u = np.where(g == 0, 1.0, np.sign(g))
        else:
            u = np.tanh(g / float(method.delta))
        return float(method.rho) * u
    if isinstance(method, flows.LESAM):
        sigma = method.sigma(t) if callable(method.sigma) else float(method.sigma)
        norm = np.linalg.norm(g)
        rho_t = min(sigma / (norm + float(method.eps)), float(method.rho_max))
        return rho_t * g / norm
    raise NotImplementedError(type(method))


def numpy_logistic_grad(theta, data):
    r"""∇L(θ) of the mean logistic loss of a depth-L diagonal network (numpy): with
    β = Π_l θ_l and m_i = y_i⟨x_i, β⟩, ∂L/∂θ_l = (1/n) Σ_i ℓ'(m_i) y_i x_i ⊙ Π_{k≠l} θ_k,
    ℓ'(m) = −1/(1 + e^m)."""
    theta = np.asarray(theta, dtype=float)
    z = np.asarray(data.y, dtype=float)[:, None] * np.asarray(data.X, dtype=float)
    dl = -scipy.special.expit(-(z @ np.prod(theta, axis=0)))
    r = dl @ z / z.shape[0]  # ∂L/∂β
    others = [np.prod(np.delete(theta, k, axis=0), axis=0) for k in range(len(theta))]
    return r * np.array(others)


def numpy_iterate(method, data, theta0, lr, steps):
    """θ_0..θ_steps of θ_{k+1} = θ_k − η∇L(θ_k + ε(θ_k, ∇L(θ_k))) (logistic loss, t = kη),
    with ε from :func:`numpy_perturbation`: an independent discrete SAM update."""
    thetas = [np.asarray(theta0, dtype=float)]
    for k in range(steps):
        theta = thetas[-1]
        eps = numpy_perturbation(method, numpy_logistic_grad(theta, data), t=k * lr)
        thetas.append(theta - lr * numpy_logistic_grad(theta + eps, data))
    return np.array(thetas)


def l2sam_limit(mu, alpha, rho, depth):
    """The regime name and limit index of balanced ℓ2-SAM at odd ``depth`` >= 3 from the start
    w(0) = ``alpha`` (one entry per coordinate, each > ρ/√L, so that the run escapes), as
    :func:`analysis.limit_map` names them, without the code.

    The limit is the first coordinate to blow up, argmax_j μ_j α_j^{L−2}: the order of the
    q_j = μ_j w_j^{L−2} never changes (docs/theory.md §10), and the reduced flow
    (:func:`analysis._reference.l2sam_flow`) must end on it too. ``minor`` when it is not
    argmax μ; otherwise
    ``direct`` when j†(0⁺) of the reduced flow (ties at τ = 0 broken by the growth that follows)
    is already argmax μ, else ``sequential``.
    """
    mu, alpha = np.asarray(mu, dtype=float), np.asarray(alpha, dtype=float)
    leader = int(np.argmax(mu * alpha ** (depth - 2)))
    sol = _reference.l2sam_flow(mu, alpha, rho, depth, t_max=1e6)
    assert sol.status == 1 and int(np.argmax(sol.y[:, -1])) == leader, (alpha, sol.message)
    if leader != int(np.argmax(mu)):
        return "minor", leader
    first = _reference.dense_argmax_changes(sol)[0][0]
    return ("direct" if first == leader else "sequential"), leader


# Solves share one saving-grid size and one set of static options wherever possible, so
# that jit compiles each (method, L, d) once for the whole module.
N_SAVE = 41


def grid(t1):
    return np.linspace(0.0, t1, N_SAVE)


def gd_rescaled(mu, alpha, depth, t1, **kw):
    data = flows.single_example(mu)
    theta0 = flows.balanced_init(np.asarray(alpha, dtype=float), depth)
    kw = dict(ts=grid(t1), dense=True) | kw
    return flows.solve(flows.GD(), data, theta0, t1=t1, rescaled=True, **kw)


def l2sam_d1(alpha, t1, mu=2.0, rho=1.0):
    """ℓ2-SAM, L = 2, d = 1: dw/dτ = μ (w - ρ/√2) (hand-derived from the rescaled flow)."""
    return flows.solve(
        flows.L2SAM(rho),
        flows.single_example([mu]),
        flows.balanced_init(alpha, 2, 1),
        t1=t1,
        rescaled=True,
        ts=grid(t1),
        dense=True,
    )


def quick_data(quick_figures, names):
    """The saved data of the quick figures ``names``, as the figures read them."""
    import figures

    ctx = figures.Context(out=quick_figures[0], cache=quick_figures[1], quick=True)
    return {name: figures.load_data(ctx, name) for name in names}


def gallery_caption(name: str) -> str:
    """The caption of figure ``name`` in docs/gallery.md: the paragraph after its image, with
    line breaks joined, so that a test can check that the caption states a number."""
    text = (ROOT / "docs" / "gallery.md").read_text()
    start = text.index(f"](figures/{name}.png)")
    body = text[text.index("\n", start) + 1 :]
    return " ".join(body.split("\n\n", 1)[0].split())


def published_data(name: str) -> dict:
    """The data the committed figure docs/figures/<name>.png was drawn from (checksummed)."""
    import figures

    folder = ROOT / "docs" / "figures"
    return figures.load_data(figures.Context(out=folder, cache=folder), name)
