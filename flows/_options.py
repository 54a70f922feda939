r"""The solver options of :func:`flows.solve`, one frozen object.

Built once from ``solve``'s keywords (or passed whole as ``options=``), validated
at construction, and handed to the backends, which take
``(field, theta0, ts, t1, options)``.
"""

import inspect

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from . import _rk
from ._validate import check_int, real_number, with_overrides

# Solver names accepted by ``solve(..., solver=...)``. Tsit5 is the default: away
# from the ℓ∞ switching surfaces these flows are smooth and non-stiff (the
# Jacobian's spectrum is O(‖μ‖·|θ|^{L-2})), so a 5th-order explicit method with
# no linear solves is cheapest per step and vmaps without lockstep linear algebra.
# Kvaerno5 (ESDIRK, L-stable) is the stiff option, for stiff data (widely spread
# feature scales) and for comparisons. The explicit ones are diffrax's, with the
# stage loop unrolled (flows._rk: less time per vmapped step).
DIFFRAX_SOLVERS = {
    "tsit5": _rk.Tsit5,
    "dopri5": _rk.Dopri5,
    "dopri8": _rk.Dopri8,
    "kvaerno3": diffrax.Kvaerno3,
    "kvaerno5": diffrax.Kvaerno5,
}
#: The largest step budget: step counters are int64 and count a little past the budget.
MAX_STEPS = 2**62
SCIPY_SOLVERS = ("LSODA", "Radau", "BDF", "RK45", "DOP853")
BACKENDS = ("diffrax", "scipy", "numba")
# the numba engine's solvers (flows._engine.SOLVERS)
NUMBA_SOLVERS = ("tsit5", "dopri5")
#: The rule of ``atol="auto"`` for one solve: this times max|θ₀| of that solve's own start
#: (this itself where θ₀ = 0 or is not finite). The analysis's runs have their own rule,
#: ``analysis._regime.RUN_ATOL_REL``; docs/numerics.md explains both.
AUTO_ATOL_REL = 1e-10


def auto_atol(scale, xp=jnp):
    """The rule of ``atol="auto"``: ``AUTO_ATOL_REL`` times the start's scale max|θ₀| (times 1
    where that is 0 or not finite), elementwise in ``scale``; ``xp`` the array namespace (NumPy
    for the engine's batches, JAX, traceable, for diffrax)."""
    return AUTO_ATOL_REL * xp.where(xp.isfinite(scale) & (scale > 0), scale, 1.0)


# diffrax rejects a step whose error estimate is not finite and shrinks it by
# `factormin` = 0.2, for ever where the field is NaN at or just past the state: an
# LE-SAM schedule that is NaN would spend the whole step budget and end `max_steps`.
# Such rejections (from a finite state; for an implicit solver only those with a NaN
# trial state, as a failed Newton solve is an infinite estimate too) end the run as
# `nonfinite` when NONFINITE_REJECTIONS come in a row (the last trial step
# 0.2^60 ≈ 1e-42 of the first), or when NONFINITE_STALLS of them (in all) tried a step
# below STALL_STEP·|t|, where t no longer moves. A step merely too large (the trial
# stages overflow before a finite-time blow-up) is cured by a few rejections and is not
# counted against the run.
NONFINITE_REJECTIONS = 60
NONFINITE_STALLS = 10
STALL_STEP = 1e-12
#: The norm clock's rate at which the rescaled flow's default escape fires at L >= 3
#: (:meth:`SolverOptions.escape`).
ESCAPE_RATE = 1e10


def _check_tol(name, value, low, high):
    """None, or a concrete real number (Python, NumPy or 0-d JAX; not a bool) in (low, high)."""
    if value is None:
        return None
    number = real_number(value)
    if number is None or not low < number < high:
        raise ValueError(f"`{name}` must be None or a number in ({low}, {high}); got {value!r}.")
    return number


