r"""ℓ∞-SAM flows as Filippov systems (docs/theory.md §7): the mathematics.

With the control :math:`u\in[-1,1]^{L\times d}` the ℓ∞-SAM field is

.. math::
    f(\theta,u) = -\nabla\mathcal L(\theta+\rho\,u)\quad\text{(flow)},\qquad
    f(\theta,u) = \nabla m(\theta+\rho\,u)\quad\text{(rescaled flow)},

and off the switching surfaces :math:`u=\mathrm{sign}(h(\theta))`, where the
switching functions :math:`h_k` are the gradient components handed to the sign
rule: :math:`h=\nabla\mathcal L` (flow) or :math:`h=-\nabla m` (rescaled flow;
same sign, since :math:`-\ell'>0`). Both are :math:`h_{lj}=r_j\prod_{l'\ne l}w^{(l')}_j`
with :math:`r=\partial\mathcal L/\partial\beta` (or :math:`-\partial m/\partial\beta`).
For a single example with :math:`\mu>0` the surfaces :math:`h_k=0` are coordinate
hyperplanes of the other layers' weights; for general data they are curved.

The field is integrated piecewise. Each *mode* fixes a sign :math:`\sigma_k` for
every component off its surface and a sliding set :math:`S`. The sliding
components of one coordinate :math:`j` share one chattering sign,
:math:`u_{lj}=t_{lj}\xi_j` with a fixed orientation :math:`t_{lj}=\pm1`
(:func:`_orientation`), and the :math:`\xi_j` of different coordinates are
independent with means :math:`\bar v_j`. On :math:`S` the field is Filippov's
sliding field :math:`F(\theta,\bar v)=\mathbb E_\xi f(\theta,u_\xi)` (:meth:`_System.field`),
with :math:`\bar v` the solution of

.. math::
    \dot h_S = \nabla h_S(\theta)\, F(\theta,\bar v) = 0
    \qquad (u_k=\sigma_k,\ k\notin S),

found by Newton's method (``jax.jacfwd`` gives the Jacobian); its residual is
checked where a mode is chosen and at the end of the run, and a failed solve
stops the run with status ``sliding_failed``. On
one surface :math:`F` is Filippov's convex combination
:math:`\lambda f^++(1-\lambda)f^-`, the :math:`\eta\to0` limit of the discrete iterates.

The expectation at a cost linear in the number of sliding coordinates. Write
:math:`\hat\beta_j(s)` for coordinate :math:`j`'s perturbed product with
:math:`\xi_j=s`. Since :math:`\partial m_i/\partial w^{(l)}_j` depends on coordinate
:math:`j` only,

.. math::
    F_{lj}=\sum_{s=\pm1}\frac{\partial\hat\beta_j(s)}{\partial w^{(l)}_j}
    \sum_i y_ix_{ij}\,\mathbb E\big[q_i\,\mathbb 1\{\xi_j=s\}\big],\qquad
    q_i=-\ell'(m_i(\hat\theta))/n\ \text{(flow)},\quad q_i=1\ \text{(rescaled)} .

The loss factor :math:`q_i` depends on ξ only through the coordinates whose product
changes with their sign, :math:`\hat\beta_j(+1)\ne\hat\beta_j(-1)`. A dead coordinate
at even depth, chattering in phase, has :math:`\hat\beta_j=\rho^L` on both sides and
drops out: the expectation is exact for any number of them. The
:data:`MAX_ENUMERATED` coordinates with the largest
:math:`|\hat\beta_j(+1)-\hat\beta_j(-1)|` are enumerated (:math:`2^M` margins, no
field evaluations); beyond them a coordinate enters the margins through
:math:`\mathbb E\hat\beta_j` and the trajectory is flagged ``ambiguous``.

Dead and partly dead coordinates (:math:`z_j\ge2` layers at 0). Every :math:`h_{lj}`
then vanishes, but not every sign chatters. The zero layers chatter in phase,
:math:`\mathrm{sgn}\,w^{(l)}_j=\xi` on all of them (the discrete map keeps equal
weights equal, so this holds when they reached 0 together), so
:math:`\mathrm{sign}\,h_{lj}=\mathrm{sgn}(r_j)\,\xi^{e}
\prod_{l'\notin Z,l'\ne l}\mathrm{sgn}\,w^{(l')}_j`
with :math:`e=z_j-1` on a zero layer and :math:`e=z_j` on a live one: the component
chatters for odd :math:`e` and is *held* at the sign :math:`\mathrm{sgn}(r_j)t_{lj}` for
even :math:`e` (:func:`_held`). At :math:`L=3` with two layers at 0 the third is held
(:math:`\hat w=w-\rho`), and :math:`\hat\beta_j=\rho^2(w-\rho)`.

Ambiguity. Where a coordinate's layers reached 0 at
different events (an unbalanced start), the discrete chatter slips between sign
phases (time-averaged :math:`\hat\beta_j/\rho^2\approx0.3` measured at :math:`L=2`,
where in phase gives 1 and independent signs 0) and the iterates' clock does not
settle as :math:`\eta\to0`: with :math:`\mu=(1,2)`, :math:`\rho=0.5`,
:math:`w^{(1)}(0)=(0.3,0.7)`, :math:`w^{(2)}(0)=(0.15,0.7)`, :math:`w_2(8)` is 1.977,
2.009, 1.968, 1.983, 1.969 for :math:`\eta=8/1280,\dots,8/20480`, and the in-phase
flow gives 1.927. The flow keeps the in-phase selection there, and the event
sets the trajectory's ``ambiguous`` flag (:meth:`_System.decide`). The path of the
rescaled single-example flow does not depend on the selection; its real-time
clock does.

Pinned weights. A weight that a sliding mode holds at 0 (:func:`_pinned`:
the one zero factor of a sliding component's :math:`h`, or a chattering zero layer)
has the sliding velocity 0, but computed as the sum of two :math:`O(\rho)` terms it
is a rounding error, about 1e-16 ρ, and the event leaves the weight about 1e-14 off
0. Against a weight of 1e-14 a step controller with a tiny ``atol`` (the analysis
uses one far below every weight) takes that error for the solution's and shrinks its
steps without end.
So the mode decision puts such weights at 0 exactly (:meth:`_System.project`) and the
field gives them a velocity of exactly 0 (:meth:`_System.velocity`).

Cost. Most of most runs slide nowhere; there the control is σ and the
field :math:`f(\theta,\sigma)`, with no Newton solve, SVD or vertex enumeration
(:meth:`_System.equivalent_control` and :meth:`_System.velocity` branch with
``lax.cond``; under ``vmap`` the whole batch takes one branch, :func:`_any_lane`).

A smooth segment ends at an event: some :math:`\sigma_k h_k` reaches 0 (a component
meets its surface) or some :math:`|v_k|`, :math:`k\in S`, reaches 1 (the sliding
field no longer points along the surface). At an event the new mode comes from
an active-set iteration (:meth:`_System.decide`). The drivers (segment loops)
live with their backends, ``flows._diffrax`` and ``flows._scipy``.
"""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

