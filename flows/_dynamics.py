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
  :math:`\tau(t)=\int_0^t-\ell'(m(\hat\theta))\,ds`. The real time is carried along,
  :math:`dt/d\tau=1/(-\ell'(m(\hat\theta)))` (:func:`clock_rate`), and a schedule
  :math:`\sigma(t)` (LE-SAM) is read at :math:`t(\tau)`, not at τ (issue 11).
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


# The clock's rate is capped at e^_LOG_RATE_MAX (1.1e13), and past the cap the time is
# reported as inf. t itself is carried: t = ∫e^{m̂}dτ varies on the scale 1/(dm̂/dτ),
# so its error control takes O(1) steps per unit of margin while dt/dτ < e^30; a log
# clock log(1+t) would relax to m̂ at the rate dm̂/dτ instead, stiff near an escape.
_LOG_RATE_MAX = 30.0


def clock_rate(loss: str, data: Dataset, theta_hat):
    r"""d/dτ of the rescaled flow's clock state :math:`(t, o)`.

    :math:`dt/d\tau=1/(-\ell'(m(\hat\theta)))`, computed as
    :math:`\exp(-\log(-\ell'))` and capped at :math:`e^{30}`, and
    :math:`do/d\tau=\max(0,-\log(-\ell')-30)`, positive once the cap was reached.
    """
    return clock_from_log_rate(-log_speed(loss, _margin(theta_hat, data)) + jnp.log(data.n))


def clock_from_log_rate(log_rate):
    r"""The clock state's derivative from :math:`\log(dt/d\tau)` (see :func:`clock_rate`)."""
    return jnp.stack(
        [jnp.exp(jnp.minimum(log_rate, _LOG_RATE_MAX)), jnp.maximum(log_rate - _LOG_RATE_MAX, 0.0)]
    )


def real_time(clock):
    """The real time from the clock state :math:`(t, o)`: t, or inf once :math:`o>0`."""
    return jnp.where(clock[..., 1] > 0, jnp.inf, clock[..., 0])


class Field(eqx.Module):
    r"""The vector field of the flow, :math:`f(t,\theta)`, or of the rescaled flow.

    With ``clock`` (rescaled flow only) the state is :math:`(\theta, (t, o))` with
    :math:`t` the real time (:func:`clock_rate`), so that a time-dependent rule is
    read at :math:`t(\tau)` and a trajectory reports both clocks; without it the
    rule is read at τ, which is right only for a rule that ignores the time. Use
    :func:`initial_state` and :func:`theta_of` to move between θ and the state.
    """

    method: AbstractMethod
    data: Dataset
    loss: str = eqx.field(static=True)
    rescaled: bool = eqx.field(static=True)
    clock: bool = eqx.field(static=True, default=False)

    def __call__(self, s, y):
        if not self.rescaled:
            return velocity(self.method, self.data, self.loss, y, s)
        if not self.clock:
            return rescaled_velocity(self.method, self.data, self.loss, y, s)
        theta, clock = y
        v, theta_hat = _rescaled(self.method, self.data, self.loss, theta, real_time(clock))
        return v, clock_rate(self.loss, self.data, theta_hat)


def initial_state(theta0, clock: bool):
    """The integrated state at the start: θ₀, or (θ₀, (t, o) = 0) with a clock."""
    return (theta0, jnp.zeros(2, theta0.dtype)) if clock else theta0


def theta_of(y):
    """θ from an integrated state (θ, or (θ, clock))."""
    return y[0] if isinstance(y, tuple) else y


def clock_of(y, s, rescaled: bool):
    """The real time of a state at integration time ``s``: s itself for the plain flow,
    the carried clock, or NaN for a rescaled flow without one (not tracked)."""
    if isinstance(y, tuple):
        return real_time(y[1])
    return jnp.full_like(s, jnp.nan) if rescaled else s


def euler_step(method: AbstractMethod, data: Dataset, loss: str, theta, lr, k):
    r"""One discrete update :math:`\theta+\eta\,v(\theta)` at step ``k`` (time :math:`k\eta`)."""
    return theta + lr * velocity(method, data, loss, theta, k * lr)


def is_finite(y):
    """True when every entry of θ in the state ``y`` (θ, or (θ, clock)) is finite."""
    return jnp.all(jnp.isfinite(theta_of(y)))