def _check_atol(atol):
    r"""``"auto"``, a number in (0, inf), or a scalar array (jax or numpy) positive and finite.

    An array is kept as a float64 JAX array, a dynamic leaf of the options (one compilation for
    every value; traceable: :func:`analysis._run.run` sets it from a traced
    :math:`\theta_0`). A concrete one is checked here; a traced one cannot be, and its caller
    guarantees it (:func:`atol_for` still turns a value that is not positive and finite into
    NaN, which fails the run as ``nonfinite``, never silently).
    """
    if isinstance(atol, str) and atol == "auto":
        return atol
    return _check_dynamic("atol", atol, 0.0, np.inf, "'auto', ")


def _check_dynamic(name, value, low, high, also=""):
    """A tolerance in (low, high) that may also be a 0-d float array (jax or numpy, possibly
    traced), kept as a float64 JAX array: a dynamic leaf of the options, one compilation for
    every value. A concrete array is checked here; a traced one cannot be, and its caller
    guarantees it."""
    if isinstance(value, (jax.Array, np.ndarray, np.generic)) and not isinstance(value, bool):
        arr = jnp.asarray(value)
        if arr.shape != () or not jnp.issubdtype(arr.dtype, jnp.floating):
            raise ValueError(
                f"`{name}` must be {also}a number in ({low}, {high}) or a 0-d float array; got "
                f"an array of shape {arr.shape} and dtype {arr.dtype}."
            )
        arr = arr.astype(jnp.float64)
        if not isinstance(arr, jax.core.Tracer) and not (low < arr < high):
            raise ValueError(f"`{name}` must be in ({low}, {high}); got {float(arr)!r}.")
        return arr
    return _check_tol(name, value, low, high)


def _check_solver(solver, backend):
    if backend == "diffrax":
        solver = "tsit5" if solver is None else solver
        if isinstance(solver, str):
            if solver not in DIFFRAX_SOLVERS:
                raise ValueError(
                    f"`solver` must be one of {sorted(DIFFRAX_SOLVERS)} or a diffrax "
                    f"solver for backend='diffrax'; got {solver!r}."
                )
            solver = DIFFRAX_SOLVERS[solver]()
        if not isinstance(solver, diffrax.AbstractSolver):
            raise ValueError(
                f"`solver` must be a diffrax solver for backend='diffrax'; got {solver!r}."
            )
        if not isinstance(solver, diffrax.AbstractAdaptiveSolver):
            raise ValueError(
                "`solver` must be an adaptive diffrax solver (one with an error estimate, "
                f"e.g. diffrax.Tsit5()): runs use a PID step-size controller; got {solver!r}."
            )
        return solver
    if backend == "numba":
        solver = "tsit5" if solver is None else solver
        if not isinstance(solver, str) or solver not in NUMBA_SOLVERS:
            raise ValueError(
                f"`solver` must be one of {NUMBA_SOLVERS} for backend='numba'; got {solver!r}."
            )
        return solver
    solver = "LSODA" if solver is None else solver
    if not isinstance(solver, str) or solver not in SCIPY_SOLVERS:
        raise ValueError(
            f"`solver` must be one of {SCIPY_SOLVERS} for backend='scipy'; got {solver!r}."
        )
    return solver


