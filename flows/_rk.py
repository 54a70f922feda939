r"""Explicit Runge–Kutta steps with the stage loop unrolled.

One step of an explicit tableau :math:`(a, b, \hat b, c)` with :math:`h=t_1-t_0`:

.. math::
    k_i = h\,f\Big(t_0+c_ih,\ y_0+\sum_{j<i}a_{ij}k_j\Big),\qquad
    y_1 = y_0+\sum_i b_ik_i,\qquad
    e = \sum_i(b_i-\hat b_i)k_i .

diffrax's :class:`~diffrax.AbstractERK` runs the stages as a loop over a stage
buffer, which serves every tableau kind (implicit, multi-term, reversible
adjoints) at the price of a dynamic slice, a buffer update and a tableau-row
dot per stage. On the flows' small states, vmapped over thousands of points, that
bookkeeping costs more than the vector field (benchmarks/README.md measures both). The
unrolled steps take the same step counts and reach the same states to rounding.

The subclasses below keep diffrax's tableau, first-same-as-last (FSAL) state,
dense interpolation and error estimate, so :func:`diffrax.diffeqsolve` (step-size
control, events, saving) treats them as the solver they subclass; only ``step``
is replaced, with the stages written out at trace time. ODE terms with an array
or pytree state (θ, or θ and a clock: what :func:`flows.solve` passes).
"""

from functools import partial

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jax import lax


def _combine(y0, weights, ks):
    """:math:`y_0+\\sum_j w_jk_j`, skipping zero weights (static floats); pytree states."""
    out = y0
    for w, k in zip(weights, ks, strict=False):
        if w != 0:
            out = jax.tree.map(lambda a, b, w=float(w): a + w * b, out, k)
    return out


def _unrolled_step(self, terms, t0, t1, y0, args, solver_state, made_jump):
    """diffrax's ``AbstractRungeKutta.step`` for an explicit tableau, stages unrolled."""
    tab = self.tableau
    control = terms.contr(t0, t1)
    if tab.fsal:
        first_step, f0 = solver_state
        # f(t0, y0) is the last stage of the previous step, except on the first
        # step or after a jump; under vmap evaluate it only if some point needs it.
        redo = first_step | made_jump
        f0 = lax.cond(
            eqxi.unvmap_any(redo),
            lambda: jax.tree.map(partial(jnp.where, redo), terms.vf(t0, y0, args), f0),
            lambda: f0,
        )
    else:
        f0 = terms.vf(t0, y0, args)
    ks, f = [terms.prod(f0, control)], f0
    for c, a in zip(tab.c, tab.a_lower, strict=True):
        yi = _combine(y0, a, ks)
        f = terms.vf(t0 + float(c) * (t1 - t0), yi, args)
        ks.append(terms.prod(f, control))
    # SSAL: the last stage is evaluated at y1 itself.
    y1 = yi if tab.ssal else _combine(y0, tab.b_sol, ks)
    y_error = _combine(jax.tree.map(jnp.zeros_like, y0), tab.b_error, ks)
    dense_info = dict(y0=y0, y1=y1, k=jax.tree.map(lambda *k: jnp.stack(k), *ks))
    state = (jnp.array(False), f) if tab.fsal else None
    return y1, y_error, dense_info, state, diffrax.RESULTS.successful


class Tsit5(diffrax.Tsit5):
    """diffrax's Tsit5 (5(4), FSAL, 5th-order interpolation), stages unrolled."""

    step = _unrolled_step


class Dopri5(diffrax.Dopri5):
    """diffrax's Dopri5 (5(4), FSAL), stages unrolled."""

    step = _unrolled_step


class Dopri8(diffrax.Dopri8):
    """diffrax's Dopri8 (8(7), FSAL, 14 stages), stages unrolled."""

    step = _unrolled_step


_LOOPED = {Tsit5: diffrax.Tsit5, Dopri5: diffrax.Dopri5, Dopri8: diffrax.Dopri8}


def looped(solver):
    """diffrax's own stage-loop solver in place of one of the unrolled ones above.

    For heavy fields: the Filippov sliding field (a Newton solve over sign
    vertices per evaluation) is traced once per stage when unrolled, which
    about doubles its compile time for no gain at its few steps.
    """
    return _LOOPED[type(solver)]() if type(solver) in _LOOPED else solver