from ._dynamics import _grad_margin, _grad_objective, clock_from_log_rate
from ._methods import LinfSAM, _unit
from ._problem import beta, log_speed, margins, objective

# At an event, a component is at its surface when the time it needs to reach it,
# |h_k| / |dh_k/dt|, is below _SURFACE_TOL * (T + |t|), T the run's time scale
# (:meth:`_System.for_run`): simultaneous switches (a balanced pair of weights)
# are handled as one event.
_SURFACE_TOL = 1e-9
# An equivalent control with |u_k| <= 1 + _CONTROL_TOL is admissible (sliding).
_CONTROL_TOL = 1e-9
# A weight below _ZERO_TOL * max|θ| counts as 0 when orienting sign components.
_ZERO_TOL = 1e-9
# Newton on the sliding control: at most _NEWTON_MAX iterations, stopped once the
# step is below _NEWTON_STEP; the solve has failed if the residual |ḣ_S| is then
# above _NEWTON_RESIDUAL times the size of its Jacobian (an error of that size in v).
_NEWTON_MAX = 16
_NEWTON_STEP = 1e-13
_NEWTON_RESIDUAL = 1e-8
# Sliding coordinates whose perturbed product depends on their sign that are
# enumerated exactly (2^M margins per field evaluation); see the module doc.
MAX_ENUMERATED = 4
# Beyond MAX_ENUMERATED, a coordinate whose products differ by more than this
# (relative) flags the trajectory as ambiguous.
_RANDOM_TOL = 1e-12
_BIG = 1e3  # the value of a masked-out event condition


