r"""How the analysis runs each single-example flow to a decision: one options object.

:class:`RunOptions` holds what :func:`analysis.regime_path`, :func:`analysis.boundary` (and
:func:`analysis.critical_alpha`, :func:`analysis.direct_alpha`), :func:`analysis.phase_diagram`
and :func:`analysis.limit_map` share: the solver tolerances, the step budget of each pass and
the number of passes, the stopping events, the loss, and how :math:`j^\dagger` is tracked. The
same names and defaults hold in every one of them; each also takes the fields as keyword
shortcuts, forwarded here (:func:`run_options`), in one place.
"""

import dataclasses

import numpy as np

import flows
from flows.internal import check_int, checked_solver_options, with_overrides

from ._inputs import check_positive

LOSSES = ("logistic", "exponential")
#: The drivers of the analysis's runs (:class:`RunOptions`'s ``backend``).
BACKENDS = ("auto", "numba", "jax")


def default_escape_tol(depth: int) -> float:
    r"""Growth factor of ‖θ‖ at which one solve stops to check the certificate.

    :math:`10^3` at :math:`L\le2`; 10 at :math:`L\ge3`, where a solve into the
    finite-:math:`\tau` blow-up must not push :math:`\tau^*-\tau` below the resolution of
    :math:`\tau` (a factor :math:`c` shrinks it by :math:`c^{L-2}`).
    """
    return 1e3 if depth <= 2 else 10.0


@dataclasses.dataclass(frozen=True)
class RunOptions:
    r"""The options of the analysis's runs (validated at construction).

    A run is the rescaled single-example flow from one start, solved in passes (by the driver
    of ``backend``): each pass stops at the next escape level
    (:math:`\lVert\theta\rVert=` ``escape_tol``:math:`^{k}\lVert\theta_0\rVert`), at its τ
    budget, at a collapse (:math:`\lVert\theta\rVert\le` ``collapse_tol`` times the norm at
    the run's first start :math:`\theta_0`) or after ``max_steps`` steps, and the run is
    continued from there until the certificates decide it, or ``max_passes`` passes are spent
    (``undetermined``, never guessed). Every threshold is fixed by :math:`\theta_0`
    (:func:`analysis._run.thresholds`), so ``max_steps`` changes the cost and the count of
    passes, not the answers.

    Arguments:
        rtol: relative tolerance of every solve, in (0, 1).
        atol: absolute tolerance. None (default): :math:`10^{-150}\max|\theta_0|`, taken from
            the run's first start and kept for its every pass
            (:func:`analysis._regime.start_atol`), so that the scale twins
            :math:`(\lambda\alpha,\lambda\rho)` are solved alike at every magnitude and a weight
            that decays by many orders of magnitude near a saddle is still resolved relative to
            itself. A number in (0, inf) is absolute, the same at every scale; ``"auto"`` is
            :meth:`flows.SolverOptions.atol_for`, relative to each pass's start.
        max_steps: step budget of each pass, an integer >= 1. A pass that spends it is continued
            by the next, so it changes the cost, not the answers (the compiled runs hold a dense
            output of ``max_steps`` steps per point: a larger budget costs memory).
        max_passes: passes allowed per run, an integer >= 1.
        collapse_tol: collapse threshold relative to the run's first start, in (0, 1).
        escape_tol: growth factor of :math:`\lVert\theta\rVert` between the levels at which
            a pass stops to check the certificates (:math:`e^k\lVert\theta_0\rVert`,
            :func:`analysis._run.thresholds`), > 1; None (default):
            :func:`analysis._options.default_escape_tol` of the depth.
        loss: ``"logistic"`` or ``"exponential"``.
        n_grid: points of each pass's dense output on which the compiled runs read
            :math:`j^\dagger` (:func:`analysis._run.run`), an integer >= 2.
        max_switches: switch times the compiled runs keep, an integer >= 1 (``n_switches``
            counts them all).
        backend: the driver of the runs (docs/numerics.md): ``"numba"``, the per-trajectory
            CPU engine (:mod:`analysis._drive`: the fastest on a CPU; GD, ℓ2-SAM, smoothed
            ℓ∞-SAM, LE-SAM with a constant σ), ``"jax"`` (:func:`analysis._run.run`: every
            method, exact ℓ∞-SAM's Filippov flow and LE-SAM schedules included; jit/vmap-able,
            any device) or ``"auto"`` (default): the engine wherever it runs the method, JAX
            elsewhere. Both apply the same policy; their answers agree to the solver's
            tolerance.

    >>> import analysis
    >>> analysis.RunOptions(max_steps=4096).replace(rtol=1e-12).rtol
    1e-12
    """

    rtol: float = 1e-10
    atol: float | str | None = None
    max_steps: int = 1024
    max_passes: int = 64
    collapse_tol: float = 1e-6
    escape_tol: float | None = None
    loss: str = "logistic"
    n_grid: int = 257
    max_switches: int = 16
    backend: str = "auto"

    def __post_init__(self):
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        put("rtol", check_positive("rtol", self.rtol, upper=1.0))
        if not (self.atol is None or (isinstance(self.atol, str) and self.atol == "auto")):
            put("atol", check_positive("atol", self.atol, upper=np.inf))
        put("max_steps", check_int("max_steps", self.max_steps, minimum=1, maximum=2**62))
        put("max_passes", check_int("max_passes", self.max_passes, minimum=1))
        put("collapse_tol", check_positive("collapse_tol", self.collapse_tol, upper=1.0))
        if self.escape_tol is not None:
            above_one = np.nextafter(1.0, 2.0)
            put("escape_tol", check_positive("escape_tol", self.escape_tol, lower=above_one))
        if not isinstance(self.loss, str) or self.loss not in LOSSES:
            raise ValueError(f"`loss` must be one of {LOSSES}; got {self.loss!r}.")
        put("n_grid", check_int("n_grid", self.n_grid, minimum=2))
        put("max_switches", check_int("max_switches", self.max_switches, minimum=1))
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            raise ValueError(f"`backend` must be one of {BACKENDS}; got {self.backend!r}.")

    def replace(self, **changes) -> "RunOptions":
        """A copy with some options changed (validated again)."""
        return run_options(self, changes)

    def escape_factor(self, depth: int) -> float:
        """The escape tolerance at ``depth``: ``escape_tol``, or
        :func:`default_escape_tol` of the depth."""
        return default_escape_tol(depth) if self.escape_tol is None else self.escape_tol

    def solver(self, depth: int) -> flows.SolverOptions:
        """The :class:`flows.SolverOptions` of every pass at depth ``depth`` (the absolute
        tolerance is set per run from its start, :func:`analysis._regime.start_atol`), from
        the values checked here (not checked again)."""
        escape = self.escape_factor(depth)
        return checked_solver_options(
            collapse_tol=self.collapse_tol, rtol=self.rtol, max_steps=self.max_steps,
            escape_tol=escape,
        )  # fmt: skip

    def record(self) -> dict:
        """The options as plain values (for a sweep's cache key and a result's attributes)."""
        return dataclasses.asdict(self)


