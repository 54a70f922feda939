r"""The path of one run: its regime, the sequence of :math:`j^\dagger` and the switch times (C4).

:func:`regime_path` is the per-run layer (:func:`analysis._drive.classify`) called on one point:
the same drivers, policy and answers as the boundary searches and the phase diagrams.
"""

from typing import NamedTuple

import numpy as np

import flows

from ._drive import classify
from ._inputs import check_alpha, check_depth, check_method, check_mu, check_positive
from ._options import run_options
from ._regime import REGIMES, UNDETERMINED, undetermined_reason

#: Switches a path keeps (:func:`regime_path` lists every one; more are counted, not timed).
PATH_SLOTS = 1024


class RegimePath(NamedTuple):
    """Result of :func:`regime_path`."""

    regime: str  # one of REGIMES
    sequence: list  # every j† visited, in order (0-based), returns included
    times: np.ndarray  # the switch times (τ), len(sequence) - 1 of them
    monotone: bool  # μ strictly increases along `sequence`
    status: str  # status of the last solve ("ok" with t_end 0 where the start decides the run)
    t_end: float  # τ where the run was decided (the passes add up)
    loss_end: float  # loss at the end
    restarts: int  # solves continued from where the previous one stopped
    reason: str = ""  # why the run is undetermined ("" when it is decided)


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
    at :math:`\tau=0` (the fastest-growing tied index). The run is solved pass after pass by the
    driver of ``options.backend`` (:mod:`analysis._drive`: the numba engine wherever it runs the
    method, else JAX) and continued from where each pass stops until it is decided
    (docs/theory.md §13):

    * it **collapses** when a pass ends with status ``collapsed``
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

    Each pass stops as :class:`analysis.RunOptions` says, or at ``t1`` (default
    :func:`analysis._regime.budget`). A schedule σ(t) (LE-SAM, JAX driver) is read at the real
    time: each pass carries it from its start, and the next starts from where it ended
    (:meth:`flows.AbstractMethod.started_at`, docs/theory.md §5); a pass that meets σ(t) < 0
    stops with status ``sigma_negative`` and the run is ``undetermined``. A run still undecided
    after ``max_passes`` passes is ``undetermined``, never guessed, and ``reason`` says why
    (:func:`analysis._regime.undetermined_reason`). The default absolute
    tolerance is far below any weight on purpose (:func:`analysis._regime.start_atol`).

    Arguments:
        method: GD, L2SAM, LinfSAM or LESAM; its ρ (or σ) is the one used.
        mu: the example, shape ``(d,)``, positive, unique largest entry.
        alpha: initial scale, > 0, scalar or shape ``(d,)``.
        depth: number of layers :math:`L`.
        t1: τ budget per pass (default above).
        options: an :class:`analysis.RunOptions` (default: its defaults); its ``max_switches``
            is not used here (every switch is kept).
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
    opts = run_options(options, overrides).replace(max_switches=PATH_SLOTS)
    if t1 is not None:
        t1 = check_positive("t1", t1)
    method = check_method(method)
    mu = check_mu(mu)
    alpha = check_alpha(alpha, mu.shape[0])
    data = flows.single_example(mu)
    theta0 = np.asarray(flows.balanced_init(alpha, depth, mu.shape[0]))[None]
    out = {k: v[0] for k, v in classify(method, data, theta0, options=opts, t1=t1).items()}
    kept = min(int(np.sum(out["after"] >= 0)), PATH_SLOTS)
    sequence = [int(out["first"]), *map(int, out["after"][:kept])]
    times = list(out["times"][:kept])
    if int(out["n_switches"]) > kept and sequence[-1] != int(out["last"]):
        # decided by the q-order theorem: the last change happens in the final blow-up,
        # below the resolution of float64; its time is reported as NaN
        sequence.append(int(out["last"]))
        times.append(np.nan)
    theta = np.asarray(out["theta"])
    return RegimePath(
        REGIMES[int(out["code"])],
        sequence,
        np.array(times, dtype=float),
        bool(np.all(np.diff(mu[sequence]) > 0)),
        str(flows.Status.name(int(out["status"]))),
        float(out["t_end"]),
        float(flows.objective(theta, data, opts.loss)),
        max(int(out["passes"]) - 1, 0),
        "" if int(out["code"]) != UNDETERMINED else undetermined_reason(
            int(out["status"]), int(out["passes"]), float(out["t_end"]), opts),
    )  # fmt: skip


def regime(method, mu, alpha, depth: int = 2, **kwargs) -> str:
    r"""One of :data:`REGIMES`: ``"collapse"``, ``"sequential"``, ``"direct"``, ``"excursion"``,
    ``"minor"``, ``"stalled"`` or ``"undetermined"``.

    The regime of :func:`regime_path` (which also returns the sequence of dominant indices and
    the switch times), by the one table :func:`analysis.regime_code`.

    Arguments:
        method, mu, alpha, depth: as in :func:`regime_path`.
        kwargs: the solver options of :func:`regime_path`.

    >>> import flows, analysis
    >>> [analysis.regime(flows.L2SAM(1.0), [1.0, 2.0, 3.0], a) for a in (0.1, 0.6, 2.0)]
    ['collapse', 'sequential', 'direct']
    """
    return regime_path(method, mu, alpha, depth, **kwargs).regime
