r"""Regime boundaries along any one-parameter family, by vmapped multisection, at every depth.

A *family* maps a scalar :math:`p` to ``(method, alpha)``: α at fixed ρ, ρ at fixed α,
LE-SAM's σ or :math:`\rho_{\max}` at fixed α, ... Each point is the rescaled single-example flow
from the balanced start :math:`w^{(l)}(0)=\alpha`, classified by the same facts as
:func:`analysis.regime_path`: status ``collapsed``, or the escape / settled certificates of
:func:`analysis.certificate`, continued pass after pass (vmapped over the undecided points, one
compilation) until each point is decided. A point whose start already decides it
(:func:`analysis._run.start_code`: the certificates hold at :math:`\tau=0`) is not integrated;
exact ℓ∞-SAM's balanced starts are all of this kind (claim C2), so its search never compiles the
batched solver.
"""

import warnings
from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np

import flows
from flows.internal import as_array

from ._drive import classify, rows, start_codes, uses_engine
from ._inputs import (
    check_alpha,
    check_count,
    check_depth,
    check_method,
    check_mu,
    check_positive,
)
from ._options import run_options
from ._regime import COLLAPSE, EXCURSION, SEQUENTIAL, STALLED, UNDETERMINED, undetermined_reason
from ._run import start_code

KINDS = ("collapse", "direct")
#: The smallest ``bracket_rtol``: float64's resolution 2^-52 (a narrower bracket holds no float).
_BRACKET_RTOL_FLOOR = float(np.finfo(np.float64).eps)
#: The default ``bracket_rtol`` of :func:`boundary`.
BRACKET_RTOL = 1e-8


class _NoChange(ValueError):
    """The first round of :func:`boundary` shows no change: ``solves`` points were classified."""

    def __init__(self, message, solves):
        super().__init__(message)
        self.solves = solves


class Boundary(NamedTuple):
    """Result of :func:`boundary` (and of critical_alpha / direct_alpha with ``full_output``).

    ``exists`` is False when the regime change does not occur on the default scan (e.g. ℓ2-SAM
    at odd depth never collapses: its weights never decrease); then ``value`` and ``bracket``
    are NaN.
    """

    value: float  # midpoint of the final bracket (NaN if not exists)
    bracket: tuple  # (lo, hi): below-side and above-side ends, |hi - lo| <= bracket_rtol |lo|
    rounds: int  # vmapped multisection rounds after the scan
    solves: int  # points classified in all
    exists: bool

    @property
    def alpha(self) -> float:
        """Alias of ``value`` for the α families of critical_alpha / direct_alpha."""
        return self.value


def _stack(methods):
    """One batched method from a list of methods of the same type and static configuration."""
    arrays, statics = zip(*(eqx.partition(m, eqx.is_array) for m in methods), strict=True)
    first = jax.tree.structure(arrays[0])
    if any(jax.tree.structure(a) != first for a in arrays) or any(
        not eqx.tree_equal(s, statics[0]) for s in statics
    ):
        raise ValueError(
            "`family` must return methods of one type and one static configuration "
            "(only numeric parameters may vary with p)."
        )
    stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *arrays)
    return eqx.combine(stacked, statics[0])


@eqx.filter_jit
def _start(methods, data, theta0, loss, need):
    """:func:`analysis._run.start_code` vmapped: the code each start decides alone, else -1."""
    one = lambda m, th: start_code(m, data, th, need=need, loss=loss)  # noqa: E731
    return eqx.filter_vmap(one)(methods, theta0)  # a schedule σ(t) is a function: not mapped


def _classify(methods, data, depth, alphas, *, kind, options):
    """Regime code per point: COLLAPSE, SEQUENTIAL (escaped / not direct), DIRECT, ...

    Points whose start already decides them (:func:`analysis._run.start_code`, e.g. exact
    ℓ∞-SAM: every coordinate trapped below ρ, or escaped above it; in NumPy where the engine
    runs the method, :func:`analysis._drive.start_codes`) are not integrated; only the rest go
    to the driver (:func:`analysis._drive.classify`), which is not even called when none is
    left.
    """
    theta0 = np.stack([np.asarray(flows.balanced_init(a, depth, data.d)) for a in alphas])
    need = "escape" if kind == "collapse" else "direct"
    batched = _stack(methods)
    if uses_engine(batched, options.backend):
        codes = start_codes(batched, data, theta0, loss=options.loss, need=need)
    else:
        codes = np.array(_start(batched, data, theta0, options.loss, need))
    open_ = np.flatnonzero(codes < 0)
    if open_.size:
        out = classify(rows(batched, open_), data, theta0[open_], options=options, need=need)
        codes[open_] = out["code"]
        undetermined = np.flatnonzero(out["code"] == UNDETERMINED)
        if undetermined.size:  # the first one's reason: the search stops there
            k = undetermined[0]
            return codes, undetermined_reason(int(out["status"][k]), int(out["passes"][k]),
                                              float(out["t_end"][k]), options)  # fmt: skip
    return codes, ""


