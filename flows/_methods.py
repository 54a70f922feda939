r"""Training methods as perturbation rules.

Every method is a rule :math:`\varepsilon(\theta, g)` giving the perturbed point
:math:`\hat\theta=\theta+\varepsilon`, where :math:`g=\nabla\mathcal L(\theta)`.
The discrete update, the flow and the rescaled flow (``flows._dynamics``) all
call :meth:`AbstractMethod.perturbation`; no rule is written twice.

The gradient is passed as ``grad_scale * grad`` with ``grad_scale > 0``. Rules
that only use the direction of :math:`g` (GD, ℓ2-SAM, ℓ∞-SAM) ignore
``grad_scale``; LE-SAM uses it for :math:`\lVert g\rVert`. The rescaled flow
passes ``grad = -∇(margin)`` and ``grad_scale = -ℓ'(margin)`` so that the
direction stays exact even when :math:`\ell'` underflows.
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _rules
from ._validate import WrongTypeError, check_scalar, check_type


def _param(name, value):
    """``value`` checked as the rule parameter ``name`` (its sign: :data:`flows._rules.SIGNS`)."""
    return check_scalar(name, value, **{_rules.SIGNS[name]: True})


def _unit(g, axis=None):
    """``(g / ‖g‖₂, ‖g‖₂)`` over ``axis``, the direction defined as 0 where ``g = 0``.

    The norm is scaled, ``‖g‖ = s·‖g/s‖`` with ``s = max|g|``, so that squaring
    neither underflows (``|g| ~ 1e-300`` would give ``‖g‖ = 0`` and an unnormalised
    direction) nor overflows (``|g| ~ 1e200``): the direction is exact at every
    magnitude, and ``‖g‖`` is inf only where it exceeds the float64 range.
    The scale is a constant for autodiff (``stop_gradient``), so derivatives are
    those of ``‖g‖`` itself. A NumPy ``g`` is computed eagerly in NumPy (the analysis's
    engine driver, :mod:`analysis._xp`), every other in JAX.
    """
    keep = axis is not None
    xp = jnp if isinstance(g, jax.Array) else np  # a NumPy g: eagerly, in NumPy
    s = xp.max(xp.abs(g), axis=axis, keepdims=True)
    s = jax.lax.stop_gradient(s) if xp is jnp else s
    s = xp.where(s == 0, 1.0, s)  # g = 0; a NaN or inf in g makes the whole direction NaN
    scaled = g / s
    root = xp.sqrt(xp.sum(scaled * scaled, axis=axis, keepdims=True))
    unit = scaled / xp.where(root == 0, 1.0, root)
    norm = s * root
    return unit, norm if keep else norm.reshape(())


def check_method(method) -> "AbstractMethod":
    """Return ``method`` if it is a flows method, else raise :class:`WrongTypeError`."""
    return check_type("method", method, AbstractMethod, "a flows method such as flows.L2SAM(0.1)")


class AbstractMethod(eqx.Module):
    r"""A training method, i.e. a perturbation rule :math:`\varepsilon(\theta, g)`.

    Contract for subclasses (one small final class per method):

    * parameters are fields; :meth:`perturbation` is a pure JAX function of them,
      so the method can be jitted and vmapped over its numeric fields;
    * ``perturbation(theta, grad, t, grad_scale)`` returns an array of the shape of
      ``theta``, where the true gradient is ``grad_scale * grad`` (``grad_scale > 0``)
      and ``t`` is the time (flow) or ``k * lr`` (discrete);
    * ``scale_free`` is True when the rule depends on ``g`` only through its
      direction; then the rescaled single-example flow does not depend on the loss.
    """

    scale_free: ClassVar[bool] = True
    #: The rule of :mod:`flows._rules` this method applies (None: not one of them).
    rule: ClassVar[int | None] = None
    #: True when the rule perturbs each example's loss on its own (:class:`OneSAM`): the
    #: field is then :math:`-\frac1n\sum_i\nabla\ell_i(\theta+\varepsilon(\theta,\nabla\ell_i))`.
    per_example: ClassVar[bool] = False

    @property
    def time_dependent(self) -> bool:
        """True when the rule reads the time ``t`` (then the rescaled flow carries t)."""
        return False

    def rule_params(self) -> dict:
        """The rule's parameters by name (:data:`flows._rules.PARAMS`; absent ones are 0)."""
        return {}

    def started_at(self, t0) -> "AbstractMethod":
        """This rule on a clock that starts at the real time ``t0`` (itself for a rule that
        ignores the time; see :meth:`LESAM.started_at`)."""
        del t0
        return self

    def _epsilon(self, grad, unit, norm, grad_scale, t=0.0):
        r""":func:`flows._rules.epsilon` of this method's rule, in JAX.

        A schedule is read as :math:`\max(\sigma(t),0)` (:meth:`LESAM.rule_sigma`)."""
        p = {k: 0.0 for k in _rules.PARAMS} | self.rule_params()
        if "sigma" in p and callable(p["sigma"]):
            p["sigma"] = self.rule_sigma(t)
        return _rules.jax_epsilon(self.rule, grad, unit, norm, grad_scale, *p.values())

    @abc.abstractmethod
    def perturbation(self, theta, grad, t, grad_scale=1.0):
        """Return ε(θ, g) with the shape of ``theta``."""


