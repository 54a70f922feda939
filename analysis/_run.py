r"""The pass policy of a single-example run, written once, and its JAX driver.

A run is continued pass after pass until the certificates decide it (docs/theory.md §12–13). The
policy: :func:`begin` (pass 0, the start's own certificates and :math:`j^\dagger(0^+)`),
:func:`thresholds` (each pass's τ budget, collapse threshold and escape level, fixed by the run's
first start), :func:`conclude` (the certificates and :func:`analysis._regime.decide` at a pass's
end) and :func:`finish`. Two drivers run it: :func:`run` here, a ``lax.while_loop`` of
:func:`flows.internal.integrate` passes (jit/vmap-able, every method, any device; :math:`j^\dagger`
read on ``n_grid`` points of each pass's dense output, each change refined by 60 bisection steps:
a change and its return inside one grid interval are not seen), and the numba engine's
(:func:`analysis._drive.drive`, the default wherever the engine runs the method).
"""

import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import check_dense_size, checked_solver_options, integrate, unit_and_norm

from ._certify import (
    bound_of,
    certify,
    decouples,
    invariant_leader,
    keeps_invariant_order,
    never_escapes,
    trapped,
)
from ._dominant import dominant_at, initial_index, log_abs_beta
from ._options import RunOptions
from ._problem import log_growth_rates
from ._regime import COLLAPSE, STALLED, UNDETERMINED, budget, decide, start_atol
from ._xp import namespace

BISECTIONS = 60
SLOTS = 4  # switch slots bisected together (:func:`_track`)
NEEDS = ("path", "direct", "escape", "limit")


def _check_need(need):
    if need not in NEEDS:
        raise ValueError(f"`need` must be 'path', 'direct', 'escape' or 'limit'; got {need!r}.")


def _facts(method, theta, mu, bound):
    """(trapped mask, escaped, leader, settled, stalled) of a state: the certificates of
    :mod:`analysis._certify` that :func:`analysis._regime.decide` reads."""
    trap = trapped(method, theta)
    escaped, leader, settled = certify(theta, mu, bound, trap, decouples(method))
    return trap, escaped, leader, settled, never_escapes(method, theta)


def begin(method, mu, theta0, rates, *, need: str):
    r"""Pass 0 of each run: ``(code, first, leader)``, the regime code that the start ``theta0``
    (..., L, d) alone decides (else -1) and the leader it used (:func:`conclude` at
    :math:`\tau=0`), and :math:`j^\dagger(0^+)` by the tie rule from the log-growth ``rates``
    (..., d) at the start (:func:`start_rates`; None with ``need="escape"``). The policy of both
    drivers, :func:`run` and :func:`analysis._drive.drive` (traceable, and eager NumPy on NumPy
    inputs). See :func:`start_code`."""
    xp = namespace(mu, theta0, rates)
    batch = theta0.shape[:-2]
    target = xp.argmax(mu)
    if need == "escape":  # j† is not tracked; an escape overrides any settled leader
        first = xp.full(batch, target)
    else:
        first = xp.asarray(initial_index(theta0, rates))
    code, leader, _ = conclude(
        method, mu, theta0, theta0, xp.full(batch, flows.Status.OK), lost=xp.zeros(batch, bool),
        other=first != target, first=first, need=need, start=True,
    )  # fmt: skip
    return code, first.astype(int), leader


def start_rates(method, data, theta0, *, need: str, loss: str):
    r"""The log-growth rates at the start that :func:`begin` reads (JAX's field; None with
    ``need="escape"``, where :math:`j^\dagger` is not tracked)."""
    if need == "escape":
        return None
    return log_growth_rates(method, data, loss, True, jnp.asarray(theta0))