def _check_family(family, p, d):
    out = family(p)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ValueError(
            f"`family` must map a number p to a tuple (method, alpha); got {out!r} at p = {p:g}."
        )
    method, alpha = out
    try:
        check_method(method)
        alpha = check_alpha(alpha, d)
    except ValueError as err:
        raise ValueError(f"`family` at p = {p:g}: {err}") from None
    return method, alpha


def _change(ps, flags, where):
    """The adjacent pair where ``flags`` goes True -> False (None if there is no change)."""
    flags = np.asarray(flags, dtype=bool)
    changes = np.flatnonzero(flags[:-1] != flags[1:])
    if changes.size == 0 and flags[0] == flags[-1]:
        return None
    if not flags[0] or flags[-1] or changes.size != 1:
        raise ValueError(
            f"`bracket`: the regime changes more than once, or the wrong way, {where} "
            f"(below-flags {flags.astype(int)} at p = {np.array2string(np.asarray(ps), 6)})."
        )
    k = int(changes[0])
    return float(ps[k]), float(ps[k + 1])


def boundary(
    family,
    mu,
    *,
    depth: int = 2,
    bracket,
    kind: str = "collapse",
    bracket_rtol: float = BRACKET_RTOL,
    points: int = 17,
    log: bool = True,
    options=None,
    **overrides,
) -> Boundary:
    r"""Where the regime changes along ``family``: :math:`p\mapsto` ``(method, alpha)``.

    ``kind="collapse"``: below the boundary the run does not escape (it collapses, or stalls:
    ℓ∞-SAM at odd :math:`L`), above it escapes (certified: some weight exceeds the perturbation
    bound, :func:`analysis.certificate`).
    ``kind="direct"``: below, the run collapses or :math:`j^\dagger` visits an index other than
    :math:`\arg\max\mu` (read at :math:`\tau=0^+` by the tie rule and on 257 points of each
    solve's dense output); above, it is settled on :math:`\arg\max\mu` having never left it.
    "Below" and "above" follow the order of ``bracket`` (``(lo, hi)`` with ``lo`` on the
    below side; ``hi < lo`` is allowed for a family whose regime reverses, e.g. ρ at fixed α).

    The first round classifies ``points`` values spread over the bracket (its ends, and
    interior values log-spaced with ``log=True``, offset so that none sits on a simple ratio of
    the ends) in one ``jax.vmap`` call; it must show exactly one change. Each further round
    classifies ``points`` values inside the current bracket and keeps the sub-interval of the
    change, until :math:`|hi-lo|\le` ``bracket_rtol`` :math:`|lo|`. Each point is continued
    pass after pass (``max_passes``) until it is decided; one still undecided is
    ``undetermined`` and stops the search with a ``RuntimeError`` naming it.

    Arguments:
        family: callable :math:`p\mapsto` ``(method, alpha)``; the methods must share their type
            and static configuration (e.g. ``per_layer``).
        mu: the example, shape ``(d,)``.
        depth: :math:`L\ge1`.
        bracket: ``(p_below, p_above)``.
        kind: ``"collapse"`` or ``"direct"``.
        bracket_rtol: relative width of the final bracket, in [2^-52, 0.1): float64 resolves
            no narrower one. The bisection also stops at two adjacent floats. (It was called
            ``rtol``, a name the solver's tolerance also has; ``rtol=`` is still taken as
            ``bracket_rtol``, with a ``DeprecationWarning``, for one release.)
        points: values per vmapped round.
        log: spread the first round's values geometrically (positive brackets only).
        options: the :class:`analysis.RunOptions` of every run (default: its defaults; its
            ``rtol`` is the solver's, the bracket's is ``bracket_rtol`` above). ``max_steps`` bounds
            each pass; a pass that spends it is continued by the next from its end state, on a
            fresh clock. That is what ends a stall at the limit of float64's time resolution:
            a run that lingers at the degenerate saddle (:math:`L\ge3`, near :math:`\alpha_c`)
            is at :math:`\tau\sim10^{29}` of its pass when it leaves, where the steps it then
            needs (:math:`\sim10^{4}`, the field's time scale) are below the spacing of
            float64 times (:math:`\sim10^{13}`), and every step is rejected until the budget
            is spent (e.g. at :math:`L=8`, :math:`\alpha=\alpha_c(1+10^{-8})`). A smaller
            budget ends such a stall sooner: the default 1,024 gives the searches of ℓ2-SAM
            (global and per layer) and LE-SAM at L = 2…8 the same brackets as 16,384, at a
            fraction of the cost (benchmarks/README.md). The default absolute tolerance is
            relative to each point's start (:func:`analysis._regime.start_atol`), so that the
            search is scale invariant (:math:`\alpha_c(\lambda\rho)=\lambda\alpha_c(\rho)`
            down to :math:`\lambda=10^{-150}`).
        overrides: fields of :class:`analysis.RunOptions` as keywords (``max_steps=...``,
            ``atol=...``), applied to ``options``; all but ``rtol``, which for one release is
            still the bracket's (the deprecated name of ``bracket_rtol``): the solver's goes in
            ``options``.

    Returns:
        :class:`Boundary`.

    >>> import flows, analysis
    >>> b = analysis.boundary(lambda r: (flows.L2SAM(r), 1.0), [2.0], bracket=(2.0, 1.0),
    ...                       bracket_rtol=1e-6)
    >>> round(b.value, 5)  # d = 1, L = 2: dw/dτ = μ(w - ρ/√2) collapses iff ρ > √2 α
    1.41421
    """
    mu = check_mu(mu)
    depth = check_depth(depth)
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}; got {kind!r}.")
    if kind == "direct" and mu.shape[0] < 2:
        raise ValueError(
            "`mu` must have d >= 2 entries for kind='direct': with d = 1 every escape is direct."
        )
    if "rtol" in overrides:  # the deprecated name
        overrides = _renamed_rtol({**overrides, "bracket_rtol": bracket_rtol}, stacklevel=2)
        bracket_rtol = overrides.pop("bracket_rtol")
    # A bracket narrower than a float64 ulp cannot be resolved: the bisection would stall
    # on two adjacent floats.
    bracket_rtol = check_positive(
        "bracket_rtol", bracket_rtol, upper=0.1, lower=_BRACKET_RTOL_FLOOR
    )
    points = check_count("points", points, 2)
    options = run_options(options, overrides)
    if not callable(family):
        raise ValueError(f"`family` must be a callable p -> (method, alpha); got {family!r}.")
    if not isinstance(log, (bool, np.bool_)):
        raise ValueError(f"`log` must be True or False; got {log!r}.")
    try:
        lo, hi = (float(b) for b in np.asarray(bracket, dtype=float).reshape(2))
    except (TypeError, ValueError):
        raise ValueError(
            f"`bracket` must be two numbers (p_below, p_above); got {bracket!r}."
        ) from None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo == hi or (log and lo * hi <= 0):
        raise ValueError(
            "`bracket` must be two distinct finite numbers (of one sign with log=True); "
            f"got {bracket!r}."
        )
    data = flows.single_example(mu)
    not_direct = (COLLAPSE, STALLED, SEQUENTIAL, EXCURSION)
    below_codes = (COLLAPSE, STALLED) if kind == "collapse" else not_direct

    def flags(ps):
        pairs = [_check_family(family, float(p), mu.size) for p in ps]
        code, why = _classify(
            [m for m, _ in pairs],
            data,
            depth,
            [a for _, a in pairs],
            kind=kind,
            options=options,
        )
        if np.any(code == UNDETERMINED):
            k = int(np.argmax(code == UNDETERMINED))
            raise RuntimeError(
                f"boundary: the run at p = {ps[k]:.10g} is undetermined: {why}; or narrow "
                "`bracket`."
            )
        return np.isin(code, below_codes)

    # The ends, and points - 2 interior values offset from the equispaced fractions by an
    # irrational amount, so that none lands on a simple ratio (e.g. the geometric midpoint of
    # (0.5, 1) is 1/√2, an exact equilibrium of ℓ2-SAM at d = 1: undecidable).
    u = np.r_[0.0, (np.arange(1, points - 1) + (1 / np.pi - 0.5) / 2) / (points - 1), 1.0]
    ps = lo * (hi / lo) ** u if log else lo + (hi - lo) * u
    found = _change(ps, flags(ps), "across `bracket`")
    if found is None:
        raise _NoChange(f"`bracket`: no change of regime between {lo:g} and {hi:g}.", points)
    lo, hi = found
    solves, rounds = points, 0
    while abs(hi - lo) > bracket_rtol * abs(lo) and np.nextafter(lo, hi) != hi:  # no float between
        inner = lo + (hi - lo) * np.arange(1, points + 1) / (points + 1)
        lo, hi = _change(
            np.r_[lo, inner, hi], np.r_[True, flags(inner), False], "inside the bracket"
        )
        solves, rounds = solves + points, rounds + 1
    return Boundary(0.5 * (lo + hi), (lo, hi), rounds, solves, True)