@custom_vmap
def _any_lane(flag):
    """``flag`` (a scalar bool); under ``vmap`` the same unbatched value for every lane:
    whether any lane's flag is set.

    A ``lax.cond`` on a batched predicate runs both branches and selects (it becomes a
    ``select``); on this one it stays a branch, taken by the whole batch: the sliding
    branch as soon as one lane slides, the cheap one when none does. That is only
    right where the sliding branch gives the cheap branch's answer on a lane that does
    not slide, as :meth:`_System.equivalent_control` and :meth:`_System.velocity` do.
    """
    return flag


@_any_lane.def_vmap
def _any_lane_vmap(axis_size, in_batched, flag):
    del axis_size
    return (jnp.any(flag) if in_batched[0] else flag), False


def _zero_layers(theta):
    """Mask of the weights that count as 0 (below ``_ZERO_TOL`` times max|θ|)."""
    return jnp.abs(theta) <= _ZERO_TOL * jnp.max(jnp.abs(theta))


def _orientation(theta):
    r""":math:`t_{lj}=\prod_{l'\ne l}\mathrm{sgn}^+ w^{(l')}_j`, with :math:`\mathrm{sgn}^+0=+1`.

    Since :math:`h_{lj}=r_j\prod_{l'\ne l}w^{(l')}_j`, the chattering sign components of
    one coordinate move as one, :math:`u_{lj}=t_{lj}\,\xi_j`: on the curved surface
    :math:`r_j=0` (weights nonzero) exactly, with :math:`\xi_j` its sign; on a dead or
    partly dead coordinate as in-phase chatter (module doc).
    """
    sgn = jnp.where(theta < 0, -1.0, 1.0)
    sgn = jnp.where(_zero_layers(theta), 1.0, sgn)
    return jnp.prod(sgn, axis=0) * sgn


def _pinned(zero, sliding):
    r"""The weights a sliding mode holds at 0, with a velocity of exactly 0.

    ``zero[l, j]``: the weight is at 0 (on a coordinate with :math:`r_j\ne0`). Two kinds:

    * *forced*: a sliding component :math:`(l,j)` whose other layers hold exactly one
      zero weight :math:`w_{l'j}` keeps
      :math:`0=\dot h_{lj}=r_j\,\dot w_{l'j}\prod_{l''\ne l,l'}w_{l''j}`, so
      :math:`\dot w_{l'j}=0` (one layer at 0 at :math:`L=2`; two at :math:`L\ge3`);
    * *chattering*: a zero weight whose own component slides. Its coordinate's zero
      layers chatter in phase, and :math:`\dot w_{lj}` is :math:`r_j` times the mean of
      a product of the other layers' :math:`\hat w` with an odd power of
      :math:`\xi_j`, i.e. proportional to :math:`\bar v_j`; the sliding control is
      :math:`\bar v_j=0` (forced, or, where every layer is at 0 at even :math:`L\ge4`,
      where :math:`\dot h\equiv0` leaves it free, the Newton solve's start: the
      in-phase iterates' mean).

    A zero weight that is neither (held components, :func:`_held`: at :math:`L=3` with
    all three layers at 0, or at :math:`L=4` with three) moves off 0.
    """
    forcing = sliding & (jnp.sum(zero, axis=0) - zero == 1)
    return zero & (sliding | (jnp.sum(forcing, axis=0) - forcing > 0))


def _held(theta, r):
    r"""The components held at a fixed sign on a coordinate with ≥ 2 layers at 0.

    Returns ``(held, sign)``: ``held[l, j]`` where :math:`z_j\ge2` and the exponent
    :math:`e` of the chattering sign in :math:`\mathrm{sign}\,h_{lj}` is even (module
    doc), and the sign :math:`\mathrm{sgn}(r_j)\,t_{lj}` they are held at.
    """
    zero = _zero_layers(theta)
    z = jnp.sum(zero, axis=0)
    held = (z >= 2) & (zero != (z % 2 == 0)) & (r != 0)
    return held, jnp.sign(r) * _orientation(theta)