class GD(AbstractMethod):
    r"""Gradient descent: :math:`\varepsilon = 0`.

    >>> import flows
    >>> flows.GD()
    GD()
    """

    rule: ClassVar[int] = _rules.GD

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta
        return self._epsilon(grad, grad, 1.0, grad_scale, t)


class L2SAM(AbstractMethod):
    r"""ℓ2-SAM: :math:`\varepsilon=\rho\,g/\lVert g\rVert_2`.

    The norm is taken over all :math:`L\cdot d` weights together (standard SAM).
    With ``per_layer=True`` each layer is normalised separately:
    :math:`\varepsilon^{(l)}=\rho\,g^{(l)}/\lVert g^{(l)}\rVert_2`. Where
    :math:`g=0` the direction is undefined and :math:`\varepsilon=0` is used.

    Arguments:
        rho: radius :math:`\rho\ge0`.
        per_layer: normalise each layer separately (static).

    >>> import flows
    >>> flows.L2SAM(0.1).rho.item()
    0.1
    """

    rho: jax.Array
    per_layer: bool = eqx.field(static=True, default=False)

    def __init__(self, rho, per_layer: bool = False):
        self.rho = _param("rho", rho)
        if not isinstance(per_layer, bool):
            raise WrongTypeError(f"`per_layer` must be True or False; got {per_layer!r}.")
        self.per_layer = per_layer

    rule: ClassVar[int] = _rules.L2

    def rule_params(self) -> dict:
        return {"rho": self.rho}

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta
        unit, norm = _unit(grad, axis=-1 if self.per_layer else None)
        return self._epsilon(grad, unit, norm, grad_scale, t)


