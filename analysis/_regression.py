r"""The kernel-to-rich limit of gradient flow on the squared loss (Woodworth et al., 2020).

The :math:`u^2-v^2` network :math:`\beta=u\odot u-v\odot v` from
:math:`(u_0,v_0)=(\alpha,\alpha)` (:math:`\alpha\in\mathbb R^d_{>0}`, :math:`\beta_0=0`), trained
by the gradient flow of :math:`\frac1{2n}\lVert X\beta-y\rVert^2` to an interpolator, ends at

.. math::
    \beta^\infty_\alpha=\arg\min\{Q_\alpha(\beta): X\beta=y\},\qquad
    Q_\alpha(\beta)=\sum_j\alpha_j^2\,q(\beta_j/\alpha_j^2),\quad
    q(z)=2-\sqrt{4+z^2}+z\,\mathrm{arcsinh}(z/2),

the minimum-ℓ2 interpolator as :math:`\alpha\to\infty` (kernel regime) and the minimum-ℓ1 one
as :math:`\alpha\to0` (rich regime). Since :math:`q'(z)=\mathrm{arcsinh}(z/2)`, the minimiser is
:math:`\beta_j=2\alpha_j^2\sinh((X^\top\nu)_j)` for the :math:`\nu\in\mathbb R^n` that
maximises the concave dual
:math:`D(\nu)=\langle\nu,y\rangle-\sum_j2\alpha_j^2(\cosh((X^\top\nu)_j)-1)`, whose gradient is
:math:`y-X\beta(\nu)`: Newton's method on :math:`n` unknowns (docs/theory.md §18).

The u⊙v network :math:`\beta=u\odot v` from :math:`(u_0,0)` is the :math:`u^2-v^2` network
from :math:`(u_0/2,u_0/2)` on a clock twice as slow, so it has the same limit with
:math:`\alpha=|u_0|/2`.
"""

import numpy as np

from flows.internal import as_array, check_data, check_int, check_scalar

#: The starts :func:`kernel_rich_limit` reads ``alpha`` for.
MODELS = ("uv", "u2-v2")


def _scales(alpha, d, model):
    """The :math:`u^2-v^2` scales :math:`\\alpha_j` of ``alpha`` for ``model``, shape ``(d,)``."""
    if not isinstance(model, str) or model not in MODELS:
        raise ValueError(f"`model` must be one of {list(MODELS)}; got {model!r}.")
    alpha = np.asarray(as_array("alpha", alpha, "a scalar > 0 or a (d,) array of numbers > 0"))
    if alpha.ndim > 1 or (alpha.ndim == 1 and alpha.shape[0] != d):
        raise ValueError(f"`alpha` must be a scalar or shape (d,) = ({d},); got {alpha.shape}.")
    if not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError(f"`alpha` must be finite and > 0; got {alpha!r}.")
    alpha = np.broadcast_to(alpha, (d,)).astype(np.float64)
    return alpha / 2 if model == "uv" else alpha


def kernel_rich_limit(data, alpha, *, model: str = "uv", rtol: float = 1e-13,
                      max_iter: int = 200) -> np.ndarray:  # fmt: skip
    r"""The gradient-flow limit :math:`\arg\min\{Q_\alpha(\beta):X\beta=y\}` of a start of scale α.

    Arguments:
        data: a :class:`flows.Dataset` whose ``X`` (n, d) has rank n (every target can be
            interpolated), with real targets or labels.
        alpha: the start's scale, a scalar or ``(d,)``, > 0.
        model: ``"uv"``: :math:`\beta=u\odot v` from :math:`(u_0,v_0)=(\alpha,0)`, i.e.
            ``flows.product_init(alpha, 0.0, d=d)``; ``"u2-v2"``: :math:`\beta=u^2-v^2` from
            :math:`(\alpha,\alpha)`.
        rtol: Newton stops when :math:`\lVert X\beta-y\rVert_\infty\le` ``rtol`` ·
            :math:`\max(\lVert y\rVert_\infty, \max_{ij}|X_{ij}|\,\lVert\beta\rVert_1)`.
        max_iter: Newton's iteration budget.

    Returns:
        :math:`\beta^\infty_\alpha`, shape ``(d,)``. ``ValueError`` if ``X`` has rank < n or
        Newton does not reach ``rtol`` (an α so small that
        :math:`\alpha^2\cosh` over- or underflows; α down to about 1e-6 is safe).

    >>> import flows, analysis, numpy as np
    >>> data = flows.Dataset([[1.0, 2.0]], [1.0], regression=True)
    >>> beta = analysis.kernel_rich_limit(data, 1e3)  # kernel regime: minimum ℓ2 norm
    >>> bool(np.allclose(beta, [0.2, 0.4], rtol=1e-6))
    True
    """
    check_data(data)
    X, y = np.asarray(data.X, np.float64), np.asarray(data.y, np.float64)
    n, d = X.shape
    a2 = 2 * _scales(alpha, d, model) ** 2
    if np.linalg.matrix_rank(X) < n:
        raise ValueError(f"`data`: X must have rank n = {n} to interpolate every y; it has less.")
    rtol = float(check_scalar("rtol", rtol, positive=True))
    max_iter = check_int("max_iter", max_iter, minimum=1)

    def dual(nu):  # -D(ν), its gradient Xβ - y, β and X^T ν (inf where a trial step overflows)
        s = X.T @ nu
        with np.errstate(over="ignore", invalid="ignore"):
            b = a2 * np.sinh(s)
            # cosh(s) - 1 = 2 sinh(s/2)^2, without cancellation at small s
            return np.sum(a2 * 2 * np.sinh(s / 2) ** 2) - nu @ y, X @ b - y, b, s

    nu = np.zeros(n)
    f, g, b, s = dual(nu)
    for _ in range(max_iter):
        scale = max(np.max(np.abs(y)), np.max(np.abs(X)) * np.sum(np.abs(b)))
        if np.max(np.abs(g)) <= rtol * scale:
            return b
        try:
            step = np.linalg.solve((X * (a2 * np.cosh(s))) @ X.T, -g)
        except np.linalg.LinAlgError:  # cosh(s)·α² underflows on too many coordinates
            break
        t = 1.0
        while t > 1e-320:  # backtracking on the convex -D; near the optimum, where rounding
            # hides the decrease of -D, a step that halves the residual is taken as well
            f_new, g_new, b_new, s_new = dual(nu + t * step)
            if np.isfinite(f_new) and (f_new <= f + 1e-4 * t * (g @ step)
                                       or np.max(np.abs(g_new)) <= 0.5 * np.max(np.abs(g))):
                break
            t /= 2
        else:
            break
        nu, f, g, b, s = nu + t * step, f_new, g_new, b_new, s_new
    raise ValueError(
        f"`alpha`: Newton on the dual did not reach rtol = {rtol:g} (residual "
        f"{np.max(np.abs(g)):.3g}); alpha may be too small for float64 (cosh overflows)."
    )
