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
  :math:`\sigma(t)` (LE-SAM) is read at :math:`t(\tau)`, not at τ (docs/theory.md §5).
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp

from ._methods import AbstractMethod, check_method
from ._problem import (
    Dataset,
    beta,
    check_classification_loss,
    check_data,
    check_loss_data,
    check_theta,
    log_speed,
    loss_derivative,
    margins,
    objective,
)
from ._validate import check_scalar, is_traced

_grad_objective = jax.grad(objective)


def _margin(theta, data: Dataset):
    return margins(theta, data)[0]


_grad_margin = jax.grad(_margin)


def _check_field_args(method, data, loss, theta, t, rescaled: bool):
    """The checks of :func:`velocity` and :func:`rescaled_velocity` (trace-safe).

    Types, the loss name, the shape of ``theta`` and the number of examples are
    static, so they are checked under ``jit``/``vmap`` too; the values of ``theta``
    and ``t`` (finite) only when they are concrete. Traced values are not guarded
    here: the solvers evaluate the field at every state and report a non-finite
    one with status ``nonfinite``, and one bad point of a ``vmap`` must not stop
    the others.
    """
    check_method(method)
    check_data(data)
    check_loss_data(loss, data)
    if rescaled:
        check_classification_loss(loss, "the rescaled flow (it divides out -ℓ' > 0)")
    if rescaled and data.n != 1:
        raise ValueError(
            "`data` must be a single example (n = 1) for the rescaled flow: with n > 1 there "
            f"is no common loss factor to divide out; got n = {data.n}."
        )
    theta = check_theta(theta, data, "theta")
    if not is_traced(t):
        check_scalar("t", t)
        no_budget = _no_budget(method, t)
        if not is_traced(no_budget) and bool(no_budget):  # (traced inside any jit)
            raise ValueError(
                f"`t`: the schedule sigma(t) is negative at t = {float(t):g} "
                f"(sigma = {float(method.sigma(t)):g}): the rule has no budget there."
            )
    return theta


def _no_budget(method, t):
    """True where a schedule has no budget: the condition of the run's stop
    (:meth:`flows.LESAM.schedule_margin` <= 0, status ``sigma_negative``)."""
    if not method.time_dependent:
        return jnp.asarray(False)
    return method.schedule_margin(t) <= 0


def _defined(method, t, v):
    """The field ``v``, NaN where the rule has no budget (a traced time with σ(t) < 0)."""
    return jnp.where(_no_budget(method, t), jnp.nan, v)


def velocity(method: AbstractMethod, data: Dataset, loss: str, theta, t=0.0):
    r"""Flow field :math:`v(\theta)=-\nabla\mathcal L(\hat\theta)`.

    Here :math:`\hat\theta=\theta+\varepsilon(\theta,\nabla\mathcal L(\theta))`.

    Arguments:
        method: a flows method; data: a :class:`Dataset`; loss: a loss name;
        theta: shape ``(L, d)``, finite; t: the time (LE-SAM schedules read it).

    Concrete arguments are validated (``ValueError`` naming the argument; NaN or
    inf in ``theta`` is refused rather than returned as a NaN field, and so is a time
    where a schedule σ(t) is negative; a traced such time gives NaN).

    >>> import flows, numpy as np
    >>> data = flows.single_example([1.0, 2.0])
    >>> # L = 1, GD: v = -ℓ'(⟨μ, θ⟩) μ = μ / (1 + e^3) at θ = (1, 1)
    >>> theta = flows.balanced_init(1.0, depth=1, d=2)
    >>> v = flows.velocity(flows.GD(), data, "logistic", theta)
    >>> bool(np.allclose(v, [[1.0, 2.0]] / (1 + np.exp(3.0)), rtol=1e-14, atol=0))
    True
    """
    theta = _check_field_args(method, data, loss, theta, t, rescaled=False)
    return _defined(method, t, _velocity(method, data, loss, theta, t))


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
    is the real time (a schedule σ(t) is read there). ``data`` must hold one example
    (``ValueError`` otherwise, as in :func:`flows.solve`); the other arguments are
    validated as in :func:`velocity`.

    >>> import flows
    >>> data = flows.single_example([1.0, 2.0])
    >>> theta = flows.balanced_init(0.5, depth=2, d=2)  # GD: v = ∇m = (μ w⁽²⁾, μ w⁽¹⁾)
    >>> flows.rescaled_velocity(flows.GD(), data, "logistic", theta).tolist()
    [[0.5, 1.0], [0.5, 1.0]]
    """
    theta = _check_field_args(method, data, loss, theta, t, rescaled=True)
    return _defined(method, t, _rescaled(method, data, loss, theta, t)[0])


def _velocity(method, data, loss, theta, t=0.0):
    r""":func:`velocity` without the checks (the solvers' and the discrete update's field).

    A per-example rule (:class:`flows.OneSAM`) gives
    :math:`-\frac1n\sum_i\nabla\ell_i(\theta+\varepsilon(\theta,\nabla\ell_i(\theta)))`, each
    example's field that of the one-example dataset :math:`\{(x_i,y_i)\}`."""
    if method.per_example:
        one = lambda x, y: _field_of(method, _example(data, x, y), loss, theta, t)  # noqa: E731
        return jnp.mean(jax.vmap(one)(data.X, data.y), axis=0)
    return _field_of(method, data, loss, theta, t)