class LinfSAM(AbstractMethod):
    r"""ℓ∞-SAM: :math:`\varepsilon=\rho\,\mathrm{sign}(g)`, elementwise over all weights.

    The resulting flow is discontinuous where a component of :math:`g` changes
    sign: a Filippov system (docs/theory.md §7), which :func:`flows.solve`
    integrates with located switch events and sliding modes, the perturbation
    on a switching surface being :math:`\rho u` with :math:`u\in[-1,1]^{L\times d}`
    from Filippov's sliding field (``flows._filippov``). With ``delta`` the sign is regularised,
    :math:`u=\tanh(g/\delta)`, a smooth field that any ODE solver can take and
    that tends to the Filippov flow as :math:`\delta\to0`.

    Arguments:
        rho: radius :math:`\rho\ge0`.
        delta: regularisation :math:`\delta>0` of the sign, or None (default) for
            the exact sign. It acts on the gradient as handed to the rule
            (``grad``; the rescaled flow hands :math:`-\nabla m`, the loss factor
            divided out), so that the rescaled flow stays loss-free. As
            :math:`\nabla\mathcal L\to0` on a plain flow the smoothing widens.

    >>> import flows
    >>> flows.LinfSAM(0.1).rho.item()
    0.1
    >>> flows.LinfSAM(0.1, delta=1e-3).control(1e-3).item()  # tanh(1)
    0.7615941559557649
    """

    rho: jax.Array
    delta: jax.Array | None

    def __init__(self, rho, delta=None):
        self.rho = _param("rho", rho)
        self.delta = None if delta is None else _param("delta", delta)

    def control(self, grad):
        r"""The control :math:`u=\mathrm{sign}(g)` with :math:`\mathrm{sign}(0)=+1`, or
        :math:`\tanh(g/\delta)` (the smoothed rule of :mod:`flows._rules` at :math:`\rho=1`).

        At :math:`g_k=0` every :math:`u_k\in[-1,1]` maximises :math:`g^\top\varepsilon`; the
        exact rule takes :math:`u_k=+1` (``-0.0`` included; NaN stays NaN). The choice matters
        on a switching surface, to the discrete update above all: an iterate that lands on
        a weight :math:`w_{lj}=0` (an event that rounding decides) would, with
        :math:`u_k=0` (``jnp.sign``, ``torch.sign``), be frozen there with
        :math:`\hat w=0` and drop its share :math:`\mu_j\rho^L` of the perturbed margin: the
        iterates would then follow another flow than the Filippov flow, the :math:`\eta\to0`
        limit of the chattering iterates, which keeps that share (docs/theory.md §3, §7).
        With :math:`u_k=\pm1` the iterate steps off 0 and the in-phase chatter goes on (every
        layer of a balanced coordinate gets the same :math:`u`). There :func:`flows.velocity`
        gives the field of that side. Off the surfaces this is ``jnp.sign``. The Filippov
        integrator does not use it (it solves for the control).

        >>> import flows, jax.numpy as jnp
        >>> flows.LinfSAM(0.1).control(jnp.array([-2.0, -0.0, 0.0, 3.0])).tolist()
        [-1.0, 1.0, 1.0, 1.0]
        """
        if self.delta is None:
            return jnp.where(grad == 0, 1.0, jnp.sign(grad))
        return _rules.jax_epsilon(_rules.LINF_SMOOTH, grad, grad, 1.0, 1.0, 1.0, self.delta,
                                  0.0, 0.0, 0.0)  # fmt: skip

    def perturbation_from_control(self, u):
        r""":math:`\varepsilon=\rho\,u` for a control :math:`u\in[-1,1]^{L\times d}`."""
        return self.rho * u

    @property
    def rule(self) -> int | None:
        """:data:`flows._rules.LINF_SMOOTH` with ``delta``; None for the exact sign."""
        return None if self.delta is None else _rules.LINF_SMOOTH

    def rule_params(self) -> dict:
        return {"rho": self.rho, "delta": self.delta}

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta  # the sign (or tanh(g/δ)) of `grad` only
        if self.delta is None:
            return self.perturbation_from_control(self.control(grad))
        return self._epsilon(grad, grad, 1.0, grad_scale, t)


def check_schedule(sigma):
    r"""``sigma`` if it is a schedule :math:`\sigma(t)` that JAX can trace, else ``ValueError``.

    A schedule is read inside compiled solvers, at traced times: it must be written with
    ``jax.numpy`` operations on ``t`` (no ``float(t)``, no Python ``if`` on ``t``) and give
    a real scalar for a scalar ``t``. It is traced once here, on an abstract float64 scalar
    (:func:`jax.eval_shape`: nothing is computed), so that an untraceable schedule is
    refused where it is given, naming ``sigma``.
    """
    t = jax.ShapeDtypeStruct((), jnp.float64)
    try:
        out = jax.eval_shape(sigma, t)
    except jax.errors.JAXTypeError as err:  # float(t), `if t > 1`, ...: not traceable
        first = str(err).strip().splitlines()[0]
        raise ValueError(
            "`sigma` must be a JAX-traceable function of the time t (jnp operations; no "
            f"float(t), no Python `if` on t); tracing it failed: {type(err).__name__}: {first}"
        ) from None
    except Exception as err:  # a schedule that cannot be called on a time
        raise ValueError(
            f"`sigma` must be a callable σ(t) of the time; calling it failed: {err!r}."
        ) from err
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape != () or dtype is None or not jnp.issubdtype(dtype, jnp.number):
        raise ValueError(f"`sigma` must return a real scalar for a scalar time t; got {out!r}.")
    if jnp.issubdtype(dtype, jnp.complexfloating):
        raise ValueError(f"`sigma` must return a real scalar; got dtype {dtype}.")
    return sigma


