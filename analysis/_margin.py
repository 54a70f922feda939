r"""Max-margin directions and directional convergence of :math:`\beta(t)` (claims C1–C3).

With :math:`z_i=y_ix_i`, the :math:`\ell_p` max-margin classifier is

.. math::
    \hat\beta_p=\arg\min\{\lVert\beta\rVert_p:\ \langle\beta,z_i\rangle\ge1\ \forall i\},

which exists iff the data are linearly separable through the origin. C1 says that at
:math:`L=1` GD, ℓ2-SAM and ℓ∞-SAM converge in direction to :math:`\hat\beta_2`; C3 that
ℓ2-SAM at :math:`L=2` converges to :math:`\hat\beta_1`.
"""

from typing import NamedTuple

import numpy as np
import scipy.optimize

import flows
from flows.internal import as_array, check_data

from ._inputs import check_kind, check_trajectory


def _check_data(data) -> np.ndarray:
    check_data(data)
    return np.asarray(data.y)[:, None] * np.asarray(data.X)  # z_i = y_i x_i, (n, d)


def max_margin(data: flows.Dataset, p) -> np.ndarray:
    r"""Unit-norm :math:`\ell_p` max-margin direction :math:`\hat\beta_p/\lVert\hat\beta_p\rVert_2`.

    * :math:`p=2`: the QP :math:`\min\tfrac12\lVert w\rVert_2^2` s.t. :math:`Zw\ge1`, solved
      with scipy's SLSQP from a feasible start (unique solution);
    * :math:`p=1`: the LP :math:`\min\mathbf 1^\top(u+v)` s.t. :math:`Z(u-v)\ge1`,
      :math:`u,v\ge0`, solved with scipy's HiGHS ``linprog`` (a vertex solution; the
      minimiser is unique for data in general position).

    Separability is checked first with the feasibility LP :math:`Zw\ge1`, each row
    :math:`z_i` divided by :math:`\max_j|z_{ij}|` (row scaling does not change
    whether some :math:`w` has :math:`\langle w,z_i\rangle>0` for all :math:`i`). The QP and
    the LP then use :math:`Z/\max_{ij}|z_{ij}|`: a common positive factor scales the
    minimiser and leaves its direction unchanged, so the answer is the same for
    features of any magnitude (1e-200 or 1e200), and the solvers' absolute
    tolerances act on numbers of order 1.
    The result is normalised in the Euclidean norm, so that it can be compared with
    :math:`\beta(t)/\lVert\beta(t)\rVert_2` by a cosine.

    Arguments:
        data: a :class:`flows.Dataset`, linearly separable through the origin.
        p: 1 or 2.

    Raises:
        ValueError: ``data`` is not separable, or ``p`` is not 1 or 2.

    >>> import flows, analysis
    >>> data = flows.Dataset([[1.0, 2.0], [-1.0, 0.0]], [1, -1])  # z = (1, 2), (1, 0)
    >>> analysis.max_margin(data, 2).round(6).tolist(), analysis.max_margin(data, 1).tolist()
    ([1.0, 0.0], [1.0, 0.0])
    """
    z = _check_data(data)
    number = isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool)
    if not number or p not in (1, 2):
        raise ValueError(f"`p` must be 1 or 2; got {p!r}.")
    n, d = z.shape
    rows = np.max(np.abs(z), axis=1, keepdims=True)  # (n, 1); 0 for x_i = 0
    unit_rows = z / np.where(rows > 0, rows, 1.0)
    feasible = scipy.optimize.linprog(
        np.zeros(d),
        A_ub=-unit_rows,
        b_ub=-np.ones(n),
        bounds=(None, None),
        method="highs",
    )
    if feasible.status != 0 or not np.min(unit_rows @ feasible.x) > 0:
        raise ValueError(
            "`data` is not linearly separable through the origin (no w with y_i <w, x_i> >= 1 "
            f"for all i; HiGHS: {feasible.message})."
        )
    z = z / np.max(rows)  # (n, d), max |z_ij| = 1; the same max-margin direction
    if not np.all(np.any(z != 0, axis=1)):
        raise ValueError(
            "`data`: the examples y_i x_i differ in magnitude by more than float64 can hold "
            f"(largest/smallest row max {np.max(rows):.3g}/{np.min(rows):.3g}); rescale them."
        )
    if p == 1:
        res = scipy.optimize.linprog(
            np.ones(2 * d),
            A_ub=-np.hstack([z, -z]),
            b_ub=-np.ones(n),
            bounds=(0, None),
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"max_margin: linprog failed: {res.message}")
        w = res.x[:d] - res.x[d:]
    else:
        start = feasible.x / np.min(z @ feasible.x)  # feasible for the scaled z: z w >= 1
        res = scipy.optimize.minimize(
            lambda w: 0.5 * w @ w,
            start,
            jac=lambda w: w,
            method="SLSQP",
            constraints=[{"type": "ineq", "fun": lambda w: z @ w - 1.0, "jac": lambda w: z}],
            # With max |z_ij| = 1, f* = ‖w*‖²/2 is O(1) or more, where ftol 1e-15 sits at
            # rounding level and the line search fails ("positive directional derivative",
            # 14 of 300 random datasets); 1e-14 fails none, with the same directions
            # (max deviation 8e-13 from an NNLS min-norm-in-hull reference).
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        w = res.x
        if not res.success or np.min(z @ w) < 1 - 1e-8:
            raise RuntimeError(f"max_margin: SLSQP failed: {res.message}")
    return w / np.linalg.norm(w)


def _unit(direction, d: int) -> np.ndarray:
    v = np.asarray(as_array("direction", direction, f"a finite nonzero vector of shape ({d},)"))
    if v.shape != (d,) or not np.all(np.isfinite(v)) or not np.any(v != 0):
        raise ValueError(
            f"`direction` must be a finite nonzero vector of shape ({d},); got {direction!r}."
        )
    return v / np.linalg.norm(v)


def limit_direction(traj: flows.Trajectory) -> np.ndarray:
    r"""The direction :math:`\beta(t_{end})/\lVert\beta(t_{end})\rVert_2` at the end of the run.

    This is the estimate of :math:`\lim_{t\to\infty}\beta(t)/\lVert\beta(t)\rVert` that a
    finite run gives; :func:`direction_cosine` and :func:`convergence_rate` say how far
    it is from a predicted limit and how fast it approaches it.

    Arguments:
        traj: a :class:`flows.Trajectory` whose final :math:`\beta` is finite and nonzero.

    >>> import flows, analysis
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0, 2.0]),
    ...                    flows.balanced_init(0.5, 2, 2), t1=20.0, rescaled=True)
    >>> analysis.limit_direction(traj).round(4).tolist()  # GD, L = 2 -> e_{argmax μ}
    [0.0, 1.0]
    """
    traj = check_trajectory(traj)
    b = np.asarray(flows.beta(traj.theta_end))
    if not np.all(np.isfinite(b)) or not np.any(b != 0):
        raise ValueError(
            f"`traj` ends at a non-finite or zero beta ({b!r}, status "
            f"{traj.status_name}); it has no direction."
        )
    return b / np.linalg.norm(b)


def direction_cosine(traj: flows.Trajectory, direction) -> np.ndarray:
    r"""Cosine to a direction :math:`v` at each saved time :math:`t_k`,

    .. math::
        \cos\angle(\beta(t_k),v)=\frac{\langle\beta(t_k),v\rangle}
        {\lVert\beta(t_k)\rVert\,\lVert v\rVert}.

    Times the run did not reach, and times where :math:`\beta=0`, give NaN.

    Arguments:
        traj: a :class:`flows.Trajectory`.
        direction: the vector :math:`v`, shape ``(d,)``, nonzero.

    >>> import flows, analysis
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0, 2.0]),
    ...                    flows.balanced_init(0.5, 2, 2), t1=1.0, rescaled=True, ts=[0.0])
    >>> analysis.direction_cosine(traj, [1.0, 0.0]).round(6).tolist()
    [0.707107]
    """
    traj = check_trajectory(traj)
    b = np.asarray(traj.beta)
    v = _unit(direction, b.shape[-1])
    norm = np.linalg.norm(b, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (b @ v) / norm
    return np.where(np.asarray(traj.reached) & (norm > 0), cos, np.nan)


class Rate(NamedTuple):
    """Result of :func:`convergence_rate`: ``gap ≈ prefactor * g(t)**(-rate)`` (see the model)."""

    rate: float
    prefactor: float
    model: str
    n_points: int


_MODELS = {
    # name: (abscissa x(t), "gap = C exp(-rate x)")
    "exp": lambda t: t,
    "power": np.log,
    "log": lambda t: np.log(np.log(t)),
}


def convergence_rate(
    traj: flows.Trajectory, direction, *, model: str = "log", tail: float = 0.5
) -> Rate:
    r"""Fitted rate at which :math:`1-\cos\angle(\beta(t),v)` goes to 0.

    Least squares of :math:`\log(1-\cos)` against :math:`x(t)` over the last ``tail``
    fraction of the reached saved times (with :math:`x` finite and the gap > 0), for

    * ``"exp"``: :math:`1-\cos\approx Ce^{-\kappa t}` (rescaled flows, :math:`x=t`);
    * ``"power"``: :math:`1-\cos\approx Ct^{-\kappa}` (:math:`x=\log t`);
    * ``"log"``: :math:`1-\cos\approx C(\log t)^{-\kappa}` (logistic-loss flows, where
      the angle to the max-margin direction decays like :math:`1/\log t`, so
      :math:`\kappa=2`; :math:`x=\log\log t`).

    Returns :class:`Rate` ``(rate κ, prefactor C, model, n_points)``.

    Arguments:
        traj: a :class:`flows.Trajectory`.
        direction: the limit :math:`v`, shape ``(d,)``.
        model: ``"exp"``, ``"power"`` or ``"log"``.
        tail: fraction in (0, 1] of the reached saved times to fit.

    >>> import flows, analysis, numpy as np
    >>> # GD, L = 2: β_j ∝ e^{2 μ_j τ}, so 1 − cos(β, e_2) ≈ ½ e^{−4(μ_2−μ_1) τ}
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0, 2.0]), flows.balanced_init(
    ...     0.5, 2, 2), t1=6.0, rescaled=True, ts=np.linspace(0, 6, 61))
    >>> round(analysis.convergence_rate(traj, [0.0, 1.0], model="exp").rate, 4)
    4.0
    """
    if not isinstance(model, str) or model not in _MODELS:
        raise ValueError(f"`model` must be one of {sorted(_MODELS)}; got {model!r}.")
    if isinstance(tail, bool) or not isinstance(tail, (int, float)) or not 0 < tail <= 1:
        raise ValueError(f"`tail` must be a number in (0, 1]; got {tail!r}.")
    gap = 1.0 - direction_cosine(traj, direction)
    t = np.asarray(traj.ts)
    idx = np.flatnonzero(np.isfinite(gap))
    idx = idx[int(np.floor(len(idx) * (1 - tail))) :]
    with np.errstate(invalid="ignore", divide="ignore"):
        x = _MODELS[model](t[idx])
    keep = np.isfinite(x) & (gap[idx] > 0)
    if np.sum(keep) < 2:
        raise ValueError(
            "`traj` has fewer than 2 usable saved times in the fitted tail "
            "(need a reached time with x(t) finite and 1 - cos > 0)."
        )
    slope, intercept = np.polyfit(x[keep], np.log(gap[idx][keep]), 1)
    return Rate(float(-slope), float(np.exp(intercept)), model, int(np.sum(keep)))


def limit_class(status, beta) -> np.ndarray:
    r"""The end state of runs: 0 collapsed (β → 0), :math:`1+\arg\max_j|\beta_j|` (1-based), -1
    a solver failure (status ``max_steps`` / ``nonfinite`` / ``sliding_failed``).

    Arguments:
        status: :class:`flows.Status` codes, shape ``(...)``; beta: the final β, ``(..., d)``.

    >>> import numpy as np, flows, analysis
    >>> analysis.limit_class([flows.Status.ESCAPED, flows.Status.COLLAPSED],
    ...                      np.array([[1.0, 3.0], [1e-9, 0.0]])).tolist()
    [2, 0]
    """
    check_kind("status", status, "iu")
    status = np.asarray(status)
    beta = np.asarray(as_array("beta", beta, "an (..., d) array of real numbers"))
    if beta.ndim < 1 or beta.shape[-1] < 1 or beta.shape[:-1] != status.shape:
        raise ValueError(
            f"`beta` must have shape `status`.shape + (d,) = {status.shape} + (d,), d >= 1; got "
            f"shape {beta.shape}."
        )
    cls = np.argmax(np.abs(beta), axis=-1) + 1
    cls = np.where(status == flows.Status.COLLAPSED, 0, cls)
    ok = np.isin(status, [flows.Status.COLLAPSED, flows.Status.OK, flows.Status.ESCAPED])
    return np.where(ok, cls, -1)


def convergence_order(steps, errors) -> float:
    r"""The fitted order :math:`p` of :math:`\text{error}\approx C\,\eta^p`: least-squares slope of
    :math:`\log\text{error}` against :math:`\log\eta` over the finite, positive errors (NaN with
    fewer than two).

    >>> import analysis
    >>> round(analysis.convergence_order([0.1, 0.05, 0.025], [0.3, 0.15, 0.075]), 12)
    1.0
    """
    steps = np.asarray(as_array("steps", steps, "a 1-D array of step sizes"))
    errors = np.asarray(as_array("errors", errors, "a 1-D array of errors"))
    if steps.ndim != 1 or errors.shape != steps.shape:
        raise ValueError(
            f"`steps` and `errors` must be 1-D arrays of one length; got shapes {steps.shape} "
            f"and {errors.shape}."
        )
    ok = np.isfinite(errors) & (errors > 0) & np.isfinite(steps) & (steps > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(steps[ok]), np.log(errors[ok]), 1)[0])


class LogLaw(NamedTuple):
    """Result of :func:`log_law`: ``y ≈ offset + per_decade * log10(x)``."""

    per_decade: float
    offset: float


def log_law(x, y) -> LogLaw:
    r"""The logarithmic law :math:`y\approx a+b\log_{10}x` by least squares: :math:`b`, the change
    of :math:`y` per decade of :math:`x`, and :math:`a`, over the pairs with :math:`x>0` and both
    finite (NaN for both with fewer than two).

    A time spent near a hyperbolic saddle grows this way as the start approaches the saddle's
    stable manifold: :math:`\tau\approx\lambda^{-1}\ln(1/\delta)`, :math:`b=-\ln10/\lambda`
    for the distance :math:`\delta` and the unstable rate :math:`\lambda`.

    >>> import analysis
    >>> law = analysis.log_law([1e-3, 1e-2, 1e-1], [9.0, 7.0, 5.0])
    >>> round(law.per_decade, 12), round(law.offset, 12)
    (-2.0, 3.0)
    """
    x = np.asarray(as_array("x", x, "a 1-D array of numbers > 0"))
    y = np.asarray(as_array("y", y, "a 1-D array of numbers"))
    if x.ndim != 1 or y.shape != x.shape:
        raise ValueError(
            f"`x` and `y` must be 1-D arrays of one length; got shapes {x.shape} and {y.shape}."
        )
    ok = np.isfinite(x) & (x > 0) & np.isfinite(y)
    if ok.sum() < 2:
        return LogLaw(float("nan"), float("nan"))
    b, a = np.polyfit(np.log10(x[ok]), y[ok], 1)
    return LogLaw(float(b), float(a))
