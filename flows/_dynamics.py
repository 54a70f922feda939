r"""The three dynamics built from one perturbation rule.

With :math:`g=\nabla\mathcal L(\theta)` and :math:`\hat\theta=\theta+\varepsilon(\theta,g)`:

* flow: :math:`\dot\theta=v(\theta)=-\nabla\mathcal L(\hat\theta)`;
* discrete update: :math:`\theta_{k+1}=\theta_k+\eta\,v(\theta_k)` (explicit Euler
  on the flow, :math:`t=k\eta`);
* rescaled flow (single example :math:`(x, y)`, margin
  :math:`m(\theta)=y\langle\beta(\theta),x\rangle`): since
  :math:`\nabla\mathcal L(\hat\theta)=\ell'(m(\hat\theta))\nabla m(\hat\theta)` and
  :math:`-\ell'>0`, dividing by it gives
  :math:`d\theta/d\tau=\nabla m(\hat\theta)`, the same path on the clock
  :math:`\tau(t)=\int_0^t-\ell'(m(\hat\theta))\,ds`.
"""

import jax
import jax.numpy as jnp

from ._methods import AbstractMethod
from ._problem import Dataset, loss_derivative, margins, objective

_grad_objective = jax.grad(objective)


def _margin(theta, data: Dataset):
    return margins(theta, data)[0]


_grad_margin = jax.grad(_margin)


def velocity(method: AbstractMethod, data: Dataset, loss: str, theta, t=0.0):
    r"""Flow field :math:`v(\theta)=-\nabla\mathcal L(\hat\theta)`.

    Here :math:`\hat\theta=\theta+\varepsilon(\theta,\nabla\mathcal L(\theta))`.
    """
    g = _grad_objective(theta, data, loss)
    theta_hat = theta + method.perturbation(theta, g, t)
    return -_grad_objective(theta_hat, data, loss)


def rescaled_velocity(method: AbstractMethod, data: Dataset, loss: str, theta, t=0.0):
    r"""Rescaled field :math:`d\theta/d\tau=\nabla m(\hat\theta)` (single example only).

    The perturbation receives :math:`g=\nabla\mathcal L(\theta)` factored as
    ``grad_scale * grad`` with ``grad = -∇m(θ)`` and ``grad_scale = -ℓ'(m(θ))``, so
    the direction stays exact when :math:`\ell'` underflows at large margins.
    """
    grad_m = _grad_margin(theta, data)
    scale = -loss_derivative(loss, _margin(theta, data)) / data.n  # n == 1
    theta_hat = theta + method.perturbation(theta, -grad_m, t, grad_scale=scale)
    return _grad_margin(theta_hat, data)


def field(method: AbstractMethod, data: Dataset, loss: str, rescaled: bool):
    """The vector field ``f(t, theta)`` of the flow or of the rescaled flow."""
    v = rescaled_velocity if rescaled else velocity

    def f(t, theta):
        return v(method, data, loss, theta, t)

    return f


def euler_step(method: AbstractMethod, data: Dataset, loss: str, theta, lr, k):
    r"""One discrete update :math:`\theta+\eta\,v(\theta)` at step ``k`` (time :math:`k\eta`)."""
    return theta + lr * velocity(method, data, loss, theta, k * lr)


def is_finite(theta):
    """True when every entry of ``theta`` is finite."""
    return jnp.all(jnp.isfinite(theta))
