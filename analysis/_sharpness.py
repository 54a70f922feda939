r"""Sharpness along a trajectory: trace and top eigenvalue of the loss Hessian in parameter space,
and the norm of the margin's gradient that the ℓ2 perturbation divides by.

For the training loss :math:`\mathcal L(\theta)=\frac1n\sum_i\ell(m_i(\theta))`, with margins
:math:`m_i=y_i\langle\beta(\theta),x_i\rangle` and :math:`\theta\in\mathbb R^{L\times d}`
flattened to :math:`L\cdot d` parameters,

.. math::
    H(\theta)=\nabla^2_\theta\mathcal L
    =\frac1n\sum_i\Big(\ell''(m_i)\,\nabla m_i\nabla m_i^\top+\ell'(m_i)\,\nabla^2 m_i\Big),

where :math:`\partial m_i/\partial w^{(l)}_j=y_ix_{ij}\prod_{k\ne l}w^{(k)}_j` and
:math:`\nabla^2m_i` couples only different layers of the same coordinate. Each weight enters
:math:`m_i` linearly, so :math:`\operatorname{diag}\nabla^2 m_i=0` and

.. math::
    \operatorname{tr}H=\frac1n\sum_i\ell''(m_i)\,\lVert\nabla m_i\rVert_2^2\ \ge0 .

The Hessian is taken in **parameter space** (θ), not in predictor space (β): the LE-SAM
paper's flatness claim (lower Hessian trace and top eigenvalue than SAM; docs/theory.md §17) is
about the Hessian of the loss with respect to the trained weights, and the two differ for
:math:`L\ge2` (the β-Hessian :math:`\frac1n\sum_i\ell''(m_i)x_ix_i^\top` ignores the
factorisation). :math:`\lambda_{\max}` is the largest (algebraic) eigenvalue; for
:math:`L\ge2` the term :math:`\ell'\nabla^2m_i` is indefinite, so :math:`H` can have negative
eigenvalues (near the origin, a saddle), and :math:`\lambda_{\max}` is what "sharpness" means
in the SAM literature. Everything is computed by autodiff (:func:`jax.hessian` of
:func:`flows.objective`) and :func:`jax.numpy.linalg.eigvalsh`; ``L·d`` is small here.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import as_array, check_data, check_loss, unit_and_norm

from ._inputs import check_positive, check_trajectory


class Sharpness(NamedTuple):
    r"""Result of :func:`sharpness`, one value per saved time (NaN where not reached).

    ``trace``: :math:`\operatorname{tr}\nabla^2_\theta\mathcal L`; ``top``: its largest
    eigenvalue :math:`\lambda_{\max}`; ``grad_norm``: :math:`\lVert\nabla_\theta\mathcal L\rVert_2`
    (the norm LE-SAM divides its loss budget by: its cap :math:`\rho_{\max}` binds where
    :math:`\lVert\nabla\mathcal L\rVert<\sigma/\rho_{\max}-\varrho`).
    """

    trace: np.ndarray  # (T,)
    top: np.ndarray  # (T,)
    grad_norm: np.ndarray  # (T,)


def _point(theta, data, loss):
    """(trace, λ_max, ‖∇L‖) at one θ of shape (L, d)."""
    shape = theta.shape

    def flat_objective(flat):
        return flows.objective(flat.reshape(shape), data, loss)

    flat = theta.reshape(-1)
    hess = jax.hessian(flat_objective)(flat)
    hess = 0.5 * (hess + hess.T)  # exact in theory; removes rounding asymmetry for eigvalsh
    grad = jax.grad(flat_objective)(flat)
    return jnp.trace(hess), jnp.linalg.eigvalsh(hess)[-1], jnp.linalg.norm(grad)


def _reached_states(traj, data, loss, what):
    """(states, reached) of ``traj`` on ``data``: the saved θ with each unreached one replaced
    by a reached one (so that a vmapped evaluation stays finite; mask the results with
    ``reached``). ValueError where ``data`` or ``loss`` is not the trajectory's (``loss`` None:
    not checked), or a reached state is not finite (``what`` names the quantity that is then
    undefined)."""
    thetas = np.asarray(traj.thetas, dtype=np.float64)
    if thetas.ndim != 3 or thetas.shape[-1] != data.d:
        raise ValueError(
            f"`data` has d = {data.d} features; `traj` has states of shape {thetas.shape[1:]} "
            "(L, d): pass the dataset the trajectory was solved on."
        )
    reached = np.asarray(traj.reached, dtype=bool)
    if not reached.any():
        return thetas, reached
    bad = reached & ~np.all(np.isfinite(thetas), axis=(-2, -1))
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"`traj` holds a non-finite state at the reached time t = {float(traj.ts[k]):g}; "
            f"{what} is undefined."
        )
    safe = np.where(reached[:, None, None], thetas, thetas[np.argmax(reached)])
    if loss is None:
        return safe, reached
    recomputed = np.asarray(jax.vmap(flows.objective, (0, None, None))(safe, data, loss))
    stored = np.asarray(traj.loss)
    if not np.allclose(recomputed[reached], stored[reached], rtol=1e-9, atol=1e-300):
        raise ValueError(
            f"`data` / `loss`: the {loss} loss on this dataset disagrees with `traj.loss` "
            f"(e.g. {recomputed[reached][0]:.6g} against {stored[reached][0]:.6g}); pass the "
            "dataset and loss the trajectory was trained with."
        )
    return safe, reached


_points = jax.jit(jax.vmap(_point, in_axes=(0, None, None)), static_argnums=2)


def sharpness(traj: flows.Trajectory, data: flows.Dataset, loss: str = "logistic") -> Sharpness:
    r"""Trace and top eigenvalue of the loss Hessian in θ at every saved time of ``traj``.

    :math:`\mathcal L(\theta)=\frac1n\sum_i\ell(y_i\langle\beta(\theta),x_i\rangle)` on ``data``
    with ``loss``; the Hessian is over all :math:`L\cdot d` weights (see the module docstring
    for its closed form, and for why θ rather than β). Works for any trajectory of
    :func:`flows.solve` or :func:`flows.iterate` (plain, rescaled or discrete: the Hessian is a
    function of θ alone, whatever the clock).

    Arguments:
        traj: a single :class:`flows.Trajectory` (not a vmapped batch).
        data: the :class:`flows.Dataset` it was trained on.
        loss: ``"logistic"`` or ``"exponential"``, the loss it was trained with.

    Returns:
        :class:`Sharpness` of float64 arrays of shape ``(T,)``; NaN exactly at the saved
        times after ``traj.t_end`` (``traj.reached`` is False there).

    Raises:
        ValueError: ``traj`` is not a single trajectory, ``data`` is not a Dataset or has
            another ``d`` than ``traj``'s states, ``loss`` is unknown, the loss recomputed on
            ``data`` with ``loss`` disagrees with ``traj.loss`` (it was trained on other data or
            with another loss), a reached state is not finite, or the Hessian overflows.

    >>> import flows, analysis
    >>> data = flows.single_example([2.0])
    >>> traj = flows.solve(flows.GD(), data, [[0.0]], t1=1.0, ts=[0.0])
    >>> analysis.sharpness(traj, data).trace.tolist()  # L = 1, β = 0: ℓ''(0) μ² = 1/4 · 4
    [1.0]
    """
    traj = check_trajectory(traj)
    data = check_data(data)
    loss = check_loss(loss)
    safe, reached = _reached_states(traj, data, loss, "its sharpness")
    if not reached.any():
        nan = np.full(reached.shape, np.nan)
        return Sharpness(nan, nan.copy(), nan.copy())
    trace, top, gnorm = (np.asarray(a) for a in _points(jnp.asarray(safe), data, loss))
    out = np.stack([trace, top, gnorm])
    if not np.all(np.isfinite(out[:, reached])):
        k = int(np.argmax(~np.all(np.isfinite(out), axis=0) & reached))
        raise ValueError(
            f"`traj`: the Hessian of the {loss} loss is not finite at t = "
            f"{float(traj.ts[k]):g} (float64 overflow of ℓ', ℓ'' at margin "
            f"{float(np.min(np.asarray(flows.margins(safe[k], data)))):.6g})."
        )
    out[:, ~reached] = np.nan
    return Sharpness(*out)


def _margin_grad_norm(theta, data):
    """‖∇_θ m(θ)‖₂ at one θ of shape (L, d), one example; scaled, so it neither under- nor
    overflows where the squares would."""
    grad = jax.grad(lambda th: flows.margins(th, data)[0])(theta)
    return unit_and_norm(grad)[1]


_margin_grad_norms = jax.jit(jax.vmap(_margin_grad_norm, in_axes=(0, None)))


def margin_gradient_norm(traj: flows.Trajectory, data: flows.Dataset) -> np.ndarray:
    r""":math:`\lVert\nabla_\theta m(\theta(t_k))\rVert_2` at the saved times :math:`t_k`: the norm
    of the gradient of one example's margin :math:`m=y\langle\beta(\theta),x\rangle`, with
    :math:`\partial m/\partial w^{(l)}_j=yx_j\prod_{k\ne l}w^{(k)}_j`.

    For one example :math:`g=\nabla\mathcal L=\ell'(m)\nabla m` with :math:`\ell'<0`, so
    :math:`\lVert g\rVert=\lvert\ell'(m)\rvert\,\lVert\nabla m\rVert` and the ℓ2 perturbation is
    :math:`\rho\,g/\lVert g\rVert=-\rho\,\nabla m/\lVert\nabla m\rVert`: the norm it divides
    by, once the loss factor :math:`\lvert\ell'(m)\rvert` that ``g`` and ``‖g‖`` share cancels.
    For ℓ2-SAM at :math:`L=2` from a balanced start the log-growth rates are
    :math:`d\log\lvert\beta_j\rvert/d\tau=2\mu_j(1-\rho\mu_j/\lVert\nabla m\rVert)` on the rescaled
    clock (docs/theory.md §9). :math:`\lVert g\rVert` itself is :attr:`Sharpness.grad_norm`.

    Arguments:
        traj: a single :class:`flows.Trajectory` (plain, rescaled or discrete: the norm is a
            function of θ alone).
        data: the one-example :class:`flows.Dataset` it was solved on.

    Returns:
        float64 array of shape ``(T,)``; NaN exactly at the saved times after ``traj.t_end``.

    Raises:
        ValueError: ``traj`` is not a single trajectory, ``data`` is not a one-example Dataset
            with the ``d`` of ``traj``'s states, or a reached state is not finite.

    >>> import flows, analysis
    >>> data = flows.single_example([3.0, 4.0])
    >>> traj = flows.solve(flows.GD(), data, flows.balanced_init(1.0, 2, 2), t1=1.0, ts=[0.0])
    >>> analysis.margin_gradient_norm(traj, data).tolist()  # √2 ‖μ ⊙ w‖ = 5√2
    [7.0710678118654755]
    """
    traj = check_trajectory(traj)
    data = check_data(data)
    if data.n != 1:
        raise ValueError(
            f"`data` must hold one example (the margin m of a single example); got n = {data.n}."
        )
    safe, reached = _reached_states(traj, data, None, "the margin's gradient")
    if not reached.any():
        return np.full(reached.shape, np.nan)
    out = np.asarray(_margin_grad_norms(jnp.asarray(safe), data), dtype=np.float64)
    return np.where(reached, out, np.nan)


class Radius(NamedTuple):
    r"""Result of :func:`lesam_radius`: LE-SAM's radius along a run.

    ``rho``: :math:`\rho_t=\lVert\varepsilon\rVert_2` at each saved time (NaN where not
    reached); ``budget``: True where the loss-equated branch sets it,
    :math:`\rho_t=\sigma(t)/(\lVert\nabla\mathcal L\rVert+\varrho)<\rho_{\max}`, False where the
    cap binds (and where not reached); ``mean``: :math:`\bar\rho`, the time average of
    :math:`\rho_t` on the real clock over the saved times (see :func:`lesam_radius`).
    """

    rho: np.ndarray  # (T,)
    budget: np.ndarray  # (T,) bool
    mean: float


def _radius_point(method, theta, t, data, loss):
    """(ε of ``method``, ε of ℓ2-SAM(ρ_max)) at θ, both from flows' rules, g = ∇L(θ)."""
    grad = jax.grad(flows.objective)(theta, data, loss)
    capped = flows.L2SAM(method.rho_max)
    return method.perturbation(theta, grad, t), capped.perturbation(theta, grad, t)