class SolverOptions(eqx.Module):
    r"""How a flow is integrated: backend, solver, tolerances, budget, stopping events, saving.

    The step-size controller is a PID controller on the error estimate,
    :math:`\lVert e\rVert_{\rm RMS}\le1` with :math:`e_k/(\mathrm{atol}+\mathrm{rtol}\,|y_k|)`;
    the stopping events are relative to :math:`\lVert\theta_0\rVert` (see
    :func:`flows.solve`). All values are validated here, once.

    Arguments:
        backend: ``"diffrax"`` (jit/vmap-able, differentiable, any device), ``"scipy"``
            (the independent reference) or ``"numba"`` (the per-trajectory CPU engine of
            :func:`flows.solve_many`: diffrax's algorithm, compiled per trajectory; the
            fastest on a CPU, not traceable).
        solver: a name in ``DIFFRAX_SOLVERS`` or a ``diffrax.AbstractSolver``
            (diffrax; default ``"tsit5"``), a ``solve_ivp`` method name
            (scipy; default ``"LSODA"``), or ``"tsit5"`` / ``"dopri5"`` (numba).
        rtol, atol: tolerances, in (0, 1) and (0, inf). ``atol="auto"`` (default)
            is relative to the problem's own scale, :math:`10^{-10}\max|\theta_0|`
            (:meth:`atol_for`), so that the scale twins
            :math:`(\alpha,\rho)\mapsto(\lambda\alpha,\lambda\rho)` of the rescaled
            flow take the same steps at every magnitude; a number is an
            absolute tolerance, the same at every scale. A 0-d float array (jax or
            numpy, possibly traced) is an absolute tolerance too, held as a dynamic
            leaf: one compilation for every value, so that a caller can set it from a
            traced scale (the analysis layer's rule relative to the run's first start,
            :func:`analysis._regime.start_atol`). A concrete one must be positive and
            finite (``ValueError`` naming ``atol``). The range has a floor: where
            :math:`\mathrm{rtol}\,|\theta|` is subnormal (:math:`|\theta_0|\lesssim10^{-298}`
            at rtol = 1e-8) the error norm of diffrax's controller is 0/0 and LSODA
            refuses its error weights ("illegal input"); both end the run ``nonfinite``
            at once. From :math:`\lambda=10^{-150}` up the twins agree on both backends
            (``tests/test_solver_hostile.py``) as long as :math:`\beta=\prod\theta` stays
            below :math:`1.8\times10^{308}`, i.e. :math:`|\theta|^L<10^{308}` along the run:
            a run that escapes reaches :math:`\lVert\theta\rVert=E\lVert\theta_0\rVert`
            (:math:`E` the escape threshold, :meth:`escape`), so its twins agree while
            :math:`(E\lVert\theta_0\rVert)^L<10^{308}` (from :math:`\lVert\theta_0\rVert\approx1`:
            up to about :math:`10^{148}` at :math:`L=2`, :math:`10^{92}` at :math:`L=3`); a run
            that stays bounded, up to :math:`\max|\theta|^L<10^{308}`. Past that β overflows
            first and the run ends ``nonfinite``.
        max_steps: step budget, an integer in [1, 2**62]. The scipy backend also stops
            (``max_steps``) after ``50 max_steps`` calls of the field and its Jacobian, or
            2,000 calls without completing a step (LSODA can call it for ever without
            finishing a step).
        collapse_tol: relative collapse threshold in (0, 1), or None; a 0-d float array is
            held as a dynamic leaf, as ``atol`` (the analysis sets each pass's threshold from
            a traced state, :func:`analysis._run.thresholds`).
        escape_tol: relative escape threshold > 1, None, or ``"auto"`` (none for the plain
            flow; for the rescaled flow 1e6 at :math:`L\le2` and :math:`10^{10/(L-2)}` at
            :math:`L\ge3`, where the finite-time blow-up is then about :math:`10^{-10}\tau^*`
            ahead: :meth:`escape`). A number larger than :math:`10^{14/(L-2)}` may lie closer to
            the blow-up than float64 resolves: such a run can end ``max_steps``. A 0-d float
            array is held as a dynamic leaf, as ``collapse_tol``.
        loss_tol: loss threshold > 0, or None.
        dense: keep the solver's dense interpolant (diffrax only), so that
            ``traj.evaluate(t)`` gives θ(t) to solver accuracy anywhere in ``[0, t_end]``
            (used to locate switch times by root-finding).
        real_time: carry the real time t along the rescaled flow (``traj.t_real``):
            ``"auto"`` (default) when the rule reads the time (an LE-SAM schedule
            σ(t), which is then read at t(τ)), or True/False. It costs steps:
            t = ∫e^{m̂}dτ is resolved up to dt/dτ = e^30.

    >>> import flows
    >>> options = flows.SolverOptions(rtol=1e-10, atol=1e-12)
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0]),
    ...                    flows.balanced_init(0.5, 2, d=1), t1=1.0, options=options)
    >>> traj.status_name
    'ok'
    """

    backend: str
    solver: object
    rtol: float
    atol: float | str | jax.Array
    max_steps: int
    collapse_tol: float | None
    escape_tol: float | None | str
    loss_tol: float | None
    dense: bool
    real_time: bool | str

    def __init__(
        self,
        *,
        backend: str = "diffrax",
        solver=None,
        rtol: float = 1e-8,
        atol: float | str = "auto",
        max_steps: int = 100_000,
        collapse_tol: float | None = 1e-6,
        escape_tol: float | None | str = "auto",
        loss_tol: float | None = None,
        dense: bool = False,
        real_time: bool | str = "auto",
    ):
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ValueError(f"`backend` must be 'diffrax', 'scipy' or 'numba'; got {backend!r}.")
        self.backend = backend
        self.solver = _check_solver(solver, backend)
        self.rtol = _check_tol("rtol", rtol, 0.0, 1.0)
        self.atol = _check_atol(atol)
        if self.rtol is None or self.atol is None:
            raise ValueError(
                "`rtol` and `atol` must be positive numbers (or atol='auto'), not None."
            )
        self.max_steps = check_int("max_steps", max_steps, minimum=1, maximum=MAX_STEPS)
        self.collapse_tol = _check_dynamic("collapse_tol", collapse_tol, 0.0, 1.0)
        if not (isinstance(escape_tol, str) and escape_tol == "auto"):
            escape_tol = _check_dynamic("escape_tol", escape_tol, 1.0, np.inf)
        self.escape_tol = escape_tol
        self.loss_tol = _check_tol("loss_tol", loss_tol, 0.0, np.inf)
        if not isinstance(dense, bool):
            raise ValueError(f"`dense` must be True or False; got {dense!r}.")
        if dense and backend != "diffrax":
            raise ValueError(f"`dense` must be False for backend={backend!r} (diffrax only).")
        self.dense = dense
        auto = isinstance(real_time, str) and real_time == "auto"
        if not (isinstance(real_time, bool) or auto):
            raise ValueError(f"`real_time` must be True, False or 'auto'; got {real_time!r}.")
        self.real_time = real_time

    def clock(self, method, rescaled: bool) -> bool:
        """Whether the rescaled flow of ``method`` carries the real time."""
        if not rescaled:
            return False
        return method.time_dependent if self.real_time == "auto" else self.real_time

    def escape(self, rescaled: bool, depth: int | None = None) -> float | None:
        r"""The escape threshold, ``"auto"`` resolved for the (rescaled) flow of depth ``depth``.

        ``"auto"``: none for the plain flow; for the rescaled flow :math:`10^6` at
        :math:`L\le2` (or ``depth`` None) and :math:`E_L=R^{1/(L-2)}` at :math:`L\ge3`,
        :math:`R` = ``ESCAPE_RATE``: the ratio at which the norm clock's rate
        :math:`(\lVert\theta\rVert/\lVert\theta_0\rVert)^{L-2}` (docs/theory.md §5) reaches
        :math:`R`. Near the blow-up at :math:`\tau^*`, :math:`\lVert\theta\rVert^{L-2}\propto
        1/(\tau^*-\tau)`, so the escape fires about :math:`\tau^*/R` before it, at every depth:
        resolvable in float64 and within :math:`10^{-9}\tau^*` of it. A fixed :math:`10^6`
        left :math:`10^{-6(L-2)}\tau^*` (below float64's resolution at :math:`L\ge5`: the run
        spent its step budget). A number is used as given at every depth.
        """
        if isinstance(self.escape_tol, str):
            if not rescaled:
                return None
            return 1e6 if depth is None or depth <= 2 else ESCAPE_RATE ** (1.0 / (depth - 2))
        return self.escape_tol

    def atol_for(self, theta0):
        r"""The absolute tolerance of a run from ``theta0``.

        :math:`10^{-10}\max|\theta_0|` for ``atol="auto"`` (:math:`10^{-10}` where
        :math:`\theta_0=0` or is not finite), else ``atol`` itself (an array that is not
        positive and finite, possible only traced, becomes NaN: the run fails as
        ``nonfinite``). Trace-safe.
        """
        if isinstance(self.atol, jax.Array):
            return jnp.where(jnp.isfinite(self.atol) & (self.atol > 0), self.atol, jnp.nan)
        if not isinstance(self.atol, str):
            return self.atol
        return auto_atol(jnp.max(jnp.abs(theta0)))

    def controller(self, atol) -> diffrax.PIDController:
        """The PID step-size controller of the diffrax backend (one definition).

        Integral coefficient 1 for explicit solvers, 0.3 for implicit ones (diffrax's
        recommendations), proportional 0.4; ``atol`` from :meth:`atol_for`. Steps
        rejected again and again for a non-finite field stop the run
        (:class:`FiniteController`). The error norm is :func:`error_norm`.
        """
        implicit = isinstance(self.solver, diffrax.AbstractImplicitSolver)
        return FiniteController(
            rtol=self.rtol, atol=atol, pcoeff=0.4, icoeff=0.3 if implicit else 1.0,
            implicit=implicit, norm=error_norm,
        )  # fmt: skip

    def dynamic(self) -> "SolverOptions":
        """A copy whose tolerances and thresholds are 0-d float64 arrays, not Python floats.

        Under ``jax.jit`` (``equinox.filter_jit``) a Python float is a static value, part
        of the compiled function's key, and an array is an argument: with this copy a
        change of ``rtol``, ``atol``, ``collapse_tol``, ``escape_tol`` or ``loss_tol``
        reuses the compiled solver instead of compiling it again.
        None (no event), ``"auto"`` and the integers (``max_steps``) stay static. The
        diffrax driver of :func:`flows.solve` runs on it; the values were validated here.
        """
        names = [n for n in _NUMBERS if isinstance(getattr(self, n), float)]
        values = [jnp.asarray(getattr(self, n), dtype=jnp.float64) for n in names]
        return eqx.tree_at(lambda o: [getattr(o, n) for n in names], self, values)

    def replace(self, **changes) -> "SolverOptions":
        """A copy with some options changed (validated again)."""
        return solver_options(self, changes)


