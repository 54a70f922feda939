r"""ℓ∞-SAM flows as Filippov systems (issue 3).

With the control :math:`u\in[-1,1]^{L\times d}` the ℓ∞-SAM field is

.. math::
    f(\theta,u) = -\nabla\mathcal L(\theta+\rho\,u)\quad\text{(flow)},\qquad
    f(\theta,u) = \nabla m(\theta+\rho\,u)\quad\text{(rescaled flow)},

and off the switching surfaces :math:`u=\mathrm{sign}(h(\theta))`, where the
switching functions :math:`h_k` are the gradient components handed to the sign
rule: :math:`h=\nabla\mathcal L` (flow) or :math:`h=-\nabla m` (rescaled flow;
same sign, since :math:`-\ell'>0`). For a single example with :math:`\mu>0` the
surfaces :math:`h_k=0` are coordinate hyperplanes of the other layers' weights;
for general data they are curved.

The field is integrated piecewise. Each *mode* fixes a sign :math:`\sigma_k`
for every component off its surface and a sliding set :math:`S`. The sliding
components of one coordinate :math:`j` share one sign, :math:`u_{lj}=t_{lj}\xi_j`
with a fixed orientation :math:`t_{lj}=\pm1` (see :func:`_orientation`). On
:math:`S` the field is Filippov's sliding field :math:`F(\theta,v)`: the average of
:math:`f` over independent signs :math:`\xi_j` of mean :math:`\bar v_j` (see
:meth:`_System.field`), with :math:`v_{lj}=t_{lj}\bar v_j` the solution of

.. math::
    \dot h_S = \nabla h_S(\theta)\, F(\theta,v) = 0
    \qquad (u_k=\sigma_k,\ k\notin S),

found by Newton's method (``jax.jacfwd`` gives the Jacobian). On one surface
:math:`F` is Filippov's convex combination :math:`\lambda f^++(1-\lambda)f^-`,
the :math:`\eta\to0` limit of the discrete iterates. For the rescaled
single-example flow :math:`f` is multilinear in :math:`u` (:math:`\nabla m` is
multilinear in :math:`\hat\theta`), so :math:`F(\theta,v)=f(\theta,v)` and
:math:`v` is Utkin's equivalent control; for the plain flow the loss factor
:math:`-\ell'(m(\hat\theta))` is not affine in :math:`u` and the vertices are
enumerated (up to :data:`MAX_VERTEX_SLIDING` sliding coordinates; beyond, the
equivalent control).

A smooth segment ends at an event, located by bisection on the solver's dense
output: some :math:`\sigma_k h_k` reaches 0 (a component meets its surface) or
some :math:`|v_k|`, :math:`k\in S`, reaches 1 (the sliding field no longer points
along the surface, so the motion leaves it). At an event the new mode comes from
an active-set iteration on the candidates (the sliding set plus the components
at their surfaces): solve for :math:`v`, release the component that violates
:math:`|v_k|\le1` most to the side it moves into, repeat. A released component
whose sign flips has crossed its surface; one with :math:`|v_k|<1` slides.

Selection. Where the surfaces of one coordinate's weights intersect (a dead
coordinate, :math:`w^{(1)}_j=\dots=w^{(L)}_j=0`, on a plain flow with other
coordinates alive) Filippov's set is not a single vector: the perturbed product
:math:`\hat\beta_j` depends on how the chattering signs correlate, and enters the
other coordinates' speed through :math:`\ell'(\hat m)`. The shared sign is the
in-phase chatter that the discrete iterates keep exactly from a balanced start
(:math:`\hat\beta_j=\rho^L` at even :math:`L`); on the curved surface
:math:`\partial\mathcal L/\partial\beta_j=0` it is exact. From an unbalanced start
the layers die at different times and the discrete chatter slips between phases
(time-averaged :math:`\hat\beta_j/\rho^2\approx0.3` measured at :math:`L=2`, for
:math:`\eta=10^{-3}` and :math:`3\cdot10^{-4}`, where in phase gives 1 and independent
signs 0), and the iterates' clock does not settle as :math:`\eta\to0`: with
:math:`\mu=(1,2)`, :math:`\rho=0.5`, :math:`w^{(1)}(0)=(0.3,0.7)`,
:math:`w^{(2)}(0)=(0.15,0.7)`, :math:`w_2(8)` is 1.977, 2.009, 1.968, 1.983, 1.969 for
:math:`\eta=8/1280,\dots,8/20480`, and the in-phase flow gives 1.927. The plain flow
keeps the in-phase clock there, an approximation. The path of the rescaled
single-example flow does not depend on the selection.

The loop over segments is a ``lax.while_loop`` over ``diffrax.diffeqsolve``
calls, so the solve is jit- and vmap-able; the same mode logic drives an eager
``scipy.integrate.solve_ivp`` segment loop, the independent reference.
"""

