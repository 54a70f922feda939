r"""Independent references: the reduced ODEs of balanced single-example flows, written by hand in
NumPy and integrated by scipy's ``solve_ivp``.

They are what ``python -m analysis check`` and the tests compare the package's answers with, so
this module imports nothing from ``flows`` or ``analysis``: every vector field below is written
out again from docs/theory.md, never taken from the code it checks.

* ℓ2-SAM at L = 2 from a uniform start α, the scalar reduction (docs/theory.md §9):
  :math:`\log w_j=\log\alpha+\mu_j\tau-c\mu_j^2T(\tau)`, :math:`c=\rho/\sqrt2`,
  :math:`dT/d\tau=1/\lVert\mu\odot w\rVert` (:func:`scalar_reduction`, :func:`scalar_switches`,
  :func:`l2sam_alpha_c`).
* ℓ2-SAM at any depth L, balanced, in w alone (docs/theory.md §8):
  :math:`dw_j/d\tau=\mu_j\hat w_j^{L-1}`,
  :math:`\hat w=w-\rho\,\mu\odot w^{L-1}/\sqrt{L\sum_k\mu_k^2w_k^{2L-2}}`
  (:func:`l2sam_field`, :func:`l2sam_flow`, :func:`l2sam_switches`).
* exact ℓ∞-SAM, balanced, decoupled (docs/theory.md §11): :math:`dw_j/d\tau=\mu_j(w_j-\rho)^{L-1}`
  while :math:`w_j>0` (:func:`linf_escape_times`).

j†(τ) = argmax_j w_j (equivalently argmax_j |β_j| for a balanced start); its changes are
located by brentq between samples (:func:`argmax_changes`).
"""

import functools

import numpy as np
import scipy.integrate
import scipy.optimize

# Tolerances of the scalar reduction: DOP853 at rtol 1e-13, atol 1e-16 on T (T(0) = 0, and T
# grows like τ/‖μ⊙α‖), the strictest of the copies this module replaced.
SCALAR_TOL = dict(method="DOP853", rtol=1e-13, atol=1e-16)


def argmax_changes(value, ts, xtol):
    r"""(sequence, times) of :math:`\arg\max_j v_j(t)` over the increasing samples ``ts``: the
    argmax at ``ts[0]``, then each change a → b between two samples, located by brentq on
    :math:`v_b-v_a` to ``xtol``. ``value(t)`` returns the vector v(t) of shape (d,) for a scalar
    t and (d, n) for n times. A change back and forth between two samples is not seen: sample
    densely enough."""
    ts = np.asarray(ts, dtype=float)
    js = np.argmax(np.asarray(value(ts)), axis=0)
    seq, times = [int(js[0])], []
    for k in np.flatnonzero(js[1:] != js[:-1]):
        a, b = int(js[k]), int(js[k + 1])
        h = lambda t, a=a, b=b: value(t)[b] - value(t)[a]  # noqa: E731
        times.append(scipy.optimize.brentq(h, ts[k], ts[k + 1], xtol=xtol))
        seq.append(b)
    return seq, np.array(times)


def step_samples(t, per_step=16):
    """``per_step`` samples in each step of a solver's time points ``t`` and the last point,
    leaving out ``t[0]`` (a tie for a uniform start): late switches crowd into the last steps
    before a blow-up, where a fixed grid would miss them."""
    t = np.asarray(t, dtype=float)
    frac = np.arange(per_step) / per_step
    return np.append((t[:-1, None] + np.diff(t)[:, None] * frac).ravel()[1:], t[-1])


def dense_argmax_changes(sol, per_step=16):
    """(sequence, times) of argmax_j y_j on a dense scipy solution ``sol`` (every component is a
    coordinate w_j), sampled by :func:`step_samples`, changes located to 1e-13 of its end time."""
    return argmax_changes(sol.sol, step_samples(sol.t, per_step), 1e-13 * sol.t[-1])


# --- ℓ2-SAM, L = 2: the scalar reduction ----------------------------------------------------


