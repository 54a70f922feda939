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
  :math:`\tau(t)=\int_0^t-\ell'(m(\hat\theta))\,ds`. The real time is carried along
  as :math:`c=\log(1+t)`, :math:`dc/d\tau=e^{-\log(-\ell'(m(\hat\theta)))-c}`, which
  stays finite where :math:`t` itself overflows (logistic: :math:`t\sim e^{m}`), and a
  schedule :math:`\sigma(t)` (LE-SAM) is read at :math:`t(\tau)`, not at τ (issue 11).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from ._methods import AbstractMethod
from ._problem import Dataset, log_speed, loss_derivative, margins, objective

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


def _rescaled(method: AbstractMethod, data: Dataset, loss: str, theta, t):
    """The rescaled field and the perturbed point θ̂ it was evaluated at."""
    grad_m = _grad_margin(theta, data)
    scale = -loss_derivative(loss, _margin(theta, data)) / data.n  # n == 1
    theta_hat = theta + method.perturbation(theta, -grad_m, t, grad_scale=scale)
    return _grad_margin(theta_hat, data), theta_hat


def rescaled_velocity(method: AbstractMethod, data: Dataset, loss: str, theta, t=0.0):
    r"""Rescaled field :math:`d\theta/d\tau=\nabla m(\hat\theta)` (single example only).

    The perturbation receives :math:`g=\nabla\mathcal L(\theta)` factored as
    ``grad_scale * grad`` with ``grad = -∇m(θ)`` and ``grad_scale = -ℓ'(m(θ))``, so
    the direction stays exact when :math:`\ell'` underflows at large margins. ``t``
    is the real time (a schedule σ(t) is read there).
    """
    return _rescaled(method, data, loss, theta, t)[0]


def clock_rate(loss: str, data: Dataset, theta_hat, c):
    r""":math:`dc/d\tau` of the real-time clock :math:`c=\log(1+t)` of the rescaled flow.

    :math:`dt/d\tau=1/(-\ell'(m(\hat\theta)))`, so
    :math:`dc/d\tau=\exp(-\log(-\ell'(m(\hat\theta)))-c)`.
    """
    return jnp.exp(-log_speed(loss, _margin(theta_hat, data)) - c)


def real_time(c):
    r"""The real time :math:`t=e^c-1` from the carried clock :math:`c=\log(1+t)`."""
    return jnp.expm1(c)


class Field(eqx.Module):
    r"""The vector field of the flow, :math:`f(t,\theta)`, or of the rescaled flow.

    The rescaled flow's state is :math:`(\theta, c)` with :math:`c=\log(1+t)` the real
    time (:func:`clock_rate`), so that a time-dependent rule is read at :math:`t(\tau)`
    and a trajectory reports both clocks. Use :func:`initial_state` and
    :func:`theta_of` to move between θ and the state.
    """

    method: AbstractMethod
    data: Dataset
    loss: str = eqx.field(static=True)
    rescaled: bool = eqx.field(static=True)

    def __call__(self, s, y):
        if not self.rescaled:
            return velocity(self.method, self.data, self.loss, y, s)
        theta, c = y
        v, theta_hat = _rescaled(self.method, self.data, self.loss, theta, real_time(c))
        return v, clock_rate(self.loss, self.data, theta_hat, c)


def initial_state(theta0, rescaled: bool):
    """The integrated state at the start: θ₀, or (θ₀, c = 0) for the rescaled flow."""
    return (theta0, jnp.zeros((), theta0.dtype)) if rescaled else theta0


def theta_of(y):
    """θ from an integrated state (θ, or (θ, c))."""
    return y[0] if isinstance(y, tuple) else y


def clock_of(y, s):
    """The real time of a state at integration time ``s`` (s itself for the plain flow)."""
    return real_time(y[1]) if isinstance(y, tuple) else s


def euler_step(method: AbstractMethod, data: Dataset, loss: str, theta, lr, k):
    r"""One discrete update :math:`\theta+\eta\,v(\theta)` at step ``k`` (time :math:`k\eta`)."""
    return theta + lr * velocity(method, data, loss, theta, k * lr)


def is_finite(y):
    """True when every entry of the state ``y`` (θ, or (θ, c)) is finite."""
    return jnp.all(jnp.isfinite(theta_of(y)))