import itertools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate
from jax import lax

from ._dynamics import _grad_margin, _grad_objective, rescaled_velocity, velocity
from ._methods import AbstractMethod, LinfSAM
from ._trajectory import Status, make_trajectory

# At an event, a component is at its surface when the time it needs to reach it,
# |h_k| / |dh_k/dt|, is below _SURFACE_TOL * (1 + t): simultaneous switches (a
# balanced pair of weights) are handled as one event.
_SURFACE_TOL = 1e-9
# An equivalent control with |u_k| <= 1 + _CONTROL_TOL is admissible (sliding).
_CONTROL_TOL = 1e-9
# A weight below _ZERO_TOL * max|θ| counts as 0 when orienting sign components.
_ZERO_TOL = 1e-9
_NEWTON_ITERS = 6
# The plain flow's Filippov field averages f over the 2^M sign vertices of the
# first M <= MAX_VERTEX_SLIDING coordinates with a sliding component (cost 2^M field
# evaluations while sliding); further sliding coordinates use the equivalent control.
MAX_VERTEX_SLIDING = 4
_BIG = 1e3  # the value of a masked-out event condition
_CONTINUE = -1  # status while segments remain
_STOP_TOL = 1e-9  # a stopping condition at most this at an event fired it


def _orientation(theta):
    r""":math:`t_{lj}=\prod_{l'\ne l}\mathrm{sgn}^+ w^{(l')}_j`, with :math:`\mathrm{sgn}^+0=+1`.

    Since :math:`\partial\mathcal L/\partial w^{(l)}_j=(\partial\mathcal L/\partial\beta_j)
    \prod_{l'\ne l}w^{(l')}_j`, the sliding sign components of one coordinate move as one,
    :math:`u_{lj}=t_{lj}\,\xi_j`: on the curved surface
    :math:`\partial\mathcal L/\partial\beta_j=0` (weights nonzero) exactly, with
    :math:`\xi_j` its sign; on a dead coordinate (:math:`w^{(l)}_j=0` for all :math:`l`,
    so :math:`t_{lj}=1`) as in-phase chatter, :math:`\mathrm{sgn}\,w^{(l)}_j` equal
    across layers, which the discrete iterates keep from a balanced start (the
    update map preserves :math:`w^{(1)}_j=\dots=w^{(L)}_j`). A weight counts as 0 below
    :data:`_ZERO_TOL` times :math:`\max|\theta|`.
    """
    sgn = jnp.where(theta < -_ZERO_TOL * jnp.max(jnp.abs(theta)), -1.0, 1.0)
    return jnp.prod(sgn, axis=0) * sgn


class _Controlled(AbstractMethod):
    r"""The ℓ∞-SAM rule at a given control: :math:`\varepsilon=\rho\,u` (no sign)."""

    method: LinfSAM
    u: jax.Array

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta, grad, t, grad_scale
        return self.method.perturbation_from_control(self.u)