def _example(data: Dataset, x, y) -> Dataset:
    r"""The one-example dataset :math:`\{(x, y)\}` of ``data``'s kind (traceable: no checks)."""
    return eqx.tree_at(lambda d: (d.X, d.y), data, (x[None], y[None]))


def _field_of(method, data, loss, theta, t):
    r""":math:`-\nabla\mathcal L(\hat\theta)` with :math:`\hat\theta=\theta+\varepsilon(\theta,
    \nabla\mathcal L(\theta))` on ``data``."""
    g = _grad_objective(theta, data, loss)
    theta_hat = theta + method.perturbation(theta, g, t)
    return -_grad_objective(theta_hat, data, loss)


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
        # One trace per (field, argument shapes): the solvers evaluate the field many
        # times while tracing (each Runge–Kutta stage, the error estimate, shape
        # checks), and jit's trace cache makes the later evaluations call the first
        # jaxpr instead of tracing the gradients again. XLA inlines the call.
        dynamic, static = eqx.partition(self, eqx.is_array)
        return _evaluate(dynamic, static, s, y)

    def rule_time(self, s, y):
        """The time the rule reads at integration time ``s`` in the state ``y``: the carried
        real time :math:`t(\tau)` (rescaled flow with its clock), else ``s``."""
        return real_time(y[1]) if self.rescaled and self.clock else s

    def schedule_margin(self, s, y):
        """The schedule's stopping condition (:meth:`flows.LESAM.schedule_margin`) at the time
        the rule reads; positive while σ >= 0. Only for a time-dependent rule."""
        return self.method.schedule_margin(self.rule_time(s, y))

    def _evaluate(self, s, y):
        if not self.rescaled:
            return _velocity(self.method, self.data, self.loss, y, s)
        if not self.clock:
            return _rescaled(self.method, self.data, self.loss, y, s)[0]
        theta, clock = y
        t = self.rule_time(s, y)
        v, theta_hat = _rescaled(self.method, self.data, self.loss, theta, t)
        return v, clock_rate(self.loss, self.data, theta_hat)


@functools.partial(jax.jit, static_argnums=1)
def _evaluate(dynamic, static, s, y):
    """``Field._evaluate``; the arrays are arguments, the rest (a schedule σ(t)) is static."""
    return eqx.combine(dynamic, static)._evaluate(s, y)


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
    return theta + lr * _velocity(method, data, loss, theta, k * lr)


def is_finite(y):
    """True when every entry of θ in the state ``y`` (θ, or (θ, clock)) is finite."""
    return jnp.all(jnp.isfinite(theta_of(y)))


_LOG_MAX = math.log(float(jnp.finfo(jnp.float64).max))


def overflow_headroom(theta):
    r""":math:`\log(\mathrm{max\,float})-\max_j\sum_l\log|\theta_{lj}|`: the room left before
    :math:`|\beta_j|=\prod_l|\theta_{lj}|` overflows, in log space (no overflow itself).
    Positive while β is finite (up to rounding), 0 where it overflows: a continuous
    event condition in the units of the escape condition (a logarithm)."""
    return _LOG_MAX - jnp.max(jnp.sum(jnp.log(jnp.abs(theta)), axis=0))


def is_representable(theta):
    r"""True when :math:`\theta` and :math:`\beta(\theta)` are finite (β can overflow alone)."""
    return is_finite(theta) & jnp.all(jnp.isfinite(beta(theta)))