def start_code(method, data, theta0, *, need: str = "escape", loss: str = "logistic"):
    r"""The regime code that the start ``theta0`` alone decides, else -1 (traceable).

    :func:`analysis._regime.decide` applied to the certificates of ``theta0`` itself
    (:math:`\tau=0`, status ``ok``, order intact), before any solve: exactly the rule :func:`run`
    applies after each pass, so a point decided here gets the code :func:`run` would give it.
    The certificates are facts about the state, valid for all later times, e.g.

    * exact ℓ∞-SAM at even :math:`L`, every :math:`\alpha_j<\rho`: every coordinate trapped
      (:func:`analysis._certify.trapped`), ``collapse``;
    * exact ℓ∞-SAM at odd :math:`L\ge3`, every :math:`\alpha_j<\rho`: ``stalled``
      (:func:`analysis._certify.never_escapes`);
    * some :math:`\min_l w_{lk}>e` (:func:`analysis.certificate`): escaped, which decides
      ``need="escape"`` (any depth; at :math:`L=1` every start).

    ``need="direct"`` / ``"path"`` also read :math:`j^\dagger(0^+)` (the tie rule of
    :func:`analysis._dominant.initial_index`), as :func:`run` does. The boundary searches
    (:func:`analysis.boundary`) classify such points without integrating, and without
    compiling the batched solver at all when every point of a round is decided here.
    """
    _check_need(need)
    theta0 = jnp.asarray(theta0)
    rates = start_rates(method, data, theta0, need=need, loss=loss)
    return begin(method, data.X[0], theta0, rates, need=need)[0]


def thresholds(options: RunOptions, theta0, theta, bound, mu, spent, level, t1=None):
    r"""``(t1, collapse, escape)`` of the pass from ``theta`` after ``spent`` passes that ran out
    of τ budget and ``level`` that ended at an escape event (traceable, and eager NumPy on NumPy
    inputs; ``theta0`` and ``theta`` (..., L, d), the others one per run).

    * ``t1``: the τ budget :func:`analysis._regime.budget` after ``spent`` such passes (a run
      that lingers gets geometrically longer budgets; a pass that ends at an event does not
      lengthen the next, whose events are then located to the same absolute accuracy); a given
      ``t1`` replaces it;
    * ``collapse``: the threshold relative to this pass's start that is ``collapse_tol``
      relative to the run's FIRST start :math:`\theta_0`: a run collapses where
      :math:`\lVert\theta\rVert\le` ``collapse_tol`` :math:`\lVert\theta_0\rVert`, however
      many passes it took (below 1: a state already there ended the pass before as
      ``collapsed``);
    * ``escape``: the factor, relative to this pass's start, at which the pass stops to check
      the certificates: the norm :math:`e^{k+1}\lVert\theta_0\rVert` (``e`` the escape
      tolerance, ``k`` = ``level``). The levels are fixed by the run's first start, so where a
      pass ends for another reason (its step budget) moves no event: the switch times and
      ``t_end`` depend on the trajectory alone, not on ``max_steps``.
    """
    xp = namespace(theta0, theta, bound, mu, spent, level)
    depth = theta0.shape[-2]
    # the events' norm of each state
    norm = lambda th: unit_and_norm(th, axis=(-2, -1))[1][..., 0, 0]  # noqa: E731
    n0, n = norm(theta0), xp.maximum(norm(theta), np.finfo(float).tiny)
    collapse = xp.minimum(options.collapse_tol * n0 / n, np.nextafter(1.0, 0.0))
    factor = options.escape_factor(depth)
    log_escape = (level + 1) * np.log(factor) + xp.log(n0) - xp.log(n)
    escape = xp.maximum(xp.exp(log_escape), np.nextafter(1.0, 2.0))
    t1 = budget(theta, mu, bound, spent) if t1 is None else xp.asarray(t1, float)
    return t1, collapse, escape