class _System(eqx.Module):
    r"""The switching functions :math:`h(\theta)`, the field :math:`f(\theta,u)` and the
    Filippov field :math:`F(\theta,v)` of a mode."""

    method: LinfSAM
    data: object
    loss: str = eqx.field(static=True)
    rescaled: bool = eqx.field(static=True)
    n_vertex: int = eqx.field(static=True)  # sliding coordinates averaged over vertices

    def h(self, theta):
        """The gradient handed to the sign rule, shape (L, d)."""
        if self.rescaled:
            return -_grad_margin(theta, self.data)
        return _grad_objective(theta, self.data, self.loss)

    def f(self, t, theta, u):
        """The field at control ``u`` (the perturbation ρu), shape (L, d)."""
        v = rescaled_velocity if self.rescaled else velocity
        return v(_Controlled(self.method, u), self.data, self.loss, theta, t)

    def field(self, t, theta, sigma, sliding, v):
        r"""The field of a mode at sliding controls ``v``: :math:`F(\theta,v)`.

        .. math::
            F(\theta,v)=\sum_{p\in\{\pm1\}^M}\prod_{i\le M}\frac{1+p_i\bar v_{j_i}}2\,
            f(\theta,u_p),

        the average of :math:`f` over independent signs :math:`\xi_j` of mean
        :math:`\bar v_j` on the first :math:`M` coordinates :math:`j_1,\dots,j_M` with a
        sliding component, shared by that coordinate's sliding components as
        :math:`u_{lj}=t_{lj}\xi_j` (:func:`_orientation`; ``v`` is tied,
        :math:`v_{lj}=t_{lj}\bar v_j` on S). The vertex :math:`u_p` puts
        :math:`t_{lj_i}p_i` there, :math:`v_k` on the other sliding components and
        :math:`\sigma_k` off S. On one surface this is Filippov's convex combination.
        The rescaled single-example field is multilinear in :math:`u`, with products
        only within a coordinate, where one layer slides or all vanish (a dead
        coordinate, both sides 0): there it equals :math:`f(\theta,v)`, and
        :math:`M=0` is used.
        """
        u = jnp.where(sliding, v, sigma)
        m = self.n_vertex
        if m == 0:
            return self.f(t, theta, u)
        orient = _orientation(theta)
        column = jnp.any(sliding, axis=0)
        vbar = jnp.sum(jnp.where(sliding, orient * v, 0.0), axis=0) / jnp.maximum(
            jnp.sum(sliding, axis=0), 1
        )
        first = jnp.argsort(~column, stable=True)[:m]  # the first m sliding coordinates
        valid = column[first]
        patterns = jnp.array(list(itertools.product([-1.0, 1.0], repeat=m)))  # (2^m, m)
        probs = jnp.where(valid, (1.0 + patterns * vbar[first]) / 2, (1.0 + patterns) / 2)
        weights = jnp.prod(probs, axis=1)

        def vertex(p):
            at = sliding[:, first] & valid
            return self.f(
                t, theta, u.at[:, first].set(jnp.where(at, orient[:, first] * p, u[:, first]))
            )

        def average():
            return jnp.tensordot(weights, jax.vmap(vertex)(patterns), axes=1)

        return lax.cond(jnp.any(column), average, lambda: self.f(t, theta, u))

    def hdot(self, t, theta, velocity):
        r""":math:`\dot h=\nabla h(\theta)\,\dot\theta`, shape (L, d)."""
        return jax.jvp(self.h, (theta,), (velocity,))[1]

    def equivalent_control(self, t, theta, sigma, sliding):
        r"""Solve :math:`\dot h_S=\nabla h_S(\theta)F(\theta,v)=0` for :math:`v_S` (Newton).

        :math:`F` depends on the sliding controls of one coordinate only through
        their oriented mean :math:`\bar v_j` (:meth:`field`), so those Jacobian columns
        are equal and the minimum-norm Newton step keeps :math:`t_{lj}v_{lj}` equal
        across the coordinate's sliding layers: the tied control.

        Returns ``(v, b)`` with ``b`` the diagonal of :math:`\partial\dot h/\partial v`
        (negative on an attracting surface).
        """
        shape = theta.shape
        mask = sliding.ravel()
        eye = jnp.eye(mask.shape[0])
        both = mask[:, None] & mask[None, :]

        def residual(vf):
            v = vf.reshape(shape)
            return self.hdot(t, theta, self.field(t, theta, sigma, sliding, v)).ravel()

        def newton(_, carry):
            vf, _ = carry
            r, jac = residual(vf), jax.jacfwd(residual)(vf)
            a = jnp.where(both, jac, eye)
            # Least squares: the sliding components of one coordinate share one
            # control (and on the curved surface ∂L/∂β_j = 0 one equation), so the
            # system is rank-deficient; the minimum-norm step is taken.
            dv = jnp.linalg.lstsq(a, -jnp.where(mask, r, 0.0))[0]
            return vf + jnp.where(mask, dv, 0.0), jnp.diagonal(jac)

        v0 = jnp.where(mask, 0.0, sigma.ravel())
        vf, b = lax.fori_loop(0, _NEWTON_ITERS, newton, (v0, jnp.zeros_like(v0)))
        return vf.reshape(shape), b.reshape(shape)

    def velocity(self, t, theta, sigma, sliding):
        """The field of the current mode, sliding components at the equivalent control."""
        v, _ = self.equivalent_control(t, theta, sigma, sliding)
        return self.field(t, theta, sigma, sliding, v)

    def switch_condition(self, t, theta, sigma, sliding, h_ref):
        r"""min over components of :math:`\sigma_k(h_k-h^{\rm ref}_k)` (off S) and
        :math:`1-|u_k|` (on S): an event when it reaches 0.

        ``h_ref`` is :math:`h_k` at the start of the segment for the components just
        released from their surface (0 otherwise), so that those start exactly at 0
        and move into their side, instead of re-triggering at a rounding error.
        """
        cross = jnp.where(sliding, _BIG, sigma * (self.h(theta) - h_ref))
        u, _ = self.equivalent_control(t, theta, sigma, sliding)
        leave = jnp.where(sliding, 1.0 + _CONTROL_TOL - jnp.abs(u), _BIG)
        return jnp.minimum(jnp.min(cross), jnp.min(leave))

    def decide(self, t, theta, sigma, sliding):
        r"""The mode after an event at ``theta`` (active-set iteration, see module doc).

        Candidates are the sliding set and every component at its surface. While
        some candidate has :math:`|u_k|>1`, the worst one is released to the side
        :math:`\sigma_k=\mathrm{sign}(u_k)` (or the opposite on a repelling surface,
        :math:`\partial\dot h_k/\partial u_k>0`), where its field points away.
        Returns ``(sigma, sliding, h_ref)``, ``h_ref`` as in :meth:`switch_condition`.
        """
        h = self.h(theta)
        speed = jnp.abs(self.hdot(t, theta, self.velocity(t, theta, sigma, sliding)))
        at_surface = ~sliding & (jnp.abs(h) <= _SURFACE_TOL * (1.0 + jnp.abs(t)) * speed)
        candidates = sliding | at_surface

        def release(_, carry):
            sigma, cand = carry
            u, b = self.equivalent_control(t, theta, sigma, cand)
            excess = jnp.where(cand, jnp.abs(u) - 1.0, -jnp.inf).ravel()
            k = jnp.argmax(excess)
            worst = jnp.zeros_like(excess, dtype=bool).at[k].set(excess[k] > _CONTROL_TOL)
            worst = worst.reshape(sigma.shape)
            side = jnp.sign(u) * jnp.where(b > 0, -1.0, 1.0)
            return jnp.where(worst, side, sigma), cand & ~worst

        sigma, cand = lax.fori_loop(0, sigma.size, release, (sigma, candidates))
        return sigma, cand, jnp.where(candidates & ~cand, h, 0.0)


