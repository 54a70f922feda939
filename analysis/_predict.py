r"""The limits the theorems predict from a balanced start (docs/theory.md §15): which coordinate
:math:`j^\dagger` ends on, if the run escapes (:func:`limit_leader`, traceable
:func:`limit_index`), and where two coordinates tie in ℓ∞-SAM's rule (:func:`linf_tie`).

Predictions, not certificates: the certificates that decide a run from its state are in
:mod:`analysis._certify`, which reads :func:`limit_index` for the :math:`q`-order theorem's leader.
"""

import numpy as np

import flows
from flows.internal import as_array

from ._inputs import check_alpha, check_depth, check_method, check_mu
from ._xp import namespace


def limit_index(method, mu, alpha, depth: int):
    r"""Traceable :func:`limit_leader`: the index, or -1 where it predicts none; of each start
    ``alpha`` (a number, or an array (..., d) of starts), eager NumPy on NumPy inputs."""
    rho = (method.rho,) if isinstance(method, flows.LinfSAM) else ()
    xp = namespace(mu, alpha, *rho)
    mu = xp.asarray(mu, dtype=xp.float64)
    alpha = xp.asarray(alpha, dtype=xp.float64)
    alpha = xp.broadcast_to(alpha, mu.shape) if alpha.ndim == 0 else alpha
    if depth <= 2 and not isinstance(method, flows.LinfSAM) or depth == 1:
        score = xp.broadcast_to(mu, alpha.shape)
    elif isinstance(method, flows.LinfSAM):
        rho = xp.asarray(method.rho)[..., None]
        shifted = xp.where(alpha > rho, alpha - rho, 1.0)
        score = xp.where(alpha > rho, mu * shifted ** (depth - 2), -xp.inf)
    else:
        score = mu * alpha ** (depth - 2)
    best = xp.max(score, axis=-1)
    unique = (xp.sum(score == best[..., None], axis=-1) == 1) & xp.isfinite(best)
    return xp.where(unique, xp.argmax(score, axis=-1), -1)


def limit_leader(method, mu, alpha, depth: int):
    r"""The predicted limit of :math:`j^\dagger` from a balanced start, if the run escapes.

    One definition of the limit predictions (docs/theory.md §15), index 0-based, or None when no
    coordinate can escape or the prediction ties:

    * :math:`L=1`: :math:`\dot w=\mu` exactly, so :math:`\arg\max\mu` (the direction itself
      tends to :math:`\mu/\lVert\mu\rVert`, claim C1);
    * ℓ∞-SAM, :math:`L\ge2`: the coordinates decouple, :math:`\dot w_j=\mu_j(w_j-\rho)^{L-1}`
      for :math:`w_j>0`, so only :math:`\alpha_j>\rho` grow and the limit is
      :math:`\arg\max_{\alpha_j>\rho}\mu_j(\alpha_j-\rho)^{L-2}` (claim C2; at :math:`L=2`
      :math:`\arg\max_{\alpha_j>\rho}\mu_j`, the largest rate);
    * GD, ℓ2-SAM, LE-SAM: :math:`\arg\max\mu` at :math:`L=2` (C3), and at :math:`L\ge3` the
      :math:`q`-order theorem's :math:`\arg\max_j\mu_j\alpha_j^{L-2}` (docs/theory.md §10).

    >>> import flows, analysis
    >>> analysis.limit_leader(flows.LinfSAM(0.1), [1.0, 2.0, 3.0], [0.6, 0.25, 0.12], 3)
    0
    """
    check_method(method)
    depth = check_depth(depth)
    mu = check_mu(mu)
    alpha = check_alpha(alpha, mu.shape[0])
    k = int(limit_index(method, mu, alpha, depth))
    return None if k < 0 else k


def linf_tie(method, mu, alpha_k, depth: int, k: int = 0, j: int = 1):
    r"""The start :math:`\alpha_j` at which coordinate :math:`j` ties with :math:`k` in the
    ℓ∞-SAM limit rule of :func:`limit_leader`, for :math:`L\ge3`:

    .. math::
        \mu_k(\alpha_k-\rho)^{L-2}=\mu_j(\alpha_j-\rho)^{L-2}
        \iff\alpha_j=\rho+\Big(\frac{\mu_k}{\mu_j}\Big)^{1/(L-2)}(\alpha_k-\rho).

    Both coordinates blow up at :math:`\tau^*=1/((L-2)\mu(\alpha-\rho)^{L-2})` of their own
    decoupled flow :math:`\dot w=\mu(w-\rho)^{L-1}` (docs/theory.md §11), so on this curve they blow
    up together; below it (:math:`\alpha_j` smaller) :math:`k` wins. For :math:`d=2`,
    :math:`\mu_1<\mu_2` it is the line through :math:`(\rho,\rho)` of slope
    :math:`(\mu_1/\mu_2)^{1/(L-2)}<1` that bounds the region where the minor coordinate wins.

    Arguments:
        method: ``flows.LinfSAM(rho)`` (exact sign); mu: the example, shape ``(d,)``;
        alpha_k: start(s) of coordinate ``k``, each > ρ (below ρ it never escapes);
        depth: :math:`L\ge3` (at :math:`L=2` the rule is :math:`\arg\max\mu` over the
        coordinates above ρ: no curve); k, j: the two coordinates (0-based, distinct).

    >>> import flows, analysis
    >>> float(analysis.linf_tie(flows.LinfSAM(1.0), [1.0, 2.0], 3.0, 3))  # (3 - 1) / 2 + 1
    2.0
    """
    if not isinstance(method, flows.LinfSAM) or method.delta is not None:
        raise ValueError(f"`method` must be flows.LinfSAM(rho) (exact sign); got {method!r}.")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 3:
        raise ValueError(
            f"`depth` must be an integer >= 3 (no tie curve at L <= 2); got {depth!r}."
        )
    mu = np.asarray(as_array("mu", mu, "a 1-D array of finite numbers > 0"))
    d = mu.shape[0] if mu.ndim == 1 else 0
    if mu.ndim != 1 or not np.all(np.isfinite(mu)) or not np.all(mu > 0):
        raise ValueError(f"`mu` must be a 1-D array of finite numbers > 0; got {mu!r}.")
    for name, idx in (("k", k), ("j", j)):
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < d:
            raise ValueError(f"`{name}` must be an index in 0..{d - 1}; got {idx!r}.")
    if k == j:
        raise ValueError(f"`k` and `j` must differ; got k = j = {k}.")
    rho = float(method.rho)
    alpha_k = np.asarray(as_array("alpha_k", alpha_k, f"finite numbers > rho = {rho:g}"))
    if not np.all(np.isfinite(alpha_k)) or not np.all(alpha_k > rho):
        raise ValueError(
            f"`alpha_k` must be finite and > rho = {rho:g} (below it coordinate k never "
            f"escapes); got {alpha_k!r}."
        )
    return rho + (mu[k] / mu[j]) ** (1.0 / (depth - 2)) * (alpha_k - rho)