def conclude(method, mu, theta0, theta, status, *, lost, other, first, need, start=False):
    r"""The end of a pass: ``(code, leader, lost)`` of the state ``theta`` (..., L, d) (the policy
    of both drivers: traceable, and eager NumPy on NumPy inputs).

    ``lost`` becomes True once a state that did not collapse breaks the exact flow's order
    (:func:`analysis._certify.keeps_invariant_order`), an order of :math:`\tau>0`: it is not
    asked of the start itself (``start``, pass 0, ``theta`` = ``theta0``), where exact
    ℓ∞-SAM's tied :math:`\alpha_j` are not yet apart; ``code`` is
    :func:`analysis._regime.decide` of the certificates (-1: continue the run); ``leader`` is the
    one ``decide`` used: the certificate's, or the theorem's once the order is lost (-1 if none).
    ``other``: whether :math:`j^\dagger` visited another index than :math:`\arg\max\mu` so far.
    """
    bound = bound_of(method)
    xp = namespace(mu, theta0, theta, status, lost, other, first, bound)
    target = xp.argmax(mu)
    lead = invariant_leader(method, theta0, mu)
    if not start:
        lost = lost | ((status != flows.Status.COLLAPSED) & ~keeps_invariant_order(
            method, theta0, theta, mu))  # fmt: skip
    trap, escaped, leader, settled, stalled = _facts(method, theta, mu, bound)
    code = decide(
        status, escaped=escaped, settled=settled, leader=leader, intact=~lost,
        theorem_leader=lead, visited_other=other, first=first, target=target,
        need="path" if need == "limit" else need, stalled=stalled,
        trapped_all=xp.all(trap, axis=-1),
    )  # fmt: skip
    leader = xp.where(lost, xp.where(escaped, lead, -1), xp.where(settled, leader, -1))
    return xp.asarray(code).astype(int), leader, lost


def finish(code, *, lost, last, lead, track):
    r"""The end of a run: ``(code, last, appended, decided_escape)``. An undecided run is
    ``undetermined``; a run decided by the :math:`q`-order theorem (``lost``) whose observed
    :math:`j^\dagger` does not end on the theorem's leader ``lead`` gets that last change
    appended (``appended``; it happens in the final blow-up, below the resolution of float64:
    its time is NaN); ``decided_escape``: the run ended on a certified escape (its leader
    stands)."""
    xp = namespace(code, lost, last, lead)
    code = xp.where(code < 0, UNDETERMINED, code)
    decided_escape = (code != COLLAPSE) & (code != STALLED) & (code != UNDETERMINED)
    appended = track & lost & decided_escape & (last != lead)
    return code, xp.where(appended, lead, last), appended, decided_escape