@eqx.filter_jit  # a schedule σ(t) is a function: static, as every non-array
def _radius_points(method, thetas, ts, data, loss):
    return jax.vmap(lambda theta, t: _radius_point(method, theta, t, data, loss))(thetas, ts)


def lesam_radius(
    traj: flows.Trajectory, data: flows.Dataset, method, loss: str = "logistic", until=None
) -> Radius:
    r"""LE-SAM's radius :math:`\rho_t`, its branch and its time average along a trajectory.

    At each saved state, with :math:`g=\nabla\mathcal L(\theta)` and the real time :math:`t`,
    :math:`\rho_t=\lVert\varepsilon(\theta,g,t)\rVert_2` where :math:`\varepsilon` is
    ``method``'s own perturbation (:meth:`flows.LESAM.perturbation`, the rule of
    docs/theory.md §2: :math:`\rho_t=\min(\sigma(t)/(\lVert g\rVert+\varrho),\rho_{\max})`
    along the unit vector :math:`g/\lVert g\rVert`). The cap binds exactly where the rule returns
    ℓ2-SAM(:math:`\rho_{\max}`)'s perturbation :math:`\rho_{\max}g/\lVert g\rVert` (flows
    computes both from the same unit vector, so the test is exact, not to rounding);
    elsewhere the loss-equated branch sets :math:`\rho_t` (``budget``).

    The time average is on the real clock :math:`t` (``traj.t_real``: the time of a plain
    flow, :math:`k\eta` of discrete updates),

    .. math::
        \bar\rho=\frac1{t_K-t_0}\int_{t_0}^{t_K}\rho_t\,dt,

    over the reached saved times :math:`t_0<\dots<t_K\le` ``until``, by the trapezoidal rule: its
    error is :math:`O(h^2\max|\ddot\rho_t|)` for saving steps :math:`h`, so the saving grid
    must resolve where :math:`\rho_t` changes (the loss-equated branch).

    Arguments:
        traj: a single :class:`flows.Trajectory` of ``method`` (plain, discrete, or rescaled
            with the real time carried).
        data: the :class:`flows.Dataset` it was trained on.
        method: the :class:`flows.LESAM` it was trained with (constant σ or a schedule).
        loss: ``"logistic"`` or ``"exponential"``, the loss it was trained with.
        until: the real time up to which :math:`\rho_t` is averaged, a saved one (None: the
            last reached saved time).

    Returns:
        :class:`Radius`.

    Raises:
        ValueError: ``method`` is not a :class:`flows.LESAM`; ``traj``, ``data`` or ``loss``
            as in :func:`sharpness`; fewer than two reached saved times, or a real time that is
            not finite and increasing on them (a rescaled flow without ``t_real``); ``until``
            is not a reached saved real time after the first.

    >>> import flows, analysis
    >>> data = flows.single_example([2.0])
    >>> traj = flows.solve(flows.GD(), data, [[0.0]], t1=1.0, ts=[0.0, 1.0])
    >>> r = analysis.lesam_radius(traj, data, flows.LESAM(0.25, 1.0))  # at t = 0, ‖g‖ = 1
    >>> round(float(r.rho[0]), 12), r.budget.tolist()
    (0.25, [True, True])
    >>> r = analysis.lesam_radius(traj, data, flows.LESAM(5.0, 0.3))  # the cap binds
    >>> r.rho.round(12).tolist(), r.budget.tolist(), round(r.mean, 12)
    ([0.3, 0.3], [False, False], 0.3)
    """
    if not isinstance(method, flows.LESAM):
        raise ValueError(f"`method` must be a flows.LESAM; got {type(method).__name__}.")
    traj = check_trajectory(traj)
    data = check_data(data)
    loss = check_loss(loss)
    safe, reached = _reached_states(traj, data, loss, "LE-SAM's radius")
    t = np.asarray(traj.t_real, dtype=np.float64)[reached]
    if t.size < 2 or not np.all(np.isfinite(t)) or not np.all(np.diff(t) > 0):
        raise ValueError(
            "`traj` must have at least two reached saving times with a finite, increasing real "
            f"time (solve a rescaled flow with real_time=True); got t = {t!r}."
        )
    times = np.where(reached, np.asarray(traj.t_real, dtype=np.float64), t[0])
    eps, capped = (
        np.asarray(a).reshape(reached.size, -1)
        for a in _radius_points(method, jnp.asarray(safe), jnp.asarray(times), data, loss)
    )
    rho = np.linalg.norm(eps, axis=1)
    budget = np.any(eps != capped, axis=1) & reached
    rho[~reached] = np.nan
    if not np.all(np.isfinite(rho[reached])):
        raise ValueError("`traj`: LE-SAM's radius is not finite on a reached state.")
    r = rho[reached]
    if until is not None:
        until = check_positive("until", until)
        if not np.any(t[1:] == until):
            raise ValueError(f"`until` must be a reached saved real time after t_0; got {until}.")
        r, t = r[t <= until], t[t <= until]
    mean = float(np.sum(np.diff(t) * (r[1:] + r[:-1]) / 2) / (t[-1] - t[0]))
    return Radius(rho, budget, mean)