class _System(eqx.Module):
    r"""The switching functions :math:`h(\theta)`, the controlled field and the sliding
    field :math:`F(\theta,\bar v)` of a mode."""

    method: LinfSAM
    data: object
    loss: str = eqx.field(static=True)
    rescaled: bool = eqx.field(static=True)
    n_enumerated: int = eqx.field(static=True)
    clock: bool = eqx.field(static=True, default=False)  # carry t (flows._dynamics.Field)
    # The run's units of time and of h (:meth:`for_run`); 1 until a driver sets them.
    time_unit: object = 1.0
    h_unit: object = 1.0

    def r(self, theta):
        r""":math:`r=\partial\mathcal L/\partial\beta` (flow), :math:`-\partial m/\partial\beta`."""

        def of_beta(b):
            if self.rescaled:
                return -margins(b[None], self.data)[0]
            return objective(b[None], self.data, self.loss)

        return jax.grad(of_beta)(beta(theta))

    def h(self, theta):
        """The gradient handed to the sign rule, shape (L, d)."""
        if self.rescaled:
            return -_grad_margin(theta, self.data)
        return _grad_objective(theta, self.data, self.loss)

    def _expectation(self, theta, sigma, sliding, v):
        r"""The sliding field :math:`F` and :math:`\log\mathbb E\sum_iq_i` (the loss factor).

        Also returns whether a coordinate beyond the enumerated ones has a
        sign-dependent product (see the module doc).
        """
        orient = _orientation(theta)
        column = jnp.any(sliding, axis=0)  # (d,)
        vbar = jnp.sum(jnp.where(sliding, orient * v, 0.0), axis=0) / jnp.maximum(
            jnp.sum(sliding, axis=0), 1
        )
        signs = jnp.array([1.0, -1.0])
        # θ̂ with ξ_j = s on every sliding coordinate, and P(ξ_j = s) (1, 0 off S).
        controls = [jnp.where(sliding, orient * s, sigma) for s in (1.0, -1.0)]
        theta_hat = jnp.stack([theta + self.method.perturbation_from_control(u) for u in controls])
        prob = jnp.where(column, (1.0 + signs[:, None] * vbar) / 2, (1.0 + signs[:, None]) / 2)
        b = beta(theta_hat)  # (2, d)
        mean_b = jnp.sum(prob * b, axis=0)
        spread = jnp.where(column, jnp.abs(b[0] - b[1]), 0.0)
        m = self.n_enumerated
        order = jnp.argsort(-spread, stable=True)
        slots, rest = order[:m], order[m:]
        overflow = jnp.any(spread[rest] > _RANDOM_TOL * (jnp.abs(b[0]) + jnp.abs(b[1]))[rest])
        yx = self.data.y[:, None] * self.data.X  # (n, d)
        # The 2^m vertices of the enumerated coordinates (static): margins and weights.
        patterns = np.array(list(itertools.product([0, 1], repeat=m)), dtype=int).reshape(-1, m)
        b_p = jnp.broadcast_to(mean_b, (patterns.shape[0], mean_b.shape[0]))
        b_p = b_p.at[:, slots].set(b[patterns, slots])  # (P, d)
        p_slots = prob[patterns, slots]  # (P, m)
        log_q = log_speed(self.loss, b_p @ yx.T) - jnp.log(self.data.n)  # (P, n)
        w = jnp.prod(p_slots, axis=1)  # (P,) (may be < 0 inside Newton)
        q = jnp.ones_like(log_q) if self.rescaled else jnp.exp(log_q)
        mean_q = w @ q  # (n,)
        # E[q_i 1{ξ_j = s}]: enumerated coordinates from the vertices, the others
        # independent of q (their product does not change the margins).
        joint = prob[:, None, :] * mean_q[None, :, None]  # (2, n, d)
        side = np.eye(2)[patterns]  # (P, m, 2): vertex p has ξ = s on slot k
        per_side = jnp.einsum("pks,p,pi->sik", side, w, q)  # (2, n, m)
        joint = joint.at[:, :, slots].set(per_side)
        log_mean_q = None
        if self.clock:  # log E[q] for the clock, stable where q underflows
            log_w = jnp.sum(jnp.log(p_slots), axis=1)
            log_mean_q = jax.nn.logsumexp(log_w[:, None] + log_q, axis=0)  # (n,)
        r = jnp.sum(yx[None] * joint, axis=1)  # (2, d)
        field = sum(jax.vjp(beta, theta_hat[k])[1](r[k])[0] for k in range(2))
        return field, log_mean_q, overflow

    def _off_surfaces(self, theta, sigma):
        r""":meth:`_expectation` with nothing sliding, at a fraction of its cost:
        :math:`f(\theta,\sigma)` and, for the clock, :math:`\log q` (as ``(n,)``).

        With :math:`S=\emptyset` the expectation has one vertex of probability 1, so
        :math:`F=\nabla\beta(\hat\theta)^\top\sum_iy_ix_iq_i` at
        :math:`\hat\theta=\theta+\rho\sigma`; the same operations in the same order,
        without the second perturbed point, the :math:`2^M` vertices and the sort.
        """
        theta_hat = theta + self.method.perturbation_from_control(sigma)
        yx = self.data.y[:, None] * self.data.X  # (n, d)
        # The margins as the (2^M, d) product of _expectation computes them: XLA's
        # (1, d) product rounds differently (1 ulp of log q), and a lane's answer must
        # not depend on which branch its batch took (_any_lane).
        b_p = jnp.broadcast_to(beta(theta_hat), (2**self.n_enumerated, theta.shape[1]))
        log_q = log_speed(self.loss, b_p @ yx.T)[0] - jnp.log(self.data.n)
        q = jnp.ones_like(log_q) if self.rescaled else jnp.exp(log_q)
        r = jnp.sum(yx * q[:, None], axis=0)  # (d,)
        field = jax.vjp(beta, theta_hat)[1](r)[0]
        return field, (log_q if self.clock else None)

    def field(self, t, theta, sigma, sliding, v):
        r"""The field of a mode at sliding controls ``v``: :math:`F(\theta,\bar v)`.

        ``v`` is tied on each coordinate, :math:`v_{lj}=t_{lj}\bar v_j` on S (its oriented
        mean is used). Off S it is :math:`f(\theta,\sigma)`.
        """
        del t
        return self._expectation(theta, sigma, sliding, v)[0]

    def hdot(self, theta, velocity):
        r""":math:`\dot h=\nabla h(\theta)\,\dot\theta`, shape (L, d)."""
        return jax.jvp(self.h, (theta,), (velocity,))[1]

    @eqx.filter_jit  # traced once per signature, however many call sites (compile time)
    def equivalent_control(self, t, theta, sigma, sliding):
        r"""Solve :math:`\dot h_S=\nabla h_S(\theta)F(\theta,v)=0` for :math:`v_S` (Newton).

        :math:`F` depends on the sliding controls of one coordinate only through
        their oriented mean :math:`\bar v_j` (:meth:`field`), so those Jacobian columns
        are equal and the minimum-norm Newton step keeps :math:`t_{lj}v_{lj}` equal
        across the coordinate's sliding layers: the tied control.

        Returns ``(v, b, ok)`` with ``b`` the diagonal of :math:`\partial\dot h/\partial v`
        (negative on an attracting surface) and ``ok`` whether the residual
        :math:`|\dot h_S|` is below ``_NEWTON_RESIDUAL`` times the Jacobian's size.
        """
        # Nothing slides (the usual case, and every lane of a batch at once, _any_lane):
        # the loop below would return v = σ, b = 0, ok at the cost of a residual, its
        # SVD and a Jacobian; give that directly.
        none = (sigma, jnp.zeros_like(theta), jnp.asarray(True))
        return lax.cond(
            _any_lane(jnp.any(sliding)),
            lambda th: self._newton(t, th, sigma, sliding),
            lambda th: none,
            theta,
        )

    def _newton(self, t, theta, sigma, sliding):
        """The Newton solve of :meth:`equivalent_control` (any sliding set)."""
        shape = theta.shape
        mask = sliding.ravel()
        eye = jnp.eye(mask.shape[0])
        both = mask[:, None] & mask[None, :]
        live, theta = theta, lax.stop_gradient(theta)

        def residual(vf, theta):
            v = vf.reshape(shape)
            return jnp.where(
                mask, self.hdot(theta, self.field(t, theta, sigma, sliding, v)).ravel(), 0.0
            )

        def newton(carry):
            vf, _, _, k = carry
            # the residual comes with its Jacobian (one traced evaluation)
            jac, r = jax.jacfwd(lambda x: (residual(x, theta),) * 2, has_aux=True)(vf)
            a = jnp.where(both, jac, eye)
            # Least squares: the sliding components of one coordinate share one
            # control (and on the curved surface ∂L/∂β_j = 0 one equation), so the
            # system is rank-deficient; the minimum-norm step is taken.
            dv = jnp.where(mask, jnp.linalg.lstsq(a, -r)[0], 0.0)
            return vf + dv, jac, jnp.max(jnp.abs(dv), initial=0.0), k + 1

        def going(carry):
            _, _, step, k = carry
            return jnp.any(mask) & (k < _NEWTON_MAX) & ~(step <= _NEWTON_STEP)

        v0 = jnp.where(mask, 0.0, sigma.ravel())
        init = (v0, jnp.zeros(both.shape), jnp.asarray(jnp.inf), 0)
        vf, jac, _, _ = lax.while_loop(going, newton, init)
        # One more Newton step at the live θ, with the matrix held fixed: its value is
        # the solution, and its derivative in θ the implicit function's,
        # dv/dθ = -(∂R/∂v)⁺ ∂R/∂θ (a stiff solver's Jacobian), with no derivative
        # through the loop or the SVD (which is singular on tied controls).
        r = residual(vf, live)
        a = jnp.where(both, jac, eye)
        vf = vf + jnp.where(mask, jnp.linalg.lstsq(a, -r)[0], 0.0)
        size = jnp.max(jnp.abs(jnp.where(both, jac, 0.0)), initial=0.0)
        res = lax.stop_gradient(jnp.max(jnp.abs(r), initial=0.0))
        ok = ~jnp.any(mask) | (res <= _NEWTON_RESIDUAL * size)
        return vf.reshape(shape), jnp.diagonal(jac).reshape(shape), ok

    def velocity(self, t, y, sigma, sliding):
        r"""The state's derivative in a mode: :math:`F` at the equivalent control, and for
        the rescaled flow with a clock :math:`d(t,o)/d\tau` (``flows._dynamics``) with the
        loss factor averaged as the flow's selection averages it."""
        theta = y[0] if self.clock else y

        def on_surfaces(theta):
            v, _, _ = self.equivalent_control(t, theta, sigma, sliding)
            field, log_mean_q, _ = self._expectation(theta, sigma, sliding, v)
            # A pinned weight's velocity is 0 exactly, not the rounding error of the
            # control that cancels it (about 1e-16 ρ), which a step controller with a
            # tiny atol cannot follow on a weight at 0 (:meth:`project`).
            pinned = _pinned((theta == 0) & (self.r(theta) != 0), sliding)
            return jnp.where(pinned, 0.0, field), log_mean_q

        field, log_mean_q = lax.cond(
            _any_lane(jnp.any(sliding)),
            on_surfaces,
            lambda theta: self._off_surfaces(theta, sigma),
            theta,
        )
        if not self.clock:
            return field
        # dt/dτ = 1 / E[-ℓ'(m̂)] (n = 1), so that the rescaled path runs on the clock
        # of the flow's own selection (flows._dynamics.clock_rate at one vertex).
        return field, clock_from_log_rate(-log_mean_q[0])

    def project(self, theta, mode):
        r""":math:`\theta` with the weights that ``mode`` holds at 0 set to exactly 0.

        An event locates a surface to the root finder's tolerance, so a weight that
        reached 0 is left at about 1e-14 of it. The pinned weights (:func:`_pinned`, at
        0 by ``_ZERO_TOL``, on coordinates with :math:`r_j\ne0`) are moved onto their
        surface, where :meth:`velocity` keeps them with a velocity of exactly 0: else
        the rounding error of the control that cancels their velocity, relative to a
        weight of 1e-14, stalls a step controller with a tiny ``atol``: it spends its
        whole step budget without moving on.
        """
        zero = _zero_layers(theta) & (self.r(theta) != 0)
        return jnp.where(_pinned(zero, mode[1]), 0.0, theta)

    def check(self, t, theta, mode):
        """Whether the sliding control of ``mode`` solves at ``theta`` (the end of a run)."""
        return self.equivalent_control(t, theta, *mode[:2])[2]

    def switch_condition(self, t, theta, mode):
        r"""min over components of :math:`\sigma_k(h_k-h^{\rm ref}_k)/H` (off S, not held;
        H: :meth:`for_run`) and
        :math:`1-|u_k|` (on S): an event when it reaches 0.

        ``h_ref`` is :math:`h_k` at the start of the segment for the components just
        released from their surface (0 otherwise), so that those start exactly at 0
        and move into their side, instead of re-triggering at a rounding error. A
        held component (:func:`_held`) has :math:`h_k\equiv0` while its coordinate
        chatters, and so has one with a factor :math:`w_{l'j}` pinned at 0
        (:func:`_pinned`): neither has a condition.
        """
        sigma, sliding, held, h_ref = mode
        # h_lj with a factor pinned at 0 (:meth:`project`) stays 0 exactly: no condition
        pinned = _pinned((theta == 0) & (self.r(theta) != 0), sliding)
        frozen = jnp.sum(pinned, axis=0) - pinned > 0
        cross = sigma * (self.h(theta) - h_ref) / self.h_unit
        cross = jnp.where(sliding | held | frozen, _BIG, cross)
        u, _, _ = self.equivalent_control(t, theta, sigma, sliding)  # cheap if S is empty
        leave = jnp.where(sliding, 1.0 + _CONTROL_TOL - jnp.abs(u), _BIG)
        return jnp.minimum(jnp.min(cross), jnp.min(leave))

    def event_condition(self, t, theta, mode):
        r""":meth:`switch_condition` :math:`c` as :math:`\mathrm{sign}(c)\,|c|^{1/(L-1)}`: the
        same zero set and sign (the map is increasing, so it commutes with the minimum
        over components), for a root finder that needs a sign change at a simple root.

        A balanced coordinate dies with all its layers at 0 at once, so each
        :math:`h_{lj}=r_j\prod_{l'\ne l}w_{l'j}` has a root of multiplicity :math:`L-1`
        in time, :math:`h\approx-\mu_jw^{L-1}` with :math:`w\propto s^*-s`. scipy's
        event root finder (``brentq`` in ``solve_ivp``) takes interpolation steps that
        converge only linearly on such a root and fail after its 100 iterations at
        :math:`L=4`; on :math:`|c|^{1/(L-1)}` the root is simple. A simple
        root of :math:`c` (one layer reaching 0, :math:`1-|u_k|`) becomes one of infinite
        slope, still bracketed by its sign change. The diffrax driver bisects (any
        multiplicity) and uses :meth:`switch_condition` itself.
        """
        c = self.switch_condition(t, theta, mode)
        return jnp.sign(c) * jnp.abs(c) ** (1.0 / max(theta.shape[0] - 1, 1))

    def for_run(self, theta0):
        r"""This system with the units of a run from ``theta0``:

        * time: :math:`T=\lVert\theta_0\rVert/\lVert f(\theta_0,\sigma_0)\rVert` (the
          field of :meth:`initial_mode`). The drivers integrate in :math:`s/T`, and
          :meth:`decide` compares times with :math:`T+|s|`, so that every time
          tolerance (the surface test, the event root finder, the solvers' own) is
          relative to the run's scale;
        * h: :math:`H=\max_k|h_k(\theta_0)|`. :meth:`switch_condition` is in units of
          H, so that, like the stopping conditions, it is dimensionless: the drivers
          compare them to tell which one fired.

        The rescaled flow's twins :math:`(\theta,\rho)\mapsto(\lambda\theta,\lambda\rho)`
        have :math:`f\mapsto\lambda^{L-1}f` and :math:`h\mapsto\lambda^{L-1}h`, so
        :math:`T\mapsto\lambda^{2-L}T`, as their clocks :math:`\tau\mapsto\tau/\lambda^{L-2}`,
        and the conditions do not change. At :math:`\rho\gg\alpha` (L = 2)
        :math:`T\approx\alpha/(\rho\lVert\mu\rVert)`, the time in which the weights
        reach their surfaces (it was below the absolute time tolerances from
        :math:`\rho/\alpha\approx10^{8}`, and events were missed). Both are powers of
        2 (scaling by them is exact), and 1 where not a finite positive number (e.g.
        :math:`f(\theta_0,\sigma_0)=0`, or :math:`\theta_0=0`).
        """

        def power_of_2(x):
            ok = jnp.isfinite(x) & (x > 0)
            return jnp.where(ok, jnp.exp2(jnp.round(jnp.log2(jnp.where(ok, x, 1.0)))), 1.0)

        sigma = self.initial_mode(theta0)[0]
        field = self._off_surfaces(theta0, sigma)[0]
        time_unit = power_of_2(_unit(theta0)[1] / _unit(field)[1])
        h_unit = power_of_2(jnp.max(jnp.abs(self.h(theta0))))
        return eqx.tree_at(lambda s: (s.time_unit, s.h_unit), self, (time_unit, h_unit))

    def initial_mode(self, theta):
        """The mode before the first decision: every sign from h, nothing sliding."""
        sigma = jnp.where(self.h(theta) >= 0, 1.0, -1.0)
        false = jnp.zeros(theta.shape, dtype=bool)
        return sigma, false, false, jnp.zeros_like(theta)

    def decide(self, t, theta, mode):
        r"""The mode after an event at ``theta`` (active-set iteration, see module doc).

        Candidates are the sliding set and every component at its surface, less the
        held components of a dead or partly dead coordinate (:func:`_held`), which
        take their fixed sign. While some candidate has :math:`|u_k|>1`, the worst one
        is released to the side :math:`\sigma_k=\mathrm{sign}(u_k)` (or the opposite on a
        repelling surface, :math:`\partial\dot h_k/\partial u_k>0`), where its field
        points away. Returns the mode ``(sigma, sliding, held, h_ref)``, ``h_ref`` as in
        :meth:`switch_condition`, and ``(ok, ambiguous)``: whether the sliding control
        of the new mode solved, and whether the selection is ambiguous (a coordinate's
        chattering layers joined the sliding set at different events, or an
        unenumerated sign-dependent product).
        """
        sigma, sliding, _, _ = mode
        h = self.h(theta)
        # the speed scale of the surface test: the previous mode's field at the mean
        # sliding control (a tolerance only; no Newton solve, for compile time)
        speed = jnp.abs(self.hdot(theta, self.field(t, theta, sigma, sliding, 0.0 * theta)))
        at_surface = ~sliding & (jnp.abs(h) <= _SURFACE_TOL * (self.time_unit + jnp.abs(t)) * speed)
        held, held_sign = _held(theta, self.r(theta))
        sigma = jnp.where(held, held_sign, sigma)
        candidates = (sliding | at_surface) & ~held

        def release(_, carry):
            sigma, cand, _ = carry
            u, b, ok = self.equivalent_control(t, theta, sigma, cand)
            excess = jnp.where(cand, jnp.abs(u) - 1.0, -jnp.inf).ravel()
            k = jnp.argmax(excess)
            worst = jnp.zeros_like(excess, dtype=bool).at[k].set(excess[k] > _CONTROL_TOL)
            worst = worst.reshape(sigma.shape)
            side = jnp.sign(u) * jnp.where(b > 0, -1.0, 1.0)
            return jnp.where(worst, side, sigma), cand & ~worst, ok | jnp.any(worst)

        # L·d passes: the set stops changing before the last one unless it empties,
        # so ``ok`` is that of the final set.
        init = (sigma, candidates, jnp.asarray(True))
        sigma, new, ok = lax.fori_loop(0, sigma.size, release, init)
        # A coordinate chattering on ≥ 2 layers, some of which already slid before
        # this event: its layers reached their surfaces at different times.
        several = jnp.sum(new, axis=0) >= 2
        joined_late = several & jnp.any(sliding & new, axis=0) & jnp.any(new & ~sliding, axis=0)
        matters = self.rescaled or theta.shape[1] > 1  # someone's speed depends on it
        overflow = self._expectation(theta, sigma, new, jnp.zeros_like(theta))[2]
        ambiguous = (jnp.any(joined_late) & matters) | overflow
        mode = (sigma, new, held, jnp.where(candidates & ~new, h, 0.0))
        return mode, (ok, ambiguous)


def system(method, data, loss, rescaled, shape, clock=False) -> _System:
    """The Filippov system of ``method`` (an exact-sign :class:`LinfSAM`) on ``data``.

    ``shape`` is that of θ; up to :data:`MAX_ENUMERATED` sliding coordinates with a
    sign-dependent product are enumerated. ``clock``: carry the real time (rescaled).
    """
    n = min(MAX_ENUMERATED, int(shape[-1]))
    return _System(method, data, loss, rescaled, n, clock and rescaled)