def system(method, data, loss, rescaled, shape) -> _System:
    """The Filippov system of ``method`` (an exact-sign :class:`LinfSAM`) on ``data``.

    The plain flow averages over the vertices of up to :data:`MAX_VERTEX_SLIDING`
    sliding coordinates (``shape`` is that of θ); the rescaled flow needs none.
    """
    n_vertex = 0 if rescaled else min(MAX_VERTEX_SLIDING, int(shape[-1]))
    return _System(method, data, loss, rescaled, n_vertex)


@eqx.filter_jit
def solve_filippov_diffrax(
    method,
    data,
    theta0,
    ts,
    t1,
    *,
    solver,
    loss,
    rescaled,
    rtol,
    atol,
    max_steps,
    collapse_tol,
    escape_tol,
    loss_tol,
):
    r"""Integrate the Filippov ℓ∞-SAM flow: a ``lax.while_loop`` over smooth segments.

    The stopping events are those of :func:`flows.solve`. Each segment is one
    ``diffeqsolve`` in a fixed mode, ended by a switch event, a stopping event or
    ``t1``; its step budget is ``max_steps``, and the loop stops with ``max_steps``
    once the segments together spent it.
    """
    # (_solve imports this module lazily)
    from ._solve import _Bisection, _event_functions, status_from_result

    events = _event_functions(data, loss, theta0, collapse_tol, escape_tol, loss_tol)
    sys = system(method, data, loss, rescaled, theta0.shape)
    term = diffrax.ODETerm(lambda t, y, args: sys.velocity(t, y, *args[:2]))
    # Stopping conditions as "positive inside, stop at <= 0" (escape is an upcrossing).
    stops = [(lambda y, c=c, s=s: -s * c(y)) for c, s, _ in events]
    codes = [code for _, _, code in events]

    def conditions(t, y, args):
        return jnp.stack([sys.switch_condition(t, y, *args)] + [c(y) for c in stops])

    # One scalar event, the minimum of all conditions, located by bisection (no
    # derivative of the equivalent control is traced); the condition that fired is
    # the smallest one at the located state. A non-finite state makes the step
    # controller fail, and is reported as ``nonfinite``.
    event = diffrax.Event(
        lambda t, y, args, **kw: jnp.min(conditions(t, y, args)),
        root_finder=_Bisection(rtol=1e-13, atol=1e-13, flip=True),  # downcrossing
        direction=False,
    )
    implicit = isinstance(solver, diffrax.AbstractImplicitSolver)
    controller = diffrax.PIDController(
        rtol=rtol, atol=atol, pcoeff=0.4, icoeff=0.3 if implicit else 1.0
    )

    def segment(carry):
        (t0, theta, sigma, sliding, thetas, status, steps, rejected, switches, t_slide) = carry
        # Every segment starts at t = 0 or at a switch event: choose its mode.
        sigma, sliding, h_ref = sys.decide(t0, theta, sigma, sliding)
        args = (sigma, sliding, h_ref)
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0=t0,
            t1=t1,
            dt0=None,
            y0=theta,
            args=args,
            saveat=diffrax.SaveAt(
                subs=[diffrax.SubSaveAt(ts=jnp.clip(ts, t0, t1)), diffrax.SubSaveAt(t1=True)]
            ),
            stepsize_controller=controller,
            event=event,
            max_steps=max_steps,
            throw=False,
        )
        (_, t_end), (saved, theta_end) = sol.ts, sol.ys
        t_end, theta_end = t_end[0], theta_end[0]
        inside = (ts >= t0) & (ts <= t_end)
        thetas = jnp.where(inside[:, None, None], saved, thetas)
        # The event was a stop if a stopping condition is (about) 0 at the located
        # state. It can also be crossed inside the step that overshoots a switching
        # surface (‖θ‖ is not monotone across it) and be missed there; the switch
        # event then lands on the far side, hence "<=".
        event_code = jnp.asarray(_CONTINUE, dtype=jnp.int64)
        for c, code_k in reversed(list(zip(stops, codes, strict=True))):
            event_code = jnp.where(c(theta_end) <= _STOP_TOL, code_k, event_code)
        code = status_from_result(sol.result, event_code)
        switches = switches + (code == _CONTINUE)
        steps = steps + sol.stats["num_steps"]
        code = jnp.where((code == _CONTINUE) & (steps >= max_steps), Status.MAX_STEPS, code)
        code = jnp.where(jnp.all(jnp.isfinite(theta_end)), code, Status.NONFINITE)
        t_slide = t_slide + jnp.where(jnp.any(sliding), t_end - t0, 0.0)
        rejected = rejected + sol.stats["num_rejected_steps"]
        return (t_end, theta_end, sigma, sliding, thetas, code, steps, rejected, switches, t_slide)

    sigma0 = jnp.where(sys.h(theta0) >= 0, 1.0, -1.0)
    thetas0 = jnp.broadcast_to(theta0, (ts.shape[0], *theta0.shape))
    zero = jnp.zeros((), dtype=jnp.int64)
    carry = (
        jnp.asarray(0.0),
        theta0,
        sigma0,
        jnp.zeros(theta0.shape, dtype=bool),
        thetas0,
        jnp.asarray(_CONTINUE, dtype=jnp.int64),
        zero,
        zero,
        zero,
        jnp.asarray(0.0),
    )
    carry = lax.while_loop(lambda c: c[5] == _CONTINUE, segment, carry)
    (t_end, theta_end, _, _, thetas, status, steps, rejected, switches, t_slide) = carry
    return make_trajectory(
        ts,
        thetas,
        data,
        loss,
        status=status,
        t_end=t_end,
        theta_end=theta_end,
        n_steps=steps,
        n_rejected=rejected,
        n_switches=switches,
        t_sliding=t_slide,
    )