_FIELDS = tuple(inspect.signature(SolverOptions.__init__).parameters)[1:]
_NUMBERS = ("rtol", "atol", "collapse_tol", "escape_tol", "loss_tol")


def solver_options(options, overrides: dict) -> SolverOptions:
    """``options`` (a :class:`SolverOptions`, or None for the defaults) with the keyword
    shortcuts ``overrides`` applied (validated again); a name that is not a field is refused
    with a ``ValueError`` naming it."""
    backend = getattr(options, "backend", None)
    if isinstance(options, SolverOptions) and overrides.get("backend", backend) != backend:
        # a solver object built for one backend is not carried to another
        overrides = {"solver": None, **overrides}
    return with_overrides(options, overrides, SolverOptions, _FIELDS)


def checked_solver_options(options: SolverOptions | None = None, **values) -> SolverOptions:
    r"""``options`` (default: :class:`SolverOptions`'s defaults) with the fields ``values`` set
    as given, not validated again: each input is checked once, at the public edge.

    For values that a caller has checked already (the fields of :class:`analysis.RunOptions`)
    or derived from checked ones (each pass's collapse and escape thresholds, traced). Each value
    must be in the form :class:`SolverOptions`'s own checks return: a float, an int, a 0-d
    float64 JAX array, None, or the option's string; a name that is not a field is refused with
    a ``ValueError`` naming it.
    """
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown option(s) {names} (flows.SolverOptions).")
    options = _DEFAULTS if options is None else options
    names = list(values)
    return eqx.tree_at(
        lambda o: [getattr(o, n) for n in names], options, [values[n] for n in names],
        is_leaf=lambda x: x is None,
    )  # fmt: skip


