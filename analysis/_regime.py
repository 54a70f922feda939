r"""Regimes of a single-example rescaled flow: one table, one per-run classification (C4).

Everything here is for the example :math:`\{(\mu,+1)\}` and the balanced start
:math:`w^{(l)}(0)=\alpha` (all layers), on the rescaled clock :math:`\tau`
(``flows.solve(..., rescaled=True)``), where the loss only sets the speed. When a run is
decided (escape, settled leader) is proven at every depth in :func:`analysis.certificate`.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import unit_and_norm

from ._certify import (
    bound_of,
    certify,
    decouples,
    invariant_leader,
    keeps_invariant_order,
    never_escapes,
    time_scale,
    trapped,
)
from ._dominant import _switches
from ._inputs import (
    check_depth,
    check_kind,
    check_positive,
    single_example_problem,
)
from ._options import run_options

#: The regime names, indexed by the integer codes of :func:`regime_code` (one table). Codes
#: 0-5 are those of earlier versions (files on disk hold them); ``excursion`` was added last.
REGIMES = ("collapse", "sequential", "direct", "minor", "stalled", "undetermined", "excursion")
COLLAPSE, SEQUENTIAL, DIRECT, MINOR, STALLED, UNDETERMINED, EXCURSION = range(len(REGIMES))

#: τ budget of one solve, in units of :func:`analysis._certify.time_scale` (the field's own
#: time unit, 1/min μ at L = 2), times ``T_GROWTH`` to the number of continuations: a run that
#: lingers near the degenerate saddle at L >= 3, where the time spent grows as a power of
#: 1/|α/α_c - 1| and the motion slows down as a power of τ, gets geometrically longer budgets.
T_FACTOR = 1e6
T_GROWTH = 10.0
#: The largest τ budget: a time unit near float64's range (μ near its smallest normal,
#: or s^(2-L) at small s) would otherwise make the budget infinite.
T_MAX = 1e300

#: The default absolute tolerance of every solve of a run, relative to the run's FIRST start:
#: :math:`\mathrm{atol}=` ``ATOL_REL`` :math:`\cdot\max|\theta_0|` (:func:`start_atol`),
#: at least float64's smallest normal number.
ATOL_REL = 1e-150


def start_atol(atol, theta0):
    r"""The absolute tolerance of every solve of one run from ``theta0`` (its first start).

    ``atol=None`` (the default of the analysis layer): :math:`10^{-150}\max|\theta_0|`
    (``ATOL_REL``), at least the smallest normal float64 :math:`2.2\cdot10^{-308}`. It is
    relative so that the scale twins :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)`
    of the rescaled flow are solved alike at every magnitude, and this small so that the error
    control stays relative (``rtol``) for every weight of the run: the minor weights decay
    exponentially during a plateau (to :math:`10^{-73}\max|\theta_0|` and below), and where
    they fall under ``atol`` their growth rates, hence the switch times, are no longer
    resolved (an absolute part of :math:`10^{-30}\max|\theta_0|` moved a switch time by
    :math:`\Delta\tau=1.1` at :math:`\tau\approx69`). It is taken from the run's first
    start and kept for every continuation: taken from each pass's start it would loosen a
    million-fold after an escape.
    A float64 JAX array (traceable, one compilation for every value; ``theta0`` is validated
    upstream, finite with a positive entry). A number (absolute, the same at every scale) or
    ``"auto"`` (:meth:`flows.SolverOptions.atol_for`, relative to each solve's own start) is
    returned as given.
    """
    if atol is not None:
        return atol
    scale = jnp.max(jnp.abs(jnp.asarray(theta0, dtype=jnp.float64)))
    return jnp.maximum(ATOL_REL * scale, np.finfo(np.float64).tiny)


def budget(theta, mu, bound, restarts):
    """The default τ budget of a solve started from ``theta`` after ``restarts`` continuations:
    ``T_FACTOR * T_GROWTH**restarts`` time units :func:`analysis._certify.time_scale`.

    At most ``T_MAX`` (finite where the time unit overflows)."""
    return jnp.minimum(T_FACTOR * T_GROWTH**restarts * time_scale(theta, mu, bound), T_MAX)


def regime_code(collapsed, settled, leader, visited_other, target, first):
    r"""The regime code (an index into :data:`REGIMES`) of one run from its decided facts.

    With :math:`j^\dagger(0^+)=` ``first`` (the tie rule of :func:`analysis.dominant_index`) and
    ``target`` :math:`=\arg\max\mu`:

    * ``collapse``: the run collapsed (status ``collapsed``: the origin is reached and the
      loss stays at :math:`\ell(0)`);
    * ``direct``: it escaped, :math:`j^\dagger` is settled on ``target`` and never visited
      another index;
    * ``sequential``: settled on ``target`` after starting on another index,
      :math:`j^\dagger(0^+)\ne\arg\max\mu` (minor first, major last);
    * ``excursion``: settled on ``target`` after starting on it, :math:`j^\dagger(0^+)=\arg\max\mu`,
      and visiting another index in between (ℓ2-SAM at odd :math:`L` from a small start:
      5 → 4 → 5; the major coordinate leads first, so it is not minor first);
    * ``minor``: settled on another index (a minor feature wins, e.g. ℓ∞-SAM, claim C2);
    * ``stalled``: certified never to escape nor reach the origin (ℓ∞-SAM at odd :math:`L` with
      every :math:`\alpha_j<\rho`: each weight creeps up to the equilibrium :math:`\rho`;
      :func:`analysis._certify.never_escapes`), set by :func:`decide`;
    * ``undetermined``: neither a collapse nor a settled escape within the budget.

    ``visited_other`` is whether :math:`j^\dagger` was ever another index than ``target``
    (``first`` included). Traceable (``jnp.where``), so batches classify with the same rule.

    >>> import analysis
    >>> [analysis.REGIMES[int(analysis.regime_code(c, s, 2, v, 2, f))]
    ...  for c, s, v, f in ((True, False, False, 2), (False, True, True, 0),
    ...                     (False, True, False, 2), (False, True, True, 2))]
    ['collapse', 'sequential', 'direct', 'excursion']
    >>> analysis.REGIMES[int(analysis.regime_code(False, True, 0, True, 2, 0))]
    'minor'
    """
    for name, value, kinds in (
        ("collapsed", collapsed, "b"),
        ("settled", settled, "b"),
        ("leader", leader, "iu"),
        ("visited_other", visited_other, "b"),
        ("target", target, "iu"),
        ("first", first, "iu"),
    ):
        check_kind(name, value, kinds)
    on_target = jnp.where(first != target, SEQUENTIAL, jnp.where(visited_other, EXCURSION, DIRECT))
    escaped = jnp.where(leader != target, MINOR, on_target)
    return jnp.where(collapsed, COLLAPSE, jnp.where(settled, escaped, UNDETERMINED))


def decide(
    status,
    *,
    escaped,
    settled,
    leader,
    intact,
    theorem_leader,
    visited_other,
    first,
    target,
    need,
    stalled=False,
    trapped_all=False,
):
    r"""The regime code of a run once its facts decide it, else -1 (continue the run).

    One rule, traceable, for :func:`regime_path` and the phase diagrams (``need="path"``) and the
    boundary searches (``need="escape"``: an escape certificate is enough; ``need="direct"``: a
    visit to another index is enough). In order of precedence:

    1. status ``collapsed``, or every coordinate trapped (``trapped_all``:
       :func:`analysis._certify.trapped`, exact ℓ∞-SAM at even :math:`L` with every
       :math:`|w_{lj}|<\rho`, where every layer shrinks to 0 in finite time; a solve restarted
       from such a state cannot see the collapse relative to its own tiny start): ``collapse``;
    2. status ``sigma_negative`` (a schedule with no budget left): ``undetermined``;
    3. ``stalled`` (:func:`analysis._certify.never_escapes`): ``stalled``;
    4. the shortcut of ``need`` (reported as ``sequential``: escaped, or not direct);
    5. a state that has lost the exact flow's order (``intact`` False, from
       :func:`analysis._certify.keeps_invariant_order`) takes the leader of the theorem
       (``theorem_leader`` >= 0, :func:`analysis._certify.invariant_leader`) once the escape is
       certified, and is otherwise continued (a collapse does not depend on the order);
    6. ``settled`` (:func:`analysis.certificate`): :func:`regime_code` of ``leader``, with
       ``visited_other`` and ``first`` (:math:`j^\dagger(0^+)`) as tracked so far.

    Status ``nonfinite`` (a solver failure) is ``undetermined`` unless 3.–6. decide the run from
    its last finite state (the certificates bound the perturbation by :math:`e` whatever the
    rule reads later, e.g. a schedule that turns NaN).
    A solve that spent its time or step budget (``ok``, ``max_steps``: e.g. the stiff approach
    to the origin at even :math:`L\ge4`, where the normalised perturbation turns as
    :math:`\rho/\lVert w\rVert`) or stopped at its escape threshold is continued.
    """
    code_of = lambda k: regime_code(False, True, k, visited_other, target, first)  # noqa: E731
    by_theorem = jnp.where(escaped & (theorem_leader >= 0), code_of(theorem_leader), -1)
    code = jnp.where(intact, jnp.where(settled, code_of(leader), -1), by_theorem)
    if need == "escape":
        code = jnp.where(escaped, SEQUENTIAL, code)
    elif need == "direct":
        code = jnp.where(visited_other, SEQUENTIAL, code)
    code = jnp.where(stalled, STALLED, code)
    # a solver failure ends a run undecided only where the facts of its last (finite) state do
    # not decide it: they hold for all later times whatever the perturbation does within its
    # bound e (docs/theory.md §12), e.g. a schedule σ(t) that is NaN later on
    code = jnp.where((status == flows.Status.NONFINITE) & (code < 0), UNDETERMINED, code)
    code = jnp.where(status == flows.Status.SIGMA_NEGATIVE, UNDETERMINED, code)
    return jnp.where((status == flows.Status.COLLAPSED) | trapped_all, COLLAPSE, code)


class RegimePath(NamedTuple):
    """Result of :func:`regime_path`."""

    regime: str  # one of REGIMES
    sequence: list  # every j† visited, in order (0-based), returns included
    times: np.ndarray  # the switch times (τ), len(sequence) - 1 of them
    monotone: bool  # μ strictly increases along `sequence`
    status: str  # status of the last solve
    t_end: float  # τ at the end of the last solve (continuations add up)
    loss_end: float  # loss at the end
    restarts: int  # solves continued from where the previous one stopped


def regime_path(
    method,
    mu,
    alpha,
    depth: int = 2,
    *,
    t1=None,
    options=None,
    **overrides,
) -> RegimePath:
    r"""Classify the flow from :math:`w^{(l)}(0)=\alpha` and give the path of :math:`j^\dagger`.

    :math:`j^\dagger=\arg\max_j|\beta_j|`, with the tie rule of :func:`analysis.dominant_index`
    at :math:`\tau=0` (the fastest-growing tied index). The run is solved by
    :func:`flows.solve` with dense output (switch times located by root finding, as in
    :func:`analysis.switch_times`) and continued from where each solve stops until it is
    decided:

    * it **collapses** when a solve ends with status ``collapsed``
      (:math:`\lVert\theta\rVert\le` ``collapse_tol`` times the norm at the run's start,
      however many passes it took);
    * it is **settled** when the state passes :func:`analysis.certificate`: the loss tends to
      0 and the leader provably leads :math:`|\beta|` for all later :math:`\tau` (proven at
      every depth by comparison with GD solutions; at :math:`L\ge3` it decides the
      finite-:math:`\tau` blow-up, which the first coordinate to blow up wins).

    Near the degenerate saddle at :math:`L\ge3` the coordinates can agree to below double
    precision. For GD, ℓ2-SAM and LE-SAM the exact flow keeps the order of
    :math:`q_j=\mu_jw_j^{L-2}` (docs/theory.md §10): a change of :math:`j^\dagger` seen in a state
    that breaks it is rounding and is dropped, and once the escape is certified the limit is
    the theorem's :math:`\arg\max_j\mu_j\alpha_j^{L-2}`
    (:func:`analysis._certify.invariant_leader`); if the observed sequence does not end there,
    that last change is appended with time NaN (it happens in the final blow-up, below the
    resolution of float64).

    Each solve (a *pass*) stops as :class:`analysis.RunOptions` says, or at ``t1`` (default
    :func:`budget`), and is then continued if undecided. A schedule σ(t) (LE-SAM) is read at the
    real time: each solve carries it from its start, and the next starts from where it ended
    (:meth:`flows.AbstractMethod.started_at`, docs/theory.md §5); a solve that meets
    σ(t) < 0 stops with status ``sigma_negative`` and the run is ``undetermined``. The regime
    is :func:`decide` of the facts. A run still undecided after ``max_passes`` passes is
    ``undetermined``, never guessed. The default absolute tolerance is far below any weight on
    purpose: a coordinate that decays near a saddle by many orders of magnitude sets, through
    its logarithm, when it grows back; an absolute tolerance near its size would misplace the
    later switches (e.g. 43.08 instead of 46.15 at 1.001 α_c with ``atol=1e-10``).

    Arguments:
        method: GD, L2SAM, LinfSAM or LESAM; its ρ (or σ) is the one used.
        mu: the example, shape ``(d,)``, positive, unique largest entry.
        alpha: initial scale, > 0, scalar or shape ``(d,)``.
        depth: number of layers :math:`L`.
        t1: τ budget per pass (default above).
        options: an :class:`analysis.RunOptions` (default: its defaults); its ``n_grid`` and
            ``max_switches`` are not used here (every solver step is read, and every switch
            kept).
        overrides: fields of :class:`analysis.RunOptions` as keywords (``max_steps=...``),
            applied to ``options``.

    Returns:
        :class:`RegimePath`: ``sequence`` lists every change of :math:`j^\dagger`, returns to an
        earlier index included, and ``times`` has one entry per change.

    >>> import flows, analysis
    >>> r = analysis.regime_path(flows.GD(), [1.0, 2.0, 3.0], 0.5, depth=3)
    >>> r.regime, r.sequence  # dw_j/dτ = μ_j w_j²: argmax μ leads from τ = 0⁺ and blows up first
    ('direct', [2])
    """
    depth = check_depth(depth)
    opts = run_options(options, overrides)
    if t1 is not None:
        t1 = check_positive("t1", t1)
    problem = single_example_problem(
        method, mu, alpha, depth, t1=1.0, loss=opts.loss, options=opts.solver(depth)
    )
    problem = problem.restart(problem.theta0, atol=start_atol(opts.atol, problem.theta0))
    loss = opts.loss
    mu = np.asarray(problem.data.X[0])
    bound = bound_of(problem.method)
    target = int(np.argmax(mu))
    theta = theta0 = np.asarray(problem.theta0)
    lead = int(invariant_leader(problem.method, theta0, mu))
    intact = lambda th: bool(keeps_invariant_order(problem.method, theta0, th, mu))  # noqa: E731
    sequence, times, offset, restarts, lost = None, [], 0.0, 0, False
    schedule, t_real = problem.method, 0.0  # a schedule σ(t) is read on the real clock
    while True:
        t1_here = float(budget(theta, mu, bound, restarts)) if t1 is None else t1
        problem = problem.restart(
            theta,
            method=schedule.started_at(t_real),
            t1=t1_here,
            collapse_tol=_pass_collapse_tol(opts.collapse_tol, theta0, theta),
        )
        traj = problem.solve()
        if schedule.time_dependent:  # carried by the solve, from this pass's start
            t_real += float(traj.t_real_end)
        sw = _switches(traj, problem.rates(theta))
        if sequence is None:
            sequence = [sw.initial]
        elif sw.initial != sequence[-1] and not lost:  # a change exactly at the continuation
            sequence.append(sw.initial)
            times.append(offset)
        for t, b in zip(sw.times, sw.after, strict=True):
            # A change seen in a state that has lost the exact flow's order is rounding.
            lost = lost or not intact(np.asarray(traj.evaluate(t)))
            if int(b) != sequence[-1] and not lost:
                sequence.append(int(b))
                times.append(offset + float(t))
        offset += float(traj.t_end)
        theta = np.asarray(traj.theta_end)
        trap = trapped(problem.method, theta)
        escaped, leader, settled = (
            np.asarray(x) for x in certify(theta, mu, bound, trap, decouples(problem.method))
        )
        lost = lost or (traj.status != flows.Status.COLLAPSED and not intact(theta))
        code = int(
            decide(
                int(traj.status),
                escaped=bool(escaped),
                settled=bool(settled),
                leader=int(leader),
                intact=not lost,
                theorem_leader=lead,
                visited_other=any(j != target for j in sequence),
                first=sequence[0],
                target=target,
                need="path",
                stalled=bool(never_escapes(problem.method, theta)),
                trapped_all=bool(np.all(trap)),
            )
        )
        if code >= 0 or restarts + 1 >= opts.max_passes:
            break
        restarts += 1
    if code < 0:
        code = UNDETERMINED
    elif lost and code not in (COLLAPSE, STALLED) and sequence[-1] != lead:
        # Decided by the q-order theorem: the last change, to `lead`, happens in the final
        # blow-up, below the resolution of float64; its time is reported as NaN.
        sequence.append(lead)
        times.append(np.nan)
    loss_end = float(flows.objective(theta, problem.data, loss))
    monotone = bool(np.all(np.diff(mu[sequence]) > 0))
    return RegimePath(
        REGIMES[code],
        sequence,
        np.array(times),
        monotone,
        str(traj.status_name),
        offset,
        loss_end,
        restarts,
    )


def _pass_collapse_tol(collapse_tol, theta0, theta) -> float:
    r"""The collapse threshold of a pass from ``theta``, relative to that pass's start, that is
    ``collapse_tol`` relative to the run's first start :math:`\theta_0`: a run collapses where
    :math:`\lVert\theta\rVert\le` ``collapse_tol`` :math:`\lVert\theta_0\rVert`, however many
    passes it took (below 1: a state already there ended the pass before as ``collapsed``)."""
    # the collapse event's norm
    norm = lambda th: float(unit_and_norm(jnp.asarray(th))[1])  # noqa: E731
    ratio = collapse_tol * norm(theta0) / max(norm(theta), np.finfo(float).tiny)
    return float(min(ratio, np.nextafter(1.0, 0.0)))


def regime(method, mu, alpha, depth: int = 2, **kwargs) -> str:
    r"""One of :data:`REGIMES`: ``"collapse"``, ``"sequential"``, ``"direct"``, ``"excursion"``,
    ``"minor"``, ``"stalled"`` or ``"undetermined"``.

    The regime of :func:`regime_path` (which also returns the sequence of dominant indices and
    the switch times), by the one table :func:`regime_code`.

    Arguments:
        method, mu, alpha, depth: as in :func:`regime_path`.
        kwargs: the solver options of :func:`regime_path`.

    >>> import flows, analysis
    >>> [analysis.regime(flows.L2SAM(1.0), [1.0, 2.0, 3.0], a) for a in (0.1, 0.6, 2.0)]
    ['collapse', 'sequential', 'direct']
    """
    return regime_path(method, mu, alpha, depth, **kwargs).regime