class Shifted(eqx.Module):
    r"""The schedule :math:`t\mapsto\sigma(t_0+t)`: σ read on a clock that starts at :math:`t_0`.

    ``t0`` is an array leaf, so that runs continued from different real times share one
    compilation and ``t0`` can be traced (:meth:`LESAM.started_at`).
    """

    schedule: Callable
    t0: jax.Array

    def __call__(self, t):
        return self.schedule(_finite_time(self.t0 + t))


def _finite_time(t):
    r"""The time a schedule is read at: ``t``, with :math:`t=\infty` (a real-time clock past its
    cap) read at the largest float64, where σ has its limit if it has one; read at ∞ itself a
    schedule such as :math:`0.5+0\cdot t` is :math:`0\cdot\infty` = NaN, and the run fails."""
    return jnp.minimum(jnp.asarray(t, dtype=jnp.float64), jnp.finfo(jnp.float64).max)


class LESAM(AbstractMethod):
    r"""LE-SAM (loss-equated SAM): :math:`\varepsilon=\rho_t\,g/\lVert g\rVert_2` with

    .. math::
        \rho_t=\min\Big(\frac{\sigma(t)}{\lVert g\rVert_2+\varrho},\ \rho_{\max}\Big),

    so that the first-order loss increase :math:`g^\top\varepsilon` equals
    :math:`\sigma` until the cap :math:`\rho_{\max}` binds.

    Arguments:
        sigma: loss budget :math:`\sigma\ge0`, a number or a schedule ``sigma(t)``
            (a JAX-traceable callable of the time, checked here by :func:`check_schedule`;
            the discrete update passes ``t = k * lr``, the rescaled flow the real time
            :math:`t(\tau)`). A run stops where a schedule falls below 0, with status
            ``sigma_negative`` (:class:`flows.Status`).
        rho_max: cap :math:`\rho_{\max}\ge0` on the radius.
        eps: stabiliser :math:`\varrho>0` (the reference implementation uses 1e-12).

    >>> import flows
    >>> flows.LESAM(0.35, 0.3).rho_max.item()
    0.3
    """

    sigma: jax.Array | Callable
    rho_max: jax.Array
    eps: jax.Array

    scale_free: ClassVar[bool] = False

    def __init__(self, sigma, rho_max, eps=1e-12):
        if callable(sigma):
            self.sigma = check_schedule(sigma)
        else:
            try:
                self.sigma = _param("sigma", sigma)
            except WrongTypeError:
                raise WrongTypeError(
                    "`sigma` must be a finite real number >= 0 or a schedule sigma(t) "
                    f"(a callable); got {sigma!r}."
                ) from None
        self.rho_max = _param("rho_max", rho_max)
        self.eps = _param("eps", eps)

    @property
    def time_dependent(self) -> bool:
        """True for a schedule σ(t)."""
        return callable(self.sigma)

    def rule_sigma(self, t):
        r"""The budget the rule reads, :math:`\max(\sigma(t),0)` (NaN stays NaN).

        Continuous where σ is, so that a solver step can straddle the time where a schedule
        falls below 0; the run stops there, located by its event (:meth:`schedule_margin`,
        status ``sigma_negative``), and no state past it is reported.
        """
        if not callable(self.sigma):
            return self.sigma
        return jnp.maximum(jnp.asarray(self.sigma(_finite_time(t)), dtype=jnp.float64), 0.0)

    def schedule_margin(self, t):
        r"""The stopping condition of a schedule: :math:`\sigma(t)+\epsilon_{\min}`.

        Positive while :math:`\sigma(t)\ge0` (:math:`\epsilon_{\min}`, the smallest normal
        float64, keeps a schedule that reaches 0 and stays there, e.g. an annealing, from
        stopping the run); its downcrossing of 0 is the event ``sigma_negative``. NaN where
        σ is NaN (the field is NaN there too: ``nonfinite``).
        """
        value = jnp.asarray(self.sigma(_finite_time(t)), dtype=jnp.float64)
        return value + jnp.finfo(jnp.float64).tiny

    def started_at(self, t0) -> "LESAM":
        r"""This rule with the schedule read from the real time ``t0`` on: :math:`\sigma(t_0+t)`.

        A run continued from a state reached at real time :math:`t_0` (the analysis layer's
        passes) solves from clock 0 with this method. Itself for a constant σ. ``t0`` may be
        traced; :math:`t_0=\infty` (a clock past its cap, :func:`flows._dynamics.real_time`)
        reads σ at the largest float64, its limit at ∞ where it has one (:func:`_finite_time`).
        """
        if not callable(self.sigma):
            return self
        base, start = self.sigma, 0.0
        if isinstance(base, Shifted):
            base, start = base.schedule, base.t0
        shifted = Shifted(base, start + jnp.asarray(t0, dtype=jnp.float64))
        return eqx.tree_at(lambda m: m.sigma, self, shifted)

    rule: ClassVar[int] = _rules.LE

    def rule_params(self) -> dict:
        return {"sigma": self.sigma, "rho_max": self.rho_max, "eps": self.eps}

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta
        unit, norm = _unit(grad)
        return self._epsilon(grad, unit, norm, grad_scale, t)