_DEFAULTS = SolverOptions()


def error_norm(scaled):
    r"""The RMS norm of the scaled error estimate, the real-time clock's excess part counted as 0.

    The clock state :math:`(t, o)` of the rescaled flow (:func:`flows._dynamics.clock_rate`)
    ends with :math:`o=\int\max(0,\log(dt/d\tau)-30)\,d\tau`, whose only use is its sign
    (:math:`t=\infty` once :math:`o>0`). It is exactly 0 until the rate reaches its cap and
    then grows from 0 with a kink, so its local error estimate is of the order of :math:`o`
    itself: no relative tolerance accepts it, only ``atol``, and with a small ``atol`` (1e-31)
    the steps at the cap shrank to 0 and the run spent its budget there (``max_steps``).
    It is left out of the error control (its entry is 0 and still counted, so that every run
    takes the same steps as before until the cap; the numba engine and the scipy backend
    do the same). θ and :math:`t` are controlled as before.
    """
    if isinstance(scaled, tuple):
        theta, clock = scaled
        scaled = (theta, clock.at[..., 1].set(0.0))
    return optx.rms_norm(scaled)


class FiniteController(diffrax.PIDController):
    r"""A PID controller that stops a run whose field is not finite at its state.

    diffrax turns a NaN error estimate into inf and rejects the step, shrinking it
    by ``factormin``, for ever: a field that is NaN at (or just past) the accepted
    state would spend the whole step budget and end ``max_steps``. Here
    steps rejected from a finite state for a non-finite error estimate (explicit
    solvers) or a NaN trial state (implicit solvers, whose failed Newton solves are
    infinite estimates too) end the run with a solver failure (``dt_min_reached``),
    reported ``nonfinite``: ``NONFINITE_REJECTIONS`` in a row (a field that is not
    finite at the state), or ``NONFINITE_STALLS`` in all of steps below
    ``STALL_STEP``·|t| (a field that is not finite just past the state, which the
    run approaches in ever smaller steps).
    """

    implicit: bool = eqx.field(static=True, kw_only=True, default=False)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t1, state = super().init(terms, t0, t1, y0, dt0, args, func, error_order)
        zero = jnp.zeros((), jnp.int32)
        return t1, (state, (zero, zero))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        inner, count = state
        keep, t0n, t1n, jump, inner, result = super().adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, inner
        )

        def all_(fn, tree):
            return jnp.all(jnp.stack([jnp.all(fn(x)) for x in jax.tree.leaves(tree)]))

        # A trial step that overflowed (θ = inf) has the error estimate inf - inf = NaN,
        # from which diffrax proposes a NaN step, and every later step fails. Shrink it
        # by factormin instead, as diffrax does for an infinite estimate. (diffrax's
        # first step is 0.01 whatever the field, since it picks it from a wrapped
        # term: at L = 4 from α = 37ρ it overshoots the blow-up at τ = 7e-5.)
        # Only there: a NaN from a finite estimate (error norms below the floor of
        # float64, SolverOptions.atol_for) still fails the run.
        if self.implicit:
            bad = ~all_(lambda x: ~jnp.isnan(x), y1_candidate)
        else:
            bad = ~all_(jnp.isfinite, y_error)
        retry = ~keep & bad & jnp.isnan(t1n)
        t1n = jnp.where(retry, t0n + self.factormin * (t1 - t0), t1n)

        run, stalls = count
        failed = ~keep & bad & all_(jnp.isfinite, y0)
        run = jnp.where(failed, run + 1, 0)
        stalls = stalls + (failed & (jnp.abs(t1 - t0) <= STALL_STEP * jnp.abs(t0)))
        stop = (run >= NONFINITE_REJECTIONS) | (stalls >= NONFINITE_STALLS)
        result = diffrax.RESULTS.where(stop, diffrax.RESULTS.dt_min_reached, result)
        return keep, t0n, t1n, jump, (inner, (run, stalls)), result