def run(
    method,
    data,
    theta0,
    *,
    options: RunOptions,
    need: str = "path",
    t1=None,
):
    r"""Classify one rescaled single-example run from ``theta0`` (traceable).

    Solves with :func:`flows.internal.integrate` (the unchecked run of :func:`flows.solve`: the
    inputs are validated at the public edge of :mod:`analysis`; dense output where
    :math:`j^\dagger` is tracked), pass after pass in a ``lax.while_loop``, each with the
    budget :func:`analysis._regime.budget`, until :func:`analysis._regime.decide` returns a code
    or ``max_passes`` is spent (``undetermined``).

    Arguments:
        method, data, theta0: as for :func:`flows.solve` (``data`` one example, ``theta0``
            balanced for the theorem of :func:`analysis._certify.invariant_leader`; the depth
            :math:`L` is its static ``shape[0]``).
        options: the :class:`analysis.RunOptions` of the run (static): every solve takes
            :meth:`~analysis.RunOptions.solver`, with ``dense`` set where :math:`j^\dagger` is
            tracked and the absolute tolerance of :func:`analysis._regime.start_atol`, taken
            from this (traced) ``theta0`` and kept for every pass.
        need: ``"path"`` (track :math:`j^\dagger`, decide the regime), ``"direct"`` (stop at
            the first visit to another index), ``"escape"`` (stop at the escape certificate;
            :math:`j^\dagger` is not tracked) or ``"limit"`` (decide the regime and the
            settled leader as ``"path"`` does, without tracking :math:`j^\dagger` in between:
            ``sequential`` and ``direct`` then only say whether :math:`j^\dagger(0^+)` was
            already the major index, and ``excursion`` is never reported).

    Returns:
        dict of ``code`` (index into :data:`analysis.REGIMES`), ``first`` / ``last``
        (:math:`j^\dagger` at :math:`\tau=0^+` by the tie rule, and at the end), ``n_switches``,
        ``times`` and ``after`` (``(max_switches,)``: each kept switch's time and new index,
        NaN- and -1-padded; a change decided by the theorem in the final blow-up is counted in
        ``n_switches`` but not stored), ``passes``, ``status`` (of the last solve), ``t_end``,
        ``leader`` (the settled leader of the escape, 0-based; -1 for a collapse, a stalled
        or an undetermined run) and ``t_real`` (the real time at the end, for a rule that
        reads it, an LE-SAM schedule σ(t), whose every pass starts at the real time the last
        one ended, :meth:`flows.AbstractMethod.started_at`; NaN otherwise) and ``theta``,
        the state at the end. ``t1``: a fixed τ budget of every pass instead of
        :func:`analysis._regime.budget`.
    """
    _check_need(need)
    t_pass = t1
    track = need in ("path", "direct")
    loss, max_switches = options.loss, options.max_switches
    theta0 = jnp.asarray(theta0)
    # checked values (RunOptions', and the atol derived from them): not checked again
    solver_options = checked_solver_options(
        options.solver(theta0.shape[0]), dense=track, atol=start_atol(options.atol, theta0)
    )
    check_dense_size(solver_options, method, theta0, True)  # once, not on every pass
    mu = data.X[0]
    target = jnp.argmax(mu)
    bound = bound_of(method)
    lead = invariant_leader(method, theta0, mu)
    # pass 0: the start's own certificates, without integrating
    rates = start_rates(method, data, theta0, need=need, loss=loss)
    code0, first, leader0 = begin(method, mu, theta0, rates, need=need)
    intact = lambda th: keeps_invariant_order(method, theta0, th, mu)  # noqa: E731
    init = dict(
        theta=jnp.asarray(theta0),
        t_end=jnp.zeros(()),
        passes=jnp.zeros((), int),
        level=jnp.zeros((), int),
        spent=jnp.zeros((), int),
        code=code0,
        last=first,
        n=jnp.zeros((), int),
        times=jnp.full(max_switches, jnp.nan),
        after=jnp.full(max_switches, -1),
        other=first != target,
        lost=jnp.asarray(False),
        status=jnp.zeros((), int),
        leader=leader0,
        t_real=jnp.zeros(()),
    )
    scheduled = method.time_dependent

    def body(c):
        t1, collapse, escape = thresholds(
            options, theta0, c["theta"], bound, mu, c["spent"], c["level"], t_pass
        )
        # Under vmap the loop body runs for every lane until the last one is decided and the
        # decided lanes' results are discarded: give them a vanishing budget so that they
        # integrate (almost) nothing. Unvmapped the body never runs for a decided lane.
        t1 = jnp.where(c["code"] >= 0, 1e-12 * t1, t1)
        # a schedule σ(t) is read on the real clock, continued from where the last pass ended
        here = method.started_at(c["t_real"])
        pass_options = checked_solver_options(
            solver_options, collapse_tol=collapse, escape_tol=escape
        )
        traj = integrate(
            here, data, c["theta"], t1=t1, ts=None, rescaled=True, loss=loss, options=pass_options
        )
        out = dict(c)
        if scheduled:
            out["t_real"] = c["t_real"] + traj.t_real_end
        if track:
            out.update(_track(traj, c, intact, target, max_switches, options.n_grid))
        code, leader, lost = conclude(
            method, mu, theta0, traj.theta_end, traj.status, lost=out["lost"],
            other=out["other"], first=first, need=need,
        )  # fmt: skip
        out.update(
            theta=traj.theta_end,
            t_end=c["t_end"] + traj.t_end,
            passes=c["passes"] + 1,
            level=c["level"] + (traj.status == flows.Status.ESCAPED),
            spent=c["spent"] + (traj.status == flows.Status.OK),
            code=code,
            lost=lost,
            status=traj.status,
            leader=leader,
        )
        return out

    more = lambda c: (c["code"] < 0) & (c["passes"] < options.max_passes)  # noqa: E731
    c = jax.lax.while_loop(more, body, init)
    code, last, appended, decided_escape = finish(
        c["code"], lost=c["lost"], last=c["last"], lead=lead, track=track
    )
    return dict(
        code=code,
        first=first,
        last=last,
        n_switches=c["n"] + appended,
        times=c["times"],
        after=c["after"],
        passes=c["passes"],
        status=c["status"],
        t_end=c["t_end"],
        leader=jnp.where(decided_escape, c["leader"], -1),
        t_real=c["t_real"] if scheduled else jnp.full((), jnp.nan),
        theta=c["theta"],
    )