@eqx.filter_jit
def _call(sys, name, *args):
    """``sys.name(*args)``, compiled once per system shape (the scipy reference)."""
    return getattr(sys, name)(*args)


def solve_filippov_scipy(
    method,
    data,
    theta0,
    ts,
    t1,
    *,
    solver,
    loss,
    rescaled,
    rtol,
    atol,
    max_steps,
    collapse_tol,
    escape_tol,
    loss_tol,
):
    r"""The same Filippov flow as :func:`solve_filippov_diffrax`, eagerly, with ``solve_ivp``.

    The independent reference: the segments are ``scipy.integrate.solve_ivp`` runs
    whose events (the switch condition and the stopping conditions) are located by
    scipy; only the mode logic (:meth:`_System.decide`) and the fields are shared.
    ``n_rejected`` is -1 (scipy does not report it).
    """
    from ._solve import _event_functions, _step_budget_event

    shape = theta0.shape
    sys = system(method, data, loss, rescaled, shape)
    decide, velocity_, switch = (
        (lambda t, *a, name=name: _call(sys, name, jnp.asarray(t), *a))  # t traced
        for name in ("decide", "velocity", "switch_condition")
    )
    events = _event_functions(data, loss, theta0, collapse_tol, escape_tol, loss_tol)
    stops = [(jax.jit(c), s, code) for c, s, code in events]
    tsn = np.asarray(ts)
    thetas = np.full((tsn.shape[0], *shape), np.nan)
    t, theta = 0.0, np.asarray(theta0)
    sigma = np.where(np.asarray(sys.h(theta0)) >= 0, 1.0, -1.0)
    sliding = np.zeros(shape, dtype=bool)
    status, steps, switches, t_slide = None, 0, 0, 0.0
    while status is None:
        sigma, sliding, h_ref = decide(t, theta, sigma, sliding)

        def fun(s, y, sigma=sigma, sliding=sliding):
            return np.asarray(velocity_(s, y.reshape(shape), sigma, sliding)).ravel()

        def on_switch(s, y, sigma=sigma, sliding=sliding, h_ref=h_ref):
            return float(switch(s, y.reshape(shape), sigma, sliding, h_ref))

        scipy_events = [on_switch]
        for c, s, _ in stops:
            scipy_events.append(lambda _, y, c=c: float(c(y.reshape(shape))))
            scipy_events[-1].direction = s
        on_switch.direction = -1
        for ev in scipy_events:
            ev.terminal = True
        scipy_events.append(_step_budget_event(max(max_steps - steps, 1)))
        sol = scipy.integrate.solve_ivp(
            fun,
            (t, float(t1)),
            theta.ravel(),
            method=solver,
            rtol=rtol,
            atol=atol,
            events=scipy_events,
            dense_output=True,
        )
        t_end = float(sol.t[-1])
        inside = (tsn >= t) & (tsn <= t_end)
        if inside.any():
            thetas[inside] = sol.sol(tsn[inside]).T.reshape(-1, *shape)
        steps += len(sol.t) - 1
        if np.any(sliding):
            t_slide += t_end - t
        t, theta = t_end, sol.y[:, -1].reshape(shape)
        fired = [i for i, te in enumerate(sol.t_events) if len(te)]
        if not np.all(np.isfinite(theta)) or sol.status < 0:
            status = Status.NONFINITE
        elif sol.status == 0:
            status = Status.OK
        else:
            stopped = [stops[i - 1][2] for i in fired if 0 < i <= len(stops)]
            stopped += [code for c, s, code in stops if float(-s * c(theta)) <= _STOP_TOL]
            if stopped:
                status = stopped[0]
            elif steps >= max_steps or len(stops) + 1 in fired:
                status = Status.MAX_STEPS
            else:
                switches += 1
    return make_trajectory(
        tsn,
        jnp.asarray(thetas),
        data,
        loss,
        status=status,
        t_end=t,
        theta_end=jnp.asarray(theta),
        n_steps=steps,
        n_rejected=-1,
        n_switches=switches,
        t_sliding=t_slide,
    )