class USAM(AbstractMethod):
    r"""Unnormalised SAM: :math:`\varepsilon=\rho\,\nabla\mathcal L(\theta)`.

    The gradient itself, not its direction: the perturbation vanishes with the gradient, and
    the flow is smooth everywhere (no :math:`1/\lVert g\rVert`). On the squared loss of a
    u⊙v network this is the reference code's ``n_SAM_GD`` (docs/theory.md §18).

    Arguments:
        rho: radius :math:`\rho\ge0` (a step length on the gradient).

    >>> import flows
    >>> flows.USAM(0.1).rho.item()
    0.1
    """

    rho: jax.Array

    scale_free: ClassVar[bool] = False
    rule: ClassVar[int] = _rules.UNNORMALISED

    def __init__(self, rho):
        self.rho = _param("rho", rho)

    def rule_params(self) -> dict:
        return {"rho": self.rho}

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta
        return self._epsilon(grad, grad, 1.0, grad_scale, t)


#: The conventions of :class:`OneSAM`: the factor :math:`c` of
#: :math:`\varepsilon_i=c\rho\nabla\ell_i`.
ONE_SAM_CONVENTIONS = {"gradient": 1.0, "reference": 2.0}


class OneSAM(AbstractMethod):
    r"""Per-example SAM ("1-SAM"): each example's gradient at its own perturbed point,

    .. math::
        v(\theta)=-\frac1n\sum_{i=1}^n\nabla\ell_i(\theta+\varepsilon_i),\qquad
        \varepsilon_i=c\,\rho\,\nabla\ell_i(\theta),

    with :math:`\ell_i(\theta)=\ell(y_i\langle\beta(\theta),x_i\rangle)`, or
    :math:`\frac12(\langle\beta(\theta),x_i\rangle-y_i)^2` for the squared loss, so that
    :math:`\mathcal L=\frac1n\sum_i\ell_i`. The perturbation is unnormalised (as
    :class:`USAM`, per example).

    Arguments:
        rho: radius :math:`\rho\ge0`.
        convention: ``"gradient"`` (default), :math:`c=1`: the ascent step on
            :math:`\ell_i` itself; ``"reference"``, :math:`c=2`: the reference code's
            ``one_SAM_GD`` (tml-epfl/understanding-sam), whose per-example step is
            :math:`\rho\nabla(r_i^2)=2\rho\nabla\ell_i` on the squared loss
            (docs/theory.md §18).

    >>> import flows
    >>> flows.OneSAM(0.1, convention="reference").rule_params()["rho"].item()
    0.2
    """

    rho: jax.Array
    convention: str = eqx.field(static=True, default="gradient")

    scale_free: ClassVar[bool] = False
    rule: ClassVar[int] = _rules.UNNORMALISED
    per_example: ClassVar[bool] = True

    def __init__(self, rho, convention: str = "gradient"):
        self.rho = _param("rho", rho)
        if not isinstance(convention, str) or convention not in ONE_SAM_CONVENTIONS:
            raise ValueError(
                f"`convention` must be one of {sorted(ONE_SAM_CONVENTIONS)}; got {convention!r}."
            )
        self.convention = convention

    def rule_params(self) -> dict:
        return {"rho": ONE_SAM_CONVENTIONS[self.convention] * self.rho}

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        r""":math:`\varepsilon_i=c\rho\nabla\ell_i` for one example's gradient
        ``grad_scale * grad``."""
        del theta
        return self._epsilon(grad, grad, 1.0, grad_scale, t)