def at_loss(loss, values, levels) -> np.ndarray:
    r"""``values`` of a run at the loss ``levels``: linear interpolation in
    :math:`(\log\mathcal L,\log v)` between the saved points around each level.

    Exact for :math:`v\propto\mathcal L^p`; otherwise its error is at most
    :math:`h^2\max|f''|/8` for :math:`f=\log v` as a function of :math:`\log\mathcal L` and a
    log-loss step :math:`h` between saved points. It compares runs at equal loss (a method
    against GD, the loss falling at different rates).

    Arguments:
        loss: the run's training loss at its saved times, 1-D, strictly decreasing and > 0
            where finite (NaN only after the run stopped: those points are left out).
        values: a positive quantity at the same times (e.g. :func:`sharpness`'s trace).
        levels: the losses at which to read ``values``.

    Returns:
        float64 array of the shape of ``levels``; NaN at a level outside the run's losses.

    Raises:
        ValueError: naming ``loss``, ``values`` or ``levels`` when they are not as above.

    >>> import numpy as np, analysis
    >>> analysis.at_loss([1.0, 0.1, 0.01], [2.0, 0.2, 0.02], [0.5, 1e-3]).round(12).tolist()
    [1.0, nan]
    """
    loss, values, levels = (
        np.asarray(as_array(name, x, "an array of real numbers"))
        for name, x in (("loss", loss), ("values", values), ("levels", levels))
    )
    if loss.ndim != 1 or values.shape != loss.shape:
        raise ValueError(
            f"`loss` and `values` must be 1-D arrays of one shape; got {loss.shape} and "
            f"{values.shape}."
        )
    keep = np.isfinite(loss)
    if keep.sum() < 2 or not np.all(keep[: keep.sum()]):
        raise ValueError("`loss` must be finite at two saved times at least, NaN only at the end.")
    loss, values = loss[keep], values[keep]
    if not (np.all(loss > 0) and np.all(np.diff(loss) < 0)):
        raise ValueError("`loss` must be > 0 and strictly decreasing along the run.")
    if not (np.all(np.isfinite(values)) and np.all(values > 0)):
        raise ValueError("`values` must be finite and > 0 where `loss` is finite.")
    if not np.all(np.isfinite(levels) & (levels > 0)):
        raise ValueError(f"`levels` must be finite and > 0; got {levels!r}.")
    x, y = -np.log(loss), np.log(values)  # x increasing
    out = np.exp(np.interp(-np.log(levels), x, y))
    return np.where((levels <= loss[0]) & (levels >= loss[-1]), out, np.nan)
