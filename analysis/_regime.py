r"""Regimes of a single-example rescaled flow and their boundaries in :math:`\alpha` (C4).

Everything here is for the example :math:`\{(\mu,+1)\}` and the balanced start
:math:`w^{(l)}(0)=\alpha` (all layers), on the rescaled clock :math:`\tau`
(``flows.solve(..., rescaled=True)``), where the loss only sets the speed.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import flows

from ._dominant import _switches
from ._problem import (
    check_bracket,
    check_count,
    check_depth,
    check_method,
    check_mu,
    check_positive,
    log_growth_rates,
    single_example_problem,
)

REGIMES = ("collapse", "sequential", "direct", "minor", "undetermined")


class RegimePath(NamedTuple):
    """Result of :func:`regime_path`."""

    regime: str  # one of REGIMES
    sequence: list  # j† values visited, in order (0-based)
    times: np.ndarray  # the switch times (τ), one fewer than len(sequence)
    monotone: bool  # μ strictly increases along `sequence`
    status: str  # status of the last solve
    t_end: float  # τ at the end of the last solve (restarts add up)
    loss_end: float  # loss at the end
    restarts: int  # solves continued after an escape, until j† settled


def _default_t1(mu) -> float:
    # Rates are O(μ): 1000/min μ is far longer than any escape, collapse or the
    # log(1/|α-α_c|)/λ spent near a saddle at 1e-16 relative distance.
    return 1e3 / float(np.min(mu))


def regime_path(
    method,
    mu,
    alpha,
    depth: int = 2,
    *,
    t1=None,
    max_steps: int = 100_000,
    collapse_tol: float = 1e-6,
    escape_tol: float = 1e6,
    max_restarts: int = 20,
    loss: str = "logistic",
    rtol: float = 1e-8,
    atol: float = 1e-10,
) -> RegimePath:
    r"""Classify the flow from :math:`w^{(l)}(0)=\alpha` and give the path of :math:`j^\dagger`.

    Definitions (``j† = argmax_j |β_j|``, tie rule of :func:`analysis.dominant_index`;
    :math:`j^*=\arg\max\mu`):

    * **collapse**: the solve ends with status ``collapsed``,
      :math:`\lVert\theta\rVert\le` ``collapse_tol`` :math:`\cdot\lVert\theta_0\rVert`, so
      :math:`\beta\approx0` and the loss is :math:`\approx\ell(0)>0` (reported as ``loss_end``);
    * the flow **escapes** when it ends with status ``escaped``,
      :math:`\lVert\theta\rVert\ge` ``escape_tol`` :math:`\cdot\lVert\theta_0\rVert`. It is then
      continued from the end state (each restart another factor ``escape_tol``) until
      :math:`j^\dagger` is *settled*: the leader :math:`k=j^\dagger` has the largest log-growth
      rate :math:`r_k=\max_j r_j>0` (:class:`analysis.Problem`). For GD and for ℓ2-SAM at
      :math:`L=2` this certifies that :math:`k` leads forever (there
      :math:`r_d-r_j=2(\mu_d-\mu_j)(1-\rho(\mu_d+\mu_j)/(\sqrt2\lVert\mu\odot w\rVert))` and
      :math:`\lVert\mu\odot w\rVert` increases); for other methods it is the same test at a
      norm where the perturbation is :math:`10^{-6}` of the weights;
    * **sequential**: escapes, settles on :math:`j^*`, and the sequence of :math:`j^\dagger`
      values contains at least one index other than :math:`j^*`;
    * **direct**: escapes and :math:`j^\dagger=j^*` throughout;
    * **minor**: escapes and settles on an index other than :math:`j^*` (ℓ∞-SAM with a
      non-uniform :math:`\alpha`, claim C2);
    * **undetermined**: none of the above within ``t1`` / ``max_steps`` /
      ``max_restarts`` (e.g. ℓ∞-SAM at :math:`L=3` with :math:`\alpha<\rho` stalls at
      :math:`w=\rho`), or a solver failure.

    The switch times are located on the dense output (:func:`analysis.switch_times`).

    Arguments:
        method: a flows method; its ρ (or σ) is the one used.
        mu: the example, shape ``(d,)``, positive, unique largest entry.
        alpha: initial scale, > 0, scalar or shape ``(d,)``.
        depth: number of layers :math:`L`.
        t1: τ budget per solve; default :math:`1000/\min\mu`.
        max_steps, collapse_tol, escape_tol, loss, rtol, atol: passed to :func:`flows.solve`.
        max_restarts: continuations allowed after the first escape.

    >>> import flows, analysis
    >>> r = analysis.regime_path(flows.L2SAM(1.0), [1.0, 2.0, 3.0, 4.0, 5.0], 0.6)
    >>> r.regime, r.sequence
    ('sequential', [2, 3, 4])
    """
    mu = check_mu(mu)
    t1 = _default_t1(mu) if t1 is None else check_positive("t1", t1)
    check_count("max_restarts", max_restarts, 0)
    options = dict(
        t1=t1,
        max_steps=max_steps,
        collapse_tol=collapse_tol,
        escape_tol=escape_tol,
        loss=loss,
        rtol=rtol,
        atol=atol,
    )
    problem = single_example_problem(method, mu, alpha, depth, **options)
    sequence, times, offset, restarts = None, [], 0.0, 0
    while True:
        traj = problem.solve()
        sw = _switches(traj, problem.rates(problem.theta0))
        if sequence is None:
            sequence = [sw.initial]
        sequence += [int(b) for b in sw.after if b != sequence[-1]]
        times += [offset + float(t) for t in sw.times]
        offset += float(traj.t_end)
        status = str(traj.status_name)
        theta_end = np.asarray(traj.theta_end)
        if status != "escaped":
            break
        rates = problem.rates(theta_end)
        if (rates[sw.final] >= np.max(rates) and rates[sw.final] > 0) or restarts >= max_restarts:
            settled = rates[sw.final] >= np.max(rates) and rates[sw.final] > 0
            break
        problem = problem.restart(theta_end)
        restarts += 1
    loss_end = float(flows.objective(theta_end, problem.data, loss))
    target = int(np.argmax(mu))
    if status == "collapsed":
        name = "collapse"
    elif status != "escaped" or not settled:
        name = "undetermined"
    elif sequence[-1] != target:
        name = "minor"
    else:
        name = "sequential" if any(j != target for j in sequence) else "direct"
    monotone = bool(np.all(np.diff(mu[sequence]) > 0))
    return RegimePath(name, sequence, np.array(times), monotone, status, offset, loss_end, restarts)


def regime(method, mu, alpha, depth: int = 2, **kwargs) -> str:
    r"""``"collapse"``, ``"sequential"`` or ``"direct"`` (or ``"minor"``/``"undetermined"``).

    The rescaled single-example flow from the balanced start :math:`w^{(l)}(0)=\alpha`
    is classified by the precise definitions of :func:`regime_path` (which also
    returns the sequence of dominant indices and the switch times): collapse means
    status ``collapsed`` (the origin is reached, the loss stays at :math:`\ell(0)`);
    sequential means :math:`j^\dagger` visits an index other than :math:`\arg\max\mu`
    before settling on it; direct means it never does.

    Arguments:
        method, mu, alpha, depth: as in :func:`regime_path`.
        kwargs: the solver options of :func:`regime_path`.

    >>> import flows, analysis
    >>> [analysis.regime(flows.L2SAM(1.0), [1.0, 2.0, 3.0], a) for a in (0.1, 0.6, 2.0)]
    ['collapse', 'sequential', 'direct']
    """
    return regime_path(method, mu, alpha, depth, **kwargs).regime


# --- boundaries by vectorised multisection ------------------------------------------


@eqx.filter_jit
def _batch(method, data, alphas, t_grids, depth, t1, options):
    """vmapped over α: (status, t_end, whether j† ≠ argmax μ at τ=0⁺ or on a saving grid).

    The grid has ``n_grid`` points on ``[0, t_grid]``; j†(0⁺) uses the tie rule (the
    fastest log-growth rate among the tied |β_j(0)|), computed from the vector field.
    """
    target = jnp.argmax(data.X[0])
    opts = dict(options)
    n_grid = opts.pop("n_grid")

    def one(alpha, t_grid):
        theta0 = flows.balanced_init(alpha, depth, data.d)
        ts = jnp.linspace(0.0, 1.0, n_grid) * t_grid
        traj = flows.solve(method, data, theta0, t1=t1, ts=ts, rescaled=True, **opts)
        rates = log_growth_rates(method, data, opts["loss"], True, theta0)
        b0 = jnp.abs(flows.beta(theta0))
        j0 = jnp.argmax(jnp.where(b0 == jnp.max(b0), rates, -jnp.inf))
        js = jnp.argmax(jnp.abs(traj.beta), axis=-1)
        other = jnp.any(traj.reached[1:] & (js[1:] != target)) | (j0 != target)
        return traj.status, traj.t_end, other

    return jax.vmap(one)(alphas, t_grids)


COLLAPSE, VIA_OTHER, DIRECT, UNCLEAR = 0, 1, 2, -1


def _classify(method, data, depth, alphas, *, t1, options, grid):
    """Per α: COLLAPSE, VIA_OTHER (escapes, j† ≠ argmax μ somewhere), DIRECT, or UNCLEAR.

    With ``grid`` a second vmapped pass saves each run on 2001 points of its own
    ``[0, t_end]``, to see interior excursions of j†; without it only statuses count.
    Both passes have the same static configuration, so one compilation serves both
    boundaries.
    """
    alphas = jnp.asarray(alphas, dtype=jnp.float64)
    opts = tuple(sorted({**options, "n_grid": 2001}.items()))
    t1 = jnp.asarray(t1, dtype=jnp.float64)  # traced: no recompilation per t1
    status, t_end, other = _batch(method, data, alphas, jnp.full(alphas.shape, t1), depth, t1, opts)
    if grid:
        status, _, other = _batch(method, data, alphas, t_end, depth, t1, opts)
    status, other = np.asarray(status), np.asarray(other)
    out = np.full(status.shape, UNCLEAR)
    out[status == flows.Status.COLLAPSED] = COLLAPSE
    esc = status == flows.Status.ESCAPED
    out[esc & other] = VIA_OTHER
    out[esc & ~other] = DIRECT
    return out, status


class Boundary(NamedTuple):
    """Result of :func:`critical_alpha` / :func:`direct_alpha` with ``full_output=True``."""

    alpha: float  # midpoint of the final bracket
    bracket: tuple  # (lo, hi), hi - lo <= rtol * lo
    rounds: int  # vmapped multisection rounds
    solves: int  # flows.solve calls in all


def _scale(method) -> float:
    for name in ("rho", "rho_max", "sigma"):
        value = getattr(method, name, None)
        if value is not None and not callable(value) and float(value) > 0:
            return float(value)
    return 1.0


def _boundary(method, mu, depth, *, below, rtol, points, bracket, scan, t1, solver, grid, what):
    """Vectorised multisection for the α where ``below(class)`` flips from True to False."""
    mu = check_mu(mu)
    method = check_method(method)
    depth = check_depth(depth)
    rtol = check_positive("rtol", rtol, upper=0.1)
    points = check_count("points", points)
    scan = check_count("scan", scan)
    t1 = _default_t1(mu) if t1 is None else check_positive("t1", t1)
    data = flows.single_example(mu)
    scale = _scale(method)

    def flags(alphas):
        cls, status = _classify(method, data, depth, alphas, t1=t1, options=solver, grid=grid)
        if np.any(cls == UNCLEAR):
            k = int(np.argmax(cls == UNCLEAR))
            raise RuntimeError(
                f"{what}: the run at alpha = {alphas[k]:.6g} ended with status "
                f"{flows.Status.name(status[k])!r}, neither collapse nor escape; increase `t1` "
                "or `max_steps`, or pass a `bracket`."
            )
        return below(cls)

    if bracket is None:  # the same shape as a round, so one compilation serves both
        # Offset by 1/π octave so that no scan point sits on a simple ratio such as
        # α = ρ, where ℓ∞-SAM at L = 2 has an equilibrium (neither collapse nor escape).
        alphas = scale * 2.0 ** (np.linspace(-scan, scan, points) + 1 / np.pi)
        where = f"on the scan alpha = {scale:g} * 2**k, |k| <= {scan}"
    else:
        lo, hi = check_bracket(bracket)
        alphas, where = np.array([lo, hi]), "between the ends of `bracket`"
    lo, hi = _change(alphas, flags(alphas), what, where)
    solves, rounds = alphas.size, 0
    while hi - lo > rtol * lo:
        inner = lo + (hi - lo) * np.arange(1, points + 1) / (points + 1)
        lo, hi = _change(
            np.r_[lo, inner, hi],
            np.r_[True, flags(inner), False],
            what,
            "inside the bracket (non-monotone classification)",
        )
        solves, rounds = solves + points, rounds + 1
    return Boundary(0.5 * (lo + hi), (lo, hi), rounds, solves)


def _change(alphas, flags, what, where):
    """The adjacent pair where ``flags`` goes True -> False; there must be exactly one."""
    flags = np.asarray(flags, dtype=bool)
    changes = np.flatnonzero(flags[:-1] != flags[1:])
    if not flags[0] or flags[-1] or changes.size != 1:
        raise RuntimeError(
            f"{what}: no single boundary {where} (below-flags {flags.astype(int)} "
            f"at alpha = {np.array2string(np.asarray(alphas), precision=6)})."
        )
    k = int(changes[0])
    return float(alphas[k]), float(alphas[k + 1])


def _search(
    method,
    mu,
    depth,
    *,
    kind,
    rtol: float = 1e-8,
    points: int = 17,
    bracket=None,
    scan: int = 8,
    t1=None,
    max_steps: int = 100_000,
    collapse_tol: float = 1e-6,
    escape_tol: float = 1e6,
    loss: str = "logistic",
    solver_rtol: float = 1e-11,
    solver_atol: float = 1e-16,
    full_output: bool = False,
):
    """The keyword options of :func:`critical_alpha` and :func:`direct_alpha`, in one place."""
    solver = dict(
        max_steps=check_count("max_steps", max_steps),
        collapse_tol=collapse_tol,
        escape_tol=escape_tol,
        loss=loss,
        rtol=check_positive("solver_rtol", solver_rtol, upper=1.0),
        atol=check_positive("solver_atol", solver_atol),
    )
    below = {"critical_alpha": lambda c: c == COLLAPSE, "direct_alpha": lambda c: c != DIRECT}
    out = _boundary(
        method,
        mu,
        depth,
        below=below[kind],
        rtol=rtol,
        points=points,
        bracket=bracket,
        scan=scan,
        t1=t1,
        solver=solver,
        grid=kind == "direct_alpha",
        what=kind,
    )
    return out if full_output else out.alpha


def critical_alpha(method, mu, depth: int = 2, **options):
    r"""Collapse/escape boundary :math:`\alpha_c`: collapse below :math:`\alpha_c`, escape above.

    The rescaled single-example flow from :math:`w^{(l)}(0)=\alpha\mathbf 1` (scalar
    :math:`\alpha`) is classified by its status: ``collapsed``
    (:math:`\lVert\theta\rVert\le10^{-6}\lVert\theta_0\rVert`) or ``escaped``
    (:math:`\lVert\theta\rVert\ge10^{6}\lVert\theta_0\rVert`). Both thresholds are relative, so the
    classification is scale invariant, and each is unambiguous: a run near
    :math:`\alpha_c` lingers near a saddle for :math:`O(\log(1/|\alpha-\alpha_c|))`, far inside
    the default budget :math:`t_1=1000/\min\mu`; a run that ends otherwise raises
    ``RuntimeError`` rather than guess.

    Bracket: by default the scan of ``points`` values :math:`\alpha=s\,2^k`, with
    :math:`k` equispaced in ``[-scan, scan]`` plus :math:`1/\pi` and :math:`s=\rho`
    (``rho_max`` for LE-SAM), in one vmapped solve; it must show one
    collapse-to-escape change. Then each round solves ``points`` equispaced values
    inside the bracket in one ``jax.vmap`` call and keeps the sub-interval where the
    class changes, until :math:`(\text{hi}-\text{lo})\le` ``rtol`` :math:`\cdot\,\text{lo}`.
    The solver runs at ``solver_rtol`` and ``solver_atol``, tighter than ``rtol``,
    since the boundary is a separatrix and solver error moves it.

    For ℓ2-SAM at :math:`L=2` the result lies strictly between the sympy bounds of
    :func:`analysis.l2sam_thresholds`; for :math:`d=1` it is exactly :math:`\rho/\sqrt2`.

    Arguments:
        method: a flows method (ℓ2-SAM, ℓ∞-SAM, LE-SAM; GD never collapses).
        mu: the example, shape ``(d,)``.
        depth: number of layers.
        options: keywords, with defaults
            ``rtol=1e-8``: relative width of the final bracket;
            ``points=17``: α values per vmapped round (and in the scan);
            ``bracket=None``: ``(lo, hi)``, lo collapsing and hi escaping, instead of the scan;
            ``scan=8``: half-width of the default scan in powers of two;
            ``t1=None`` (:math:`1000/\min\mu`), ``max_steps=100_000``, ``collapse_tol=1e-6``,
            ``escape_tol=1e6``, ``loss="logistic"``: passed to :func:`flows.solve`;
            ``solver_rtol=1e-11``, ``solver_atol=1e-16``: its tolerances (static: one
            compilation serves every round and both boundaries);
            ``full_output=False``: return a :class:`Boundary` (bracket, rounds, solves)
            instead of a float.

    >>> import flows, analysis
    >>> round(analysis.critical_alpha(flows.L2SAM(1.0), [2.0]), 8)  # d = 1: ρ/√2
    0.70710678
    """
    return _search(method, mu, depth, kind="critical_alpha", **options)


def direct_alpha(method, mu, depth: int = 2, **options):
    r"""Sequential/direct boundary :math:`\alpha_s`: direct above, sequential (or collapse) below.

    A run is *direct* when it escapes and :math:`j^\dagger=\arg\max\mu` at :math:`\tau=0^+`
    (the tie rule: the fastest log-growth rate from the vector field) and at every
    point of a 2001-point grid on its own :math:`[0,\tau_{end}]` (second vmapped pass);
    otherwise (collapse, or any other index leads at some time) it is not. The
    boundary is then found by the same vectorised multisection as
    :func:`critical_alpha`. Near the boundary the excursion of :math:`j^\dagger` shrinks
    to :math:`\tau\to0^+`, where the rate test resolves it to float64 precision; an
    excursion that vanishes at an interior time is only resolved by the grid.

    For ℓ2-SAM at :math:`L=2` the boundary is exactly
    :math:`\rho(\mu_{(d)}+\mu_{(d-1)})/(\sqrt2\lVert\mu\rVert)` (:func:`analysis.l2sam_thresholds`).

    Arguments: as in :func:`critical_alpha` (``bracket``: lo not direct, hi direct).

    >>> import flows, analysis
    >>> round(analysis.direct_alpha(flows.L2SAM(1.0), [3.0, 4.0], rtol=1e-6), 5)  # 7/(5√2)
    0.98995
    """
    if check_mu(mu).shape[0] < 2:
        raise ValueError("`mu` must have d >= 2 entries: with d = 1 every escape is direct.")
    return _search(method, mu, depth, kind="direct_alpha", **options)