def _track(traj, c, intact, target, max_switches, n_grid):
    """j† on the grid of this solve, the first kept changes refined by bisection; carry updates.

    The order guard reads the same grid states; only the (at most ``max_switches``) changes
    kept are bisected, ``SLOTS`` at a time while any remain, so the cost is ``n_grid`` plus
    ``BISECTIONS * SLOTS`` evaluations per ``SLOTS`` changes (under ``vmap``: those of the
    lane with the most), rather than ``BISECTIONS * max_switches`` every pass: most passes
    hold no change, and few more than ``SLOTS``.
    """
    interp = traj.interpolation
    ts = jnp.linspace(0.0, 1.0, n_grid) * traj.t_end
    thetas = jax.vmap(interp.evaluate)(ts)
    js = dominant_at(thetas).at[0].set(c["last"])
    a, b = js[:-1], js[1:]
    change = a != b
    broken = jax.vmap(lambda th: ~intact(th))(thetas[1:]) & change
    lost_before = c["lost"] | (jnp.cumsum(broken) > 0)  # changes seen after the order broke
    keep = change & ~lost_before
    group = min(SLOTS, max_switches)
    width = -(-max_switches // group) * group  # slots, padded to whole groups
    (idx,) = jnp.nonzero(keep, size=width, fill_value=0)
    valid = jnp.arange(max_switches) < jnp.sum(keep)
    ka, kb = a[idx], b[idx]

    def refine(carry):  # the group of slots from k
        k, lo, hi = carry
        part = lambda x: jax.lax.dynamic_slice_in_dim(x, k, group)  # noqa: E731
        ka_k, kb_k = part(ka)[:, None], part(kb)[:, None]

        def step(_, bracket):  # one bisection step of the group
            lo, hi = bracket
            mid = 0.5 * (lo + hi)
            size = log_abs_beta(jax.vmap(interp.evaluate)(mid))
            behind = jnp.take_along_axis(size, kb_k, 1) < jnp.take_along_axis(size, ka_k, 1)
            return jnp.where(behind[:, 0], mid, lo), jnp.where(behind[:, 0], hi, mid)

        lo_k, hi_k = jax.lax.fori_loop(0, BISECTIONS, step, (part(lo), part(hi)))
        update = jax.lax.dynamic_update_slice_in_dim
        return k + group, update(lo, lo_k, k, 0), update(hi, hi_k, k, 0)

    kept = jnp.minimum(jnp.sum(keep), max_switches)
    _, lo, hi = jax.lax.while_loop(
        lambda carry: carry[0] < kept, refine, (jnp.zeros((), int), ts[idx], ts[idx + 1])
    )
    lo, hi = lo[:max_switches], hi[:max_switches]
    pos = jnp.where(valid, c["n"] + jnp.arange(max_switches), max_switches)
    times = c["times"].at[pos].set(c["t_end"] + 0.5 * (lo + hi), mode="drop")
    after = c["after"].at[pos].set(kb[:max_switches], mode="drop")
    last_kept = jnp.max(jnp.where(keep, jnp.arange(keep.size), -1))
    return dict(
        times=times,
        after=after,
        n=c["n"] + jnp.sum(keep),
        last=jnp.where(last_kept >= 0, b[jnp.maximum(last_kept, 0)], c["last"]),
        other=c["other"] | jnp.any(keep & (b != target)),
        lost=c["lost"] | jnp.any(broken),
    )