def scalar_reduction(mu, alpha, rho, t_max, events=None):
    r"""The scalar reduction of ℓ2-SAM at L = 2 from the uniform start α (docs/theory.md §9),
    integrated by scipy (DOP853, rtol 1e-13, atol 1e-16, dense output) on τ ∈ [0, t_max].

    State T(τ), :math:`dT/d\tau=1/\lVert\mu\odot w\rVert` with
    :math:`\log w_j=\log\alpha+\mu_j\tau-c\mu_j^2T`, :math:`c=\rho/\sqrt2`, evaluated in logs
    (max-shifted), so that nothing overflows late in an escape. ``events``: functions
    ``e(τ, log_w)`` of the log-weights, terminal, as scipy's. Returns ``(sol, log_w)``, where
    ``log_w(τ)`` is the (d,) or (d, n) log-weights on the dense solution; raises
    ``RuntimeError`` if scipy fails.
    """
    mu = np.asarray(mu, dtype=float)
    c = rho / np.sqrt(2.0)
    log_mu_alpha = np.log(mu * alpha)

    def log_w_at(t, T):
        return np.log(alpha) + np.multiply.outer(mu, t) - c * np.multiply.outer(mu**2, T)

    def f(t, y):
        lw = log_mu_alpha + mu * t - c * mu**2 * y[0]
        top = np.max(lw)
        return [np.exp(-top) / np.sqrt(np.sum(np.exp(2 * (lw - top))))]

    wrapped = []
    for e in events or ():
        g = lambda t, y, e=e: e(t, log_w_at(t, y[0]))  # noqa: E731
        g.terminal, g.direction = True, getattr(e, "direction", 0)
        wrapped.append(g)
    sol = scipy.integrate.solve_ivp(
        f, (0.0, t_max), [0.0], dense_output=True, events=wrapped or None, **SCALAR_TOL
    )
    if sol.status < 0:
        raise RuntimeError(f"the scalar reduction failed: {sol.message}")
    return sol, lambda t: log_w_at(t, sol.sol(t)[0])


def scalar_switches(mu, alpha, rho, t_max):
    """(sequence, switch times τ) of j† of ℓ2-SAM at L = 2 from the uniform start ``alpha``, on
    :func:`scalar_reduction` up to τ = ``t_max``: argmax of log w on 20,000 equal steps of
    (0, t_max], changes located by brentq to 1e-14."""
    _, log_w = scalar_reduction(mu, alpha, rho, t_max)
    return argmax_changes(log_w, np.linspace(0, t_max, 20_001)[1:], 1e-14)


def l2sam_alpha_c(mu=(1.0, 2.0, 3.0, 4.0, 5.0), rho=1.0, lo=None, hi=None, rtol=1e-11):
    r"""α_c of ℓ2-SAM at L = 2 (single example μ, uniform start) on :func:`scalar_reduction`, by
    geometric bisection in [lo, hi] to ``hi/lo − 1 <= rtol``.

    A start escapes when :math:`\lVert\mu\odot w\rVert` grows by :math:`e^{20}` and collapses
    when it falls by :math:`e^{20}` (terminal events, τ <= 1e4); a start that does neither
    raises ``RuntimeError``, rather than being counted on either side. The default bracket is
    the hand bound of docs/theory.md §9: every coordinate shrinks from the start for
    :math:`\alpha\lVert\mu\rVert\le c\mu_{(1)}` and grows for
    :math:`\alpha\lVert\mu\rVert\ge c\mu_{(d)}`. Cached: the tests ask for the same value often.
    """
    lo = None if lo is None else float(lo)
    hi = None if hi is None else float(hi)
    return _l2sam_alpha_c(tuple(np.asarray(mu, dtype=float).tolist()), float(rho), lo, hi, rtol)


@functools.cache
def _l2sam_alpha_c(mu, rho, lo, hi, rtol):
    mu = np.array(mu)
    c, norm = rho / np.sqrt(2.0), np.linalg.norm(mu)
    lo = c * mu.min() / norm if lo is None else lo
    hi = c * mu.max() / norm if hi is None else hi
    log_mu = np.log(mu)

    def escapes(alpha):
        start = np.log(alpha * norm)  # log‖μ⊙w(0)‖

        def change(t, log_w):  # log(‖μ⊙w‖/‖μ⊙w(0)‖), max-shifted
            lw = log_mu + log_w
            top = np.max(lw)
            return top + 0.5 * np.log(np.sum(np.exp(2 * (lw - top)))) - start

        up = lambda t, lw: change(t, lw) - 20  # noqa: E731
        down = lambda t, lw: change(t, lw) + 20  # noqa: E731
        sol, _ = scalar_reduction(mu, alpha, rho, 1e4, events=[up, down])
        if sol.status != 1:
            raise RuntimeError(f"the reduction at alpha={alpha} decided nothing: {sol.message}")
        return sol.t_events[0].size == 1

    if escapes(lo) or not escapes(hi):
        raise RuntimeError(f"the reduction does not change regime in [{lo}, {hi}]")
    while hi / lo - 1 > rtol:
        mid = np.sqrt(lo * hi)
        lo, hi = (lo, mid) if escapes(mid) else (mid, hi)
    return float(np.sqrt(lo * hi))


# --- ℓ2-SAM at depth L, in w alone ----------------------------------------------------------


def l2sam_field(mu, rho, depth):
    r"""f(τ, w) of balanced single-example ℓ2-SAM's rescaled flow in w alone (docs/theory.md §8):
    :math:`dw_j/d\tau=\mu_j\hat w_j^{L-1}`,
    :math:`\hat w=w-\rho\,\mu\odot w^{L-1}/\sqrt{L\sum_k\mu_k^2w_k^{2L-2}}`."""
    mu = np.asarray(mu, dtype=float)

    def f(t, w):
        n = np.sqrt(depth * np.sum(mu**2 * w ** (2 * depth - 2)))
        return mu * (w - rho * mu * w ** (depth - 1) / n) ** (depth - 1)

    return f


