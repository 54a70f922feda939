r"""Closed-form regime thresholds of ℓ2-SAM at :math:`L=2`, derived with sympy (docs/theory.md §9).

For the single example :math:`\{(\mu,+1)\}` and the balanced uniform start
:math:`w^{(1)}=w^{(2)}=\alpha\mathbf 1`, the rescaled flow is
:math:`d\theta/d\tau=\nabla_\theta m(\hat\theta)` with
:math:`m=\sum_j\mu_jw^{(1)}_jw^{(2)}_j` and
:math:`\hat\theta=\theta-\rho\nabla m/\lVert\nabla m\rVert_2`. Sympy differentiates
this for the given :math:`d` and returns the initial log-growth rate
:math:`r_j=d\log\beta_j/d\tau` at :math:`\tau=0`,

.. math::
    r_j=2\mu_j\Big(1-\frac{c\,\rho\,\mu_j}{\alpha\lVert\mu\rVert_2}\Big),\qquad
    c=\tfrac1{\sqrt2}\ \text{(one norm)},\quad c=1\ \text{(per-layer norms)}.

Three thresholds follow, each the root in :math:`\alpha` of a rate condition:

* ``all_shrink``: :math:`r_{j}=0` for the smallest :math:`\mu_j`. For :math:`\alpha\le` it
  every coordinate shrinks from the start, :math:`\lVert\mu\odot w\rVert` decreases, and
  the shrinking persists: **collapse** (sufficient condition).
* ``all_grow``: :math:`r_d=0` for the largest :math:`\mu_d`. For :math:`\alpha\ge` it every
  coordinate grows, and keeps growing: **escape** (sufficient condition).
* ``direct``: :math:`r_d=r_{k}` for the two largest entries :math:`\mu_d>\mu_k`. Since
  :math:`r_d-r_j=2(\mu_d-\mu_j)\big(1-c\rho(\mu_d+\mu_j)/\lVert\mu\odot w\rVert\big)` and
  :math:`\lVert\mu\odot w\rVert` only grows once every coordinate grows, for :math:`\alpha>`
  ``direct`` the major coordinate leads at every :math:`\tau>0` (**direct**), while for
  :math:`\alpha<` ``direct`` some other coordinate grows fastest at :math:`\tau=0^+` and leads
  first (**sequential** when it escapes). This one is exact, not only sufficient.

The exact collapse/escape boundary :math:`\alpha_c` lies strictly between the first two
and is found numerically (:func:`analysis.critical_alpha`).
"""

import functools
from typing import NamedTuple

import numpy as np
import sympy as sp

from flows.internal import WrongTypeError, check_scalar

from ._inputs import check_mu


class L2SAMThresholds(NamedTuple):
    """Closed-form thresholds in α (see the module docstring)."""

    all_shrink: float
    all_grow: float
    direct: float


@functools.lru_cache(maxsize=32)
def _initial_rates(d: int, per_layer: bool):
    """Sympy: the initial rates r_j(mu, rho, alpha), j < d, and the symbols."""
    mu = sp.symbols(f"mu0:{d}", positive=True)
    rho, alpha = sp.symbols("rho alpha", positive=True)
    w1 = sp.symbols(f"u0:{d}", real=True)
    w2 = sp.symbols(f"v0:{d}", real=True)
    margin = sum(m * a * b for m, a, b in zip(mu, w1, w2, strict=True))
    layers = [[sp.diff(margin, w) for w in ws] for ws in (w1, w2)]
    norm_all = sp.sqrt(sum(g**2 for gs in layers for g in gs))
    norms = [sp.sqrt(sum(g**2 for g in gs)) if per_layer else norm_all for gs in layers]
    # The loss gradient is -ℓ'·(-∇m) with -ℓ' > 0, so ε = -ρ ∇m / ‖∇m‖.
    hat = {
        w: w - rho * g / n
        for ws, gs, n in zip((w1, w2), layers, norms, strict=True)
        for w, g in zip(ws, gs, strict=True)
    }
    velocity = [sp.diff(margin, w).subs(hat, simultaneous=True) for w in (*w1, *w2)]
    balanced = {w: alpha for w in (*w1, *w2)}
    rates = [
        sp.expand((velocity[j] / w1[j] + velocity[d + j] / w2[j]).subs(balanced)) for j in range(d)
    ]
    return rates, mu, rho, alpha


@functools.lru_cache(maxsize=256)
def _threshold(d: int, per_layer: bool, j: int, k: int | None):
    """Lambdified alpha where r_j = 0 (k None) or r_j = r_k."""
    rates, mu, rho, alpha = _initial_rates(d, per_layer)
    expr = rates[j] if k is None else rates[j] - rates[k]
    return sp.lambdify((mu, rho), _unique_root(expr, alpha))


def _unique_root(expr, alpha):
    roots = sp.solve(sp.Eq(sp.together(expr), 0), alpha)
    if len(roots) != 1:
        raise RuntimeError(f"expected one root in alpha of {expr}; got {roots}")
    return roots[0]


def l2sam_thresholds(mu, rho, *, per_layer: bool = False) -> L2SAMThresholds:
    r"""Closed-form α thresholds of ℓ2-SAM, :math:`L=2`, single example, uniform balanced start.

    With one norm over both layers (``per_layer=False``, standard SAM) sympy gives

    .. math::
        \alpha_{\rm shrink}=\frac{\rho\,\mu_{\min}}{\sqrt2\,\lVert\mu\rVert_2},\qquad
        \alpha_{\rm grow}=\frac{\rho\,\mu_{\max}}{\sqrt2\,\lVert\mu\rVert_2},\qquad
        \alpha_{\rm direct}=\frac{\rho\,(\mu_{(d)}+\mu_{(d-1)})}{\sqrt2\,\lVert\mu\rVert_2}.

    :math:`\alpha\le\alpha_{\rm shrink}` implies collapse, :math:`\alpha\ge\alpha_{\rm grow}`
    implies escape, and :math:`\alpha_{\rm direct}` is the exact sequential/direct boundary
    (module docstring). With per-layer norms replace :math:`\sqrt2` by 1.

    Arguments:
        mu: the example, shape ``(d,)``, positive, unique largest entry.
        rho: radius :math:`\rho\ge0`.
        per_layer: the ``flows.L2SAM(per_layer=...)`` convention.

    >>> import analysis, numpy as np
    >>> b = analysis.l2sam_thresholds([3.0, 4.0], 1.0)
    >>> np.allclose(b, [3 / (5 * np.sqrt(2)), 4 / (5 * np.sqrt(2)), 7 / (5 * np.sqrt(2))])
    True
    """
    mu = check_mu(mu)
    if isinstance(rho, bool):
        raise WrongTypeError(f"`rho` must be a finite real number >= 0; got {rho!r}.")
    rho = float(check_scalar("rho", rho, nonnegative=True))
    if not isinstance(per_layer, bool):
        raise WrongTypeError(f"`per_layer` must be True or False; got {per_layer!r}.")
    d = mu.shape[0]
    order = [int(j) for j in np.argsort(mu)]
    shrink = float(_threshold(d, per_layer, order[0], None)(mu, rho))
    grow = float(_threshold(d, per_layer, order[-1], None)(mu, rho))
    direct = float(_threshold(d, per_layer, order[-1], order[-2])(mu, rho)) if d > 1 else np.nan
    return L2SAMThresholds(shrink, grow, direct)