def _renamed_rtol(kwargs: dict, stacklevel: int) -> dict:
    """``kwargs`` with the deprecated ``rtol`` (the bracket's relative width of
    :func:`boundary`) renamed ``bracket_rtol``, after a ``DeprecationWarning`` naming the new
    name; both at once are refused (a ``ValueError`` naming them: a ``bracket_rtol`` that is
    not the default object :data:`BRACKET_RTOL` itself was given).
    ``stacklevel``: the user's call, counted as :func:`warnings.warn` counts it from the
    caller of this function."""
    if "rtol" not in kwargs:
        return kwargs
    kwargs = dict(kwargs)
    rtol = kwargs.pop("rtol")
    if kwargs.get("bracket_rtol", BRACKET_RTOL) is not BRACKET_RTOL:
        raise ValueError(
            "`rtol` and `bracket_rtol` are one argument (the bracket's relative width): pass "
            "`bracket_rtol` only; the solver's rtol goes in options=analysis.RunOptions(rtol=...)."
        )
    warnings.warn(
        "`rtol` of analysis.boundary, critical_alpha and direct_alpha is deprecated: it is the "
        "bracket's relative width, now `bracket_rtol` (the solver's rtol goes in "
        "options=analysis.RunOptions(rtol=...)).",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    kwargs["bracket_rtol"] = rtol
    return kwargs


def _scale(method) -> float:
    for name in ("rho", "rho_max", "sigma"):
        value = getattr(method, name, None)
        if value is not None and not callable(value) and float(value) > 0:
            return float(value)
    return 1.0


def _alpha_search(method, mu, depth, kind, bracket, scan, full_output, kwargs):
    kwargs = _renamed_rtol(kwargs, stacklevel=3)  # the call of critical_alpha or direct_alpha
    method = check_method(method)
    scan = check_count("scan", scan)
    s = _scale(method)
    # The default bracket s·2^(±scan + 1/π) and its log-spaced values stay within
    # [1e-300, 1e300], where the runs and the ratio of the ends (2^(2 scan)) are finite.
    widest = int(min(np.log2(1e300 / s), np.log2(s / 1e-300), 511) - 1)
    if bracket is None and scan > widest:
        raise ValueError(
            f"`scan` must be an integer in [1, {widest}] for this method's scale {s:g}, so that "
            f"the bracket {s:g}·2^(±scan) stays within [1e-300, 1e300]; got {scan!r}."
        )
    if bracket is not None:  # α > 0: else the error would blame the internal `family`
        ends = np.asarray(as_array("bracket", bracket, "(lo, hi), two initial scales α > 0"))
        if ends.shape != (2,) or not np.all(np.isfinite(ends) & (ends > 0)):
            raise ValueError(
                f"`bracket` must be (lo, hi), two finite scales α > 0; got {bracket!r}."
            )
    default = bracket is None
    if default:
        # Offset by 1/π octave so that no scan point sits on a simple ratio such as
        # α = ρ, where ℓ∞-SAM has an equilibrium (neither collapse nor escape).
        bracket = (s * 2.0 ** (-scan + 1 / np.pi), s * 2.0 ** (scan + 1 / np.pi))
    try:
        out = boundary(lambda a: (method, a), mu, depth=depth, bracket=bracket, kind=kind, **kwargs)
    except _NoChange as none:
        if not default:  # a bracket of the user's own
            raise
        nan = float("nan")
        out = Boundary(nan, (nan, nan), 0, none.solves, False)
    return out if full_output else out.value


def critical_alpha(
    method, mu, depth: int = 2, *, bracket=None, scan: int = 8, full_output: bool = False, **kwargs
):
    r"""Collapse/escape boundary :math:`\alpha_c` at fixed method: collapse below, escape above.

    :func:`boundary` along :math:`\alpha\mapsto` ``(method, α)`` with ``kind="collapse"``. The
    default bracket is :math:`s\,2^{\pm\text{scan}+1/\pi}` (:math:`s=\rho`, or
    :math:`\rho_{\max}` for LE-SAM), scanned with ``points`` values. Where no collapse occurs
    on it (ℓ2-SAM at odd :math:`L`, whose weights never decrease; GD at any depth) the result
    is NaN (``full_output``: ``exists=False``), not an error.

    Exact ℓ∞-SAM (claim C2): the balanced coordinates decouple,
    :math:`\dot w_j=\mu_j(w_j-\rho)^{L-1}`, so :math:`\alpha_c=\rho` exactly at every
    :math:`L\ge2`. Below ρ the run collapses at even :math:`L` and stalls at odd :math:`L`
    (it creeps up to the equilibrium ρ: no collapse, but no escape either, and ``"collapse"``
    counts a stall on the below side, :func:`boundary`), so the result is ρ at odd
    :math:`L\ge3` too: the stall/escape boundary. At :math:`L=1` (:math:`\dot w=\mu`) every
    start escapes: NaN. Both sides are certified at :math:`\tau=0`, so nothing is integrated.

    For ℓ2-SAM at :math:`L=2` it lies strictly between the sympy bounds of
    :func:`analysis.l2sam_thresholds`; for :math:`d=1` it is exactly :math:`\rho/\sqrt2`.

    Arguments:
        method: GD, L2SAM, LinfSAM or LESAM.
        mu: the example, shape ``(d,)``.
        depth: number of layers.
        bracket: ``(lo, hi)``, lo collapsing and hi escaping, instead of the scan.
        scan: half-width of the default bracket in powers of two.
        full_output: return the :class:`Boundary` instead of a float.
        kwargs: the keywords of :func:`boundary`: ``bracket_rtol`` (1e-8), ``points``
            (17), ``log``, ``options`` (an :class:`analysis.RunOptions`) and its fields.

    >>> import flows, analysis
    >>> round(analysis.critical_alpha(flows.L2SAM(1.0), [2.0]), 8)  # d = 1: ρ/√2
    0.70710678
    >>> import math; math.isnan(analysis.critical_alpha(flows.L2SAM(1.0), [1.0, 2.0], depth=3))
    True
    >>> round(analysis.critical_alpha(flows.LinfSAM(0.5), [1.0, 2.0], depth=4), 8)  # C2: ρ
    0.5
    """
    return _alpha_search(method, mu, depth, "collapse", bracket, scan, full_output, kwargs)


def direct_alpha(
    method, mu, depth: int = 2, *, bracket=None, scan: int = 8, full_output: bool = False, **kwargs
):
    r"""Sequential/direct boundary :math:`\alpha_s`: direct above, sequential (or collapse) below.

    :func:`boundary` along :math:`\alpha` with ``kind="direct"``; arguments as in
    :func:`critical_alpha` (``bracket``: lo not direct, hi direct). For ℓ2-SAM at :math:`L=2`
    it is exactly :math:`\rho(\mu_{(d)}+\mu_{(d-1)})/(\sqrt2\lVert\mu\rVert)`
    (:func:`analysis.l2sam_thresholds`).

    >>> import flows, analysis
    >>> round(analysis.direct_alpha(flows.L2SAM(1.0), [3.0, 4.0], bracket_rtol=1e-6), 5)  # 7/(5√2)
    0.98995
    """
    if check_mu(mu).shape[0] < 2:
        raise ValueError("`mu` must have d >= 2 entries: with d = 1 every escape is direct.")
    return _alpha_search(method, mu, depth, "direct", bracket, scan, full_output, kwargs)
