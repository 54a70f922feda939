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

import jax
import jax.numpy as jnp
import numpy as np

import flows
from flows._methods import _unit
from flows._problem import check_loss

from ._problem import check_data, check_trajectory


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


def _reached_states(traj, data):
    """``(thetas (T, L, d), reached (T,))`` of a checked trajectory, after checking that its states
    have the ``d`` of ``data`` and that every reached state is finite (``ValueError`` otherwise)."""
    thetas = np.asarray(traj.thetas, dtype=np.float64)
    if thetas.ndim != 3 or thetas.shape[-1] != data.d:
        raise ValueError(
            f"`data` has d = {data.d} features; `traj` has states of shape {thetas.shape[1:]} "
            "(L, d): pass the dataset the trajectory was solved on."
        )
    reached = np.asarray(traj.reached, dtype=bool)
    bad = reached & ~np.all(np.isfinite(thetas), axis=(-2, -1))
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(
            f"`traj` holds a non-finite state at the reached time t = {float(traj.ts[k]):g}; "
            "the quantities there are undefined."
        )
    return thetas, reached


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
    thetas, reached = _reached_states(traj, data)
    if not reached.any():
        nan = np.full(thetas.shape[0], np.nan)
        return Sharpness(nan, nan.copy(), nan.copy())
    # Unreached states are NaN: evaluate a reached one in their place, then mask.
    safe = np.where(reached[:, None, None], thetas, thetas[np.argmax(reached)])
    recomputed = np.asarray(jax.vmap(flows.objective, (0, None, None))(safe, data, loss))
    stored = np.asarray(traj.loss)
    if not np.allclose(recomputed[reached], stored[reached], rtol=1e-9, atol=1e-300):
        raise ValueError(
            f"`data` / `loss`: the {loss} loss on this dataset disagrees with `traj.loss` "
            f"(e.g. {recomputed[reached][0]:.6g} against {stored[reached][0]:.6g}); pass the "
            "dataset and loss the trajectory was trained with."
        )
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
    return _unit(grad)[1]


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
    thetas, reached = _reached_states(traj, data)
    if not reached.any():
        return np.full(thetas.shape[0], np.nan)
    safe = np.where(reached[:, None, None], thetas, thetas[np.argmax(reached)])
    out = np.asarray(_margin_grad_norms(jnp.asarray(safe), data), dtype=np.float64)
    return np.where(reached, out, np.nan)
