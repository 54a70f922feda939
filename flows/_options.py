r"""The solver options of :func:`flows.solve`, one frozen object (issue 11).

Built once from ``solve``'s keywords (or passed whole as ``options=``), validated
at construction, and handed to the backends, which take
``(field, theta0, ts, t1, options)``.
"""

import inspect

import diffrax
import equinox as eqx
import numpy as np

from . import _rk
from ._validate import check_int

# Solver names accepted by ``solve(..., solver=...)``. Tsit5 is the default: away
# from the ℓ∞ switching surfaces these flows are smooth and non-stiff (the
# Jacobian's spectrum is O(‖μ‖·|θ|^{L-2})), so a 5th-order explicit method with
# no linear solves is cheapest per step and vmaps without lockstep linear algebra.
# Kvaerno5 (ESDIRK, L-stable) is the stiff option, for stiff data (widely spread
# feature scales) and for comparisons. The explicit ones are diffrax's, with the
# stage loop unrolled (flows._rk: 2.2x less time per vmapped step, issue 6).
DIFFRAX_SOLVERS = {
    "tsit5": _rk.Tsit5,
    "dopri5": _rk.Dopri5,
    "dopri8": _rk.Dopri8,
    "kvaerno3": diffrax.Kvaerno3,
    "kvaerno5": diffrax.Kvaerno5,
}
SCIPY_SOLVERS = ("LSODA", "Radau", "BDF", "RK45", "DOP853")
BACKENDS = ("diffrax", "scipy")


def _check_tol(name, value, low, high):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
        raise ValueError(f"`{name}` must be None or a number in ({low}, {high}); got {value!r}.")
    return float(value)


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
        return solver
    solver = "LSODA" if solver is None else solver
    if solver not in SCIPY_SOLVERS:
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
        backend: ``"diffrax"`` (jit/vmap-able) or ``"scipy"`` (reference).
        solver: a name in ``DIFFRAX_SOLVERS`` or a ``diffrax.AbstractSolver``
            (diffrax; default ``"tsit5"``), or a ``solve_ivp`` method name
            (scipy; default ``"LSODA"``).
        rtol, atol: tolerances, in (0, 1) and (0, inf).
        max_steps: step budget, an integer >= 1.
        collapse_tol: relative collapse threshold in (0, 1), or None.
        escape_tol: relative escape threshold > 1, None, or ``"auto"`` (1e6 for the
            rescaled flow, none for the plain flow).
        loss_tol: loss threshold > 0, or None.
        dense: keep the dense output (diffrax only).
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
    atol: float
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
        atol: float = 1e-10,
        max_steps: int = 100_000,
        collapse_tol: float | None = 1e-6,
        escape_tol: float | None | str = "auto",
        loss_tol: float | None = None,
        dense: bool = False,
        real_time: bool | str = "auto",
    ):
        if backend not in BACKENDS:
            raise ValueError(f"`backend` must be 'diffrax' or 'scipy'; got {backend!r}.")
        self.backend = backend
        self.solver = _check_solver(solver, backend)
        self.rtol = _check_tol("rtol", rtol, 0.0, 1.0)
        self.atol = _check_tol("atol", atol, 0.0, np.inf)
        if self.rtol is None or self.atol is None:
            raise ValueError("`rtol` and `atol` must be positive numbers, not None.")
        self.max_steps = check_int("max_steps", max_steps, minimum=1)
        self.collapse_tol = _check_tol("collapse_tol", collapse_tol, 0.0, 1.0)
        if not (isinstance(escape_tol, str) and escape_tol == "auto"):
            escape_tol = _check_tol("escape_tol", escape_tol, 1.0, np.inf)
        self.escape_tol = escape_tol
        self.loss_tol = _check_tol("loss_tol", loss_tol, 0.0, np.inf)
        if not isinstance(dense, bool):
            raise ValueError(f"`dense` must be True or False; got {dense!r}.")
        if dense and backend == "scipy":
            raise ValueError("`dense` must be False for backend='scipy' (diffrax only).")
        self.dense = dense
        if not (isinstance(real_time, bool) or real_time == "auto"):
            raise ValueError(f"`real_time` must be True, False or 'auto'; got {real_time!r}.")
        self.real_time = real_time

    def clock(self, method, rescaled: bool) -> bool:
        """Whether the rescaled flow of ``method`` carries the real time."""
        if not rescaled:
            return False
        return method.time_dependent if self.real_time == "auto" else self.real_time

    def escape(self, rescaled: bool) -> float | None:
        """The escape threshold, ``"auto"`` resolved for the (rescaled) flow."""
        if isinstance(self.escape_tol, str):
            return 1e6 if rescaled else None
        return self.escape_tol

    def controller(self) -> diffrax.PIDController:
        """The PID step-size controller of the diffrax backend (one definition).

        Integral coefficient 1 for explicit solvers, 0.3 for implicit ones (diffrax's
        recommendations), proportional 0.4.
        """
        implicit = isinstance(self.solver, diffrax.AbstractImplicitSolver)
        return diffrax.PIDController(
            rtol=self.rtol, atol=self.atol, pcoeff=0.4, icoeff=0.3 if implicit else 1.0
        )

    def replace(self, **changes) -> "SolverOptions":
        """A copy with some options changed (validated again)."""
        kw = {k: getattr(self, k) for k in _FIELDS}
        kw.update(changes)
        return SolverOptions(**kw)


_FIELDS = tuple(inspect.signature(SolverOptions.__init__).parameters)[1:]
# The defaults, one definition (flows.solve's keywords take them).
OPTION_DEFAULTS = {
    k: p.default for k, p in inspect.signature(SolverOptions.__init__).parameters.items()
    if k != "self"
}  # fmt: skip
