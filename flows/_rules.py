r"""The perturbation rules, written once for both compilers.

Every rule gives the perturbation of one weight from the gradient
:math:`g=\nabla\mathcal L(\theta)`, handed over as ``grad_scale * grad``
(``grad_scale > 0``), its direction :math:`u=g/\lVert g\rVert_2` (per layer for
per-layer ℓ2-SAM) and :math:`\lVert g\rVert_2` of ``grad``:

========================= ============================================================
rule                      :math:`\varepsilon`
========================= ============================================================
``GD``                    :math:`0`
``L2``                    :math:`\rho\,u`
``LINF_SMOOTH``           :math:`\rho\tanh(g/\delta)`
``LE``                    :math:`\min\big(\sigma/(s\lVert g\rVert+\varrho),\rho_{\max}\big)\,u`
``UNNORMALISED``          :math:`\rho\,s\,g` (the gradient itself, not its direction)
========================= ============================================================

(:math:`s` = ``grad_scale``.) :func:`epsilon` is plain arithmetic on its arguments
and the namespace ``xp``; :data:`jax_epsilon` is the same code object run with
``xp = jax.numpy`` on arrays (:mod:`flows._methods`), and :data:`numba_epsilon` the
same code compiled by numba with ``xp = numpy`` on scalars, inside the per-trajectory
engine (:mod:`flows._engine`). No rule is written a second time.

The exact ℓ∞ rule :math:`\rho\,\mathrm{sign}(g)` is not here: its flow is a
Filippov system, integrated by :mod:`flows._filippov`, and its pointwise value (the
discrete update's) is :meth:`flows.LinfSAM.control`, with :math:`\mathrm{sign}(0)=+1`
so that an iterate landing exactly on a switching surface chatters on instead of being
frozen there (docs/theory.md §3).
"""

import types

import jax.numpy as jnp
import numpy as xp

GD, L2, LINF_SMOOTH, LE, UNNORMALISED = 0, 1, 2, 3, 4
#: The order of a rule's parameters in the engine's parameter rows.
PARAMS = ("rho", "delta", "sigma", "rho_max", "eps")
#: The sign each parameter must have: the keyword of :func:`flows._validate.check_scalar`.
SIGNS = {"rho": "nonnegative", "delta": "positive", "sigma": "nonnegative",
         "rho_max": "nonnegative", "eps": "positive"}  # fmt: skip


def epsilon(kind, g, u, norm, grad_scale, rho, delta, sigma, rho_max, eps):
    r""":math:`\varepsilon` of rule ``kind`` (see the module table), elementwise in ``g``, ``u``."""
    if kind == L2:
        return rho * u
    if kind == LINF_SMOOTH:
        return rho * xp.tanh(g / delta)
    if kind == LE:
        return xp.minimum(sigma / (grad_scale * norm + eps), rho_max) * u
    if kind == UNNORMALISED:
        return rho * grad_scale * g
    return 0.0 * u


def _in_namespace(fn, namespace):
    """``fn``'s code run with the global ``xp`` bound to ``namespace``."""
    scope = dict(fn.__globals__, xp=namespace)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__)


jax_epsilon = _in_namespace(epsilon, jnp)
numba_epsilon = epsilon  # compiled where the engine is (flows._engine), with xp = numpy