FIELDS = tuple(f.name for f in dataclasses.fields(RunOptions))


def run_options(options, overrides: dict, *, exclude=()) -> RunOptions:
    """``options`` (a :class:`RunOptions`, or None for the defaults) with the keyword shortcuts
    ``overrides`` applied; a name that is not a field (or is in ``exclude``) is refused with a
    ``ValueError`` naming it."""
    return with_overrides(options, overrides, RunOptions, FIELDS, exclude)


#: The keywords of :func:`flows.sweep` that the sweeping functions pass on (the fields of
#: :class:`flows.SweepOptions`, the seed and the state key); the rest (the function, its
#: parameters, the cache folder, the progress bar, the record) they set.
SWEEP_KEYWORDS = (*(f.name for f in dataclasses.fields(flows.SweepOptions)), "seed", "key")


def split_options(options, kwargs: dict) -> tuple[RunOptions, dict]:
    """Split a sweeping function's keywords: fields of :class:`RunOptions` (applied to
    ``options``) and keywords of :func:`flows.sweep` (returned as a dict); a name that is
    neither is refused with a ``ValueError`` naming it."""
    unknown = sorted(set(kwargs) - set(FIELDS) - set(SWEEP_KEYWORDS))
    if unknown:
        raise ValueError(
            f"unknown keyword(s) {', '.join(map(repr, unknown))}; pass fields of "
            f"analysis.RunOptions ({', '.join(FIELDS)}) or keywords of flows.sweep "
            f"({', '.join(SWEEP_KEYWORDS)})."
        )
    run = {k: v for k, v in kwargs.items() if k in FIELDS}
    return run_options(options, run), {k: v for k, v in kwargs.items() if k not in FIELDS}
