r"""Regimes of a single-example rescaled flow: one table, one per-run classification (C4).

Everything here is for the example :math:`\{(\mu,+1)\}` and the balanced start
:math:`w^{(l)}(0)=\alpha` (all layers), on the rescaled clock :math:`\tau`
(``flows.solve(..., rescaled=True)``), where the loss only sets the speed. When a run is
decided (escape, settled leader) is proven at every depth in :func:`analysis.certificate`.
"""

import numpy as np

import flows

from ._certify import time_scale
from ._inputs import check_kind
from ._xp import namespace

#: The regime names, indexed by the integer codes of :func:`regime_code` (one table). Codes
#: 0-5 are those of earlier versions (files on disk hold them); ``excursion`` was added last.
REGIMES = ("collapse", "sequential", "direct", "minor", "stalled", "undetermined", "excursion")
COLLAPSE, SEQUENTIAL, DIRECT, MINOR, STALLED, UNDETERMINED, EXCURSION = range(len(REGIMES))

#: τ budget of one solve, in units of :func:`analysis._certify.time_scale` (the field's own
#: time unit, 1/min μ at L = 2), times ``T_GROWTH`` to the number of passes that spent theirs: a
#: run that lingers near the degenerate saddle at L >= 3, where the time spent grows as a power
#: of 1/|α/α_c - 1| and the motion slows down as a power of τ, gets geometrically longer budgets.
T_FACTOR = 1e6
T_GROWTH = 10.0
#: The largest τ budget: a time unit near float64's range (μ near its smallest normal,
#: or s^(2-L) at small s) would otherwise make the budget infinite.
T_MAX = 1e300

#: The rule of the analysis's default absolute tolerance, for every solve of a run: this times
#: :math:`\max|\theta_0|` of the run's FIRST start (:func:`start_atol`), at least float64's
#: smallest normal number. A single solve's ``atol="auto"`` has its own rule,
#: ``flows._options.AUTO_ATOL_REL``; docs/numerics.md explains both.
RUN_ATOL_REL = 1e-150


def start_atol(atol, theta0):
    r"""The absolute tolerance of every solve of one run from ``theta0`` (its first start).

    ``atol=None`` (the default of the analysis layer): :math:`10^{-150}\max|\theta_0|`
    (``RUN_ATOL_REL``), at least the smallest normal float64 :math:`2.2\cdot10^{-308}`. It is
    relative so that the scale twins :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)`
    of the rescaled flow are solved alike at every magnitude, and this small so that the error
    control stays relative (``rtol``) for every weight of the run: the minor weights decay
    exponentially during a plateau (to :math:`10^{-73}\max|\theta_0|` and below), and where
    they fall under ``atol`` their growth rates, hence the switch times, are no longer
    resolved (an absolute part of :math:`10^{-30}\max|\theta_0|` moved a switch time by
    :math:`\Delta\tau=1.1` at :math:`\tau\approx69`). It is taken from the run's first
    start and kept for every continuation: taken from each pass's start it would loosen a
    million-fold after an escape.
    A float64 array, one per start ``theta0`` (..., L, d) (traceable, one compilation for every
    value; eager NumPy on a NumPy start; ``theta0`` is validated upstream, finite with a
    positive entry). A number (absolute, the same at every scale) or
    ``"auto"`` (:meth:`flows.SolverOptions.atol_for`, relative to each solve's own start) is
    returned as given.
    """
    if atol is not None:
        return atol
    xp = namespace(theta0)
    scale = xp.max(xp.abs(xp.asarray(theta0, dtype=xp.float64)), axis=(-2, -1))
    return xp.maximum(RUN_ATOL_REL * scale, np.finfo(np.float64).tiny)


def budget(theta, mu, bound, restarts):
    """The default τ budget of a solve started from ``theta`` after ``restarts`` passes that spent
    theirs: ``T_FACTOR * T_GROWTH**restarts`` time units :func:`analysis._certify.time_scale`.

    At most ``T_MAX`` (finite where the time unit overflows)."""
    xp = namespace(theta, mu, bound, restarts)
    return xp.minimum(T_FACTOR * T_GROWTH**restarts * time_scale(theta, mu, bound), T_MAX)


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
    (``first`` included). Elementwise and traceable (eager NumPy on NumPy inputs), so batches
    classify with the same rule.

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
    xp = namespace(collapsed, settled, leader, visited_other, target, first)
    on_target = xp.where(first != target, SEQUENTIAL, xp.where(visited_other, EXCURSION, DIRECT))
    escaped = xp.where(leader != target, MINOR, on_target)
    return xp.where(collapsed, COLLAPSE, xp.where(settled, escaped, UNDETERMINED))


def undetermined_reason(status: int, passes: int, t_end: float, options) -> str:
    """Why a run is ``undetermined``, in one sentence, from its last pass's ``status``, the
    ``passes`` it ran and the τ ``t_end`` it reached (host-side; :class:`analysis.RunOptions`
    ``options`` gives the budgets)."""
    at = f"at tau = {t_end:.6g}"
    if status == flows.Status.SIGMA_NEGATIVE:
        return (f"the schedule sigma(t) fell below 0 {at}: LE-SAM's radius is undefined there, "
                "and the certificates of the last state decide nothing")  # fmt: skip
    if status in (flows.Status.NONFINITE, flows.Status.SLIDING_FAILED):
        return (f"the solver failed {at} (status {flows.Status.name(status)}), and the "
                "certificates of the last finite state decide nothing")  # fmt: skip
    ended = {
        flows.Status.MAX_STEPS: f"its last pass spent its {options.max_steps} steps",
        flows.Status.ESCAPED: "its last pass escaped past a norm level without a certified "
        "leader",
    }.get(status, "its last pass spent its tau budget")
    return (f"still undecided after {passes} passes ({at}): {ended}; a run that lingers near "
            "a boundary (e.g. at the degenerate saddle, L >= 3) needs more: raise `max_passes` "
            "or `max_steps`")  # fmt: skip


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
    xp = namespace(status, escaped, settled, leader, intact, theorem_leader, visited_other, first,
                   target, stalled, trapped_all)  # fmt: skip
    code_of = lambda k: regime_code(False, True, k, visited_other, target, first)  # noqa: E731
    by_theorem = xp.where(escaped & (theorem_leader >= 0), code_of(theorem_leader), -1)
    code = xp.where(intact, xp.where(settled, code_of(leader), -1), by_theorem)
    if need == "escape":
        code = xp.where(escaped, SEQUENTIAL, code)
    elif need == "direct":
        code = xp.where(visited_other, SEQUENTIAL, code)
    code = xp.where(stalled, STALLED, code)
    # a solver failure ends a run undecided only where the facts of its last (finite) state do
    # not decide it: they hold for all later times whatever the perturbation does within its
    # bound e (docs/theory.md §12), e.g. a schedule σ(t) that is NaN later on
    code = xp.where((status == flows.Status.NONFINITE) & (code < 0), UNDETERMINED, code)
    code = xp.where(status == flows.Status.SIGMA_NEGATIVE, UNDETERMINED, code)
    return xp.where((status == flows.Status.COLLAPSED) | trapped_all, COLLAPSE, code)