def l2sam_flow(mu, alpha, rho, depth, t_max, *, w_max=1e3, w_min=None):
    """:func:`l2sam_field` from w(0) = ``alpha`` (a scalar or one entry per coordinate), by
    scipy's Radau (rtol 1e-12, atol 1e-14 max α, dense output) until τ = ``t_max``, max w =
    ``w_max`` (escape, terminal) or max w = ``w_min`` (collapse, terminal, if given). Returns
    scipy's result."""
    mu = np.asarray(mu, dtype=float)
    up = lambda t, w: np.max(w) - w_max  # noqa: E731
    up.terminal = True
    events = [up]
    if w_min is not None:
        down = lambda t, w: np.max(w) - w_min  # noqa: E731
        down.terminal = True
        events.append(down)
    w0 = np.broadcast_to(np.asarray(alpha, dtype=float), mu.shape).copy()
    return scipy.integrate.solve_ivp(
        l2sam_field(mu, rho, depth), (0.0, t_max), w0, method="Radau", rtol=1e-12,
        atol=1e-14 * np.max(w0), dense_output=True, events=events,
    )  # fmt: skip


def l2sam_switches(mu, alpha, rho, depth, w_max=None):
    r"""(sequence, switch times τ) of j† on :func:`l2sam_field` from the uniform start ``alpha``
    until it escapes (max w = ``w_max``; default 1e6, and 1e100 at L = 2).

    Integrated by scipy's Radau (rtol 1e-12, atol 1e-14 α) on the clock
    :math:`ds=\lVert w\rVert^{L-2}d\tau` (docs/theory.md §5), τ carried along: it turns the
    finite-τ blow-up at L >= 3 into growth without a pole, so scipy reaches w = 1e6 at every
    depth (in τ directly Radau stops short at L = 6 and 8: "step size less than spacing between
    numbers"). L = 2 (s = τ) grows exponentially and is followed to 1e100, for the last,
    GD-like switches. Changes of argmax w by :func:`dense_argmax_changes` in s, returned in τ;
    raises ``RuntimeError`` unless the run escapes.
    """
    mu = np.asarray(mu, dtype=float)
    field = l2sam_field(mu, rho, depth)
    w_max = (1e100 if depth == 2 else 1e6) if w_max is None else w_max

    def f(s, y):
        return np.append(field(s, y[:-1]), 1.0) / np.linalg.norm(y[:-1]) ** (depth - 2)

    up = lambda s, y: np.max(y[:-1]) - w_max  # noqa: E731
    up.terminal = True
    y0 = np.append(np.full(mu.size, float(alpha)), 0.0)
    sol = scipy.integrate.solve_ivp(
        f, (0.0, 1e8), y0, method="Radau", rtol=1e-12, atol=1e-14 * alpha, dense_output=True,
        events=up,
    )  # fmt: skip
    if sol.status != 1 or sol.t_events[0].size != 1:
        raise RuntimeError(f"the reduced flow did not escape: {sol.message}")
    w_part = lambda s: np.asarray(sol.sol(s))[:-1]  # noqa: E731
    seq, s_times = argmax_changes(w_part, step_samples(sol.t), 1e-13 * sol.t[-1])
    return seq, np.array([sol.sol(s)[-1] for s in s_times])


# --- exact ℓ∞-SAM, decoupled --------------------------------------------------------------


def linf_escape_times(mu, alpha, rho, depth, *, w_max=1e5, t_max=1e9):
    r"""The time each coordinate of exact ℓ∞-SAM, balanced across layers, takes to reach
    ``w_max`` (docs/theory.md §11: the coordinates decouple,
    :math:`dw_j/d\tau=\mu_j(w_j-\rho)^{L-1}` while :math:`w_j>0`).

    Each scalar ODE is solved by scipy's DOP853 (rtol 1e-12, atol 1e-14) until w_j = w_max (the
    time it gets there, near its blow-up at L >= 3; or the time where the step falls below the
    resolution of τ on the way, if that comes first), w_j = 0 (it dies: inf) or τ = t_max (inf).
    The first coordinate to reach w_max is the limit direction of the run.
    """
    times = []
    for m, a in zip(np.asarray(mu, float), np.asarray(alpha, float), strict=True):
        up = lambda t, w: w[0] - w_max  # noqa: E731
        up.terminal = True
        dead = lambda t, w: w[0]  # noqa: E731
        dead.terminal = True
        sol = scipy.integrate.solve_ivp(
            lambda t, w, m=m: [m * (w[0] - rho) ** (depth - 1)],
            (0.0, t_max),
            [a],
            method="DOP853",
            rtol=1e-12,
            atol=1e-14,
            events=[up, dead],
        )
        if sol.t_events[0].size:
            times.append(sol.t_events[0][0])
        elif sol.status == -1 and sol.y[0, -1] > 10 * max(a, rho):
            times.append(sol.t[-1])  # the step fell below the resolution of τ: the blow-up
        else:
            times.append(np.inf)
    return np.array(times)
