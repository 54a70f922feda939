r"""When a single-example run is decided: the escape and settled-leader certificates, every depth.

Setting: the rescaled flow :math:`d\theta/d\tau=\nabla m(\hat\theta)` of one example
:math:`\{(\mu,+1)\}` from nonnegative weights, so that :math:`\dot w_{lj}=\mu_j\prod_{l'\ne l}\hat
w_{l'j}` (docs/theory.md §4) with :math:`\hat\theta=\theta+\varepsilon`.

**Two facts about every method here** (GD, ℓ2-SAM global and per layer, LE-SAM, ℓ∞-SAM):

1. :math:`|\varepsilon_{lj}|\le e`, with :math:`e=0` (GD), :math:`\rho` (ℓ2-SAM, ℓ∞-SAM) or
   :math:`\rho_{\max}` (LE-SAM): :func:`perturbation_bound`.
2. :math:`\varepsilon` points along :math:`-\nabla m`, and :math:`\nabla m\ge0` where the
   weights are :math:`\ge0`, so :math:`\hat w_{lj}\in[w_{lj}-e,\,w_{lj}]`.

Hence, for the smallest layer :math:`a_j=\min_l w_{lj}` and the largest :math:`b_j=\max_l|w_{lj}|`,

.. math::
    \dot a_k\ \ge\ \mu_k\,(a_k-e)^{L-1}\quad(a_k>e),\qquad
    \dot w_{lj}\ \le\ \mu_j\,u_j^{L-1},\quad u_j=\begin{cases}b_j&L\text{ even}\\
    \max(b_j,e)&L\text{ odd}\end{cases}

(at even :math:`L` a negative :math:`\hat w` only slows the coordinate). Comparison with the GD
solution :math:`G_j(\tau;z)=(z^{-(L-2)}-(L-2)\mu_j\tau)^{-1/(L-2)}` (:math:`z\,e^{\mu_j\tau}` at
:math:`L=2`) gives a lower solution :math:`e+G_k(\tau;a_k-e)` for the leader and upper solutions
:math:`G_j(\tau;u_j)` for the others. :math:`G^{-(L-2)}` is linear in :math:`\tau` (and
:math:`\log G` at :math:`L=2`), so :math:`G_k(\tau;a_k-e)\ge G_j(\tau;u_j)` for all :math:`\tau`
until :math:`G_k` blows up exactly when it holds at :math:`\tau=0` and at the end:

* **escape** (the loss tends to 0): some :math:`a_k>e`; then :math:`a_k` grows without bound
  (in finite :math:`\tau` for :math:`L\ge3`). At :math:`L=1`, :math:`\dot w=\mu` exactly: always.
* **settled on** :math:`k` (:math:`k` leads :math:`|\beta|` from now on, so it is the limit):
  :math:`a_k>e` and for every :math:`j\ne k`: :math:`a_k-e\ge u_j` and
  :math:`\mu_k(a_k-e)^{L-2}\ge\mu_j u_j^{L-2}` (:math:`L\ge3`: the upper solution of :math:`j`
  blows up no earlier), or :math:`\mu_k\ge\mu_j` or :math:`u_j=0` (:math:`L=2`). At :math:`L=1`
  (exact, :math:`w_j=w_j(0)+\mu_j\tau`): :math:`w_k\ge w_j` and :math:`\mu_k\ge\mu_j`.

Both are sufficient conditions, proven for every depth; a run is continued until they hold
(:func:`analysis.regime_path`). Their time scale: the field is homogeneous of degree
:math:`L-1` in :math:`(\theta, e)`, so :func:`time_scale` is :math:`s^{2-L}/\min\mu` with
:math:`s=\max(\max_{lj}|w_{lj}|, e)`.
"""

import jax.numpy as jnp
import numpy as np

import flows
from flows.internal import as_array, check_finite, is_traced

from ._dominant import log_size
from ._inputs import check_kind, check_method
from ._predict import limit_index
from ._xp import at, namespace


def perturbation_bound(method):
    r"""The bound :math:`e\ge|\varepsilon_{lj}|` of every perturbation entry (module docstring).

    :math:`0` for GD, :math:`\rho` for ℓ2-SAM (global or per layer: a unit vector's entries are
    at most 1) and ℓ∞-SAM (also with ``delta``: :math:`|\tanh|\le1`), :math:`\rho_{\max}` for
    LE-SAM (:math:`\rho_t\le\rho_{\max}`). Traceable: a vmapped method gives an array. Any
    other method is refused (``ValueError`` naming ``method``).

    >>> import flows, analysis
    >>> [float(analysis.perturbation_bound(m)) for m in (flows.GD(), flows.L2SAM(0.3),
    ...  flows.LinfSAM(0.2), flows.LESAM(0.35, 0.1))]
    [0.0, 0.3, 0.2, 0.1]
    """
    return bound_of(check_method(method))


def bound_of(method):
    """:func:`perturbation_bound` of a method already checked (:func:`check_method`), in the
    namespace of its parameter (:mod:`analysis._xp`; a batch of methods gives one per run)."""
    if isinstance(method, flows.GD):
        return np.zeros(())
    value = method.rho if isinstance(method, (flows.L2SAM, flows.LinfSAM)) else method.rho_max
    return namespace(value).asarray(value, dtype=np.float64)


def _check_certificate(theta, mu, bound, trapped):
    """Shapes and types always (traced or not); ``mu`` and ``bound`` values when concrete. θ's
    values are not checked: :func:`analysis.regime_path` certifies the end of every solve,
    and a non-finite end is read from its status, not refused here."""
    theta = as_array("theta", theta, "an (L, d) array of real numbers, L >= 1 and d >= 1")
    if theta.ndim != 2 or theta.shape[0] < 1 or theta.shape[1] < 1:
        raise ValueError(
            f"`theta` must have shape (L, d) with L >= 1 layers and d >= 1; got {theta.shape}."
        )
    d = theta.shape[1]
    mu = as_array("mu", mu, f"a ({d},) array of real numbers > 0")
    if mu.shape != (d,):
        raise ValueError(f"`mu` must have shape ({d},) to match `theta`; got {mu.shape}.")
    bound = as_array("bound", bound, "a real number >= 0")
    if bound.ndim != 0:
        raise ValueError(f"`bound` must be a real scalar >= 0; got shape {bound.shape}.")
    if trapped is not None:
        check_kind("trapped", trapped, "b")
        trapped = jnp.asarray(trapped)
        if trapped.shape != (d,):
            raise ValueError(f"`trapped` must have shape ({d},); got {trapped.shape}.")
    if not is_traced(mu) and not np.all(np.asarray(mu) > 0):  # NaN fails too
        raise ValueError(f"`mu` must be finite and > 0 elementwise; got {mu!r}.")
    check_finite("mu", mu)
    if not is_traced(bound) and not float(bound) >= 0:
        raise ValueError(f"`bound` must be a finite real number >= 0; got {bound!r}.")
    check_finite("bound", bound)
    return theta, mu, bound, trapped


def decouples(method) -> bool:
    r"""Whether ``method`` is exact ℓ∞-SAM, whose coordinates decouple (:func:`certificate`)."""
    return isinstance(method, flows.LinfSAM) and method.delta is None


def certificate(theta, mu, bound, trapped=None, decoupled: bool = False):
    r"""(escaped, leader, settled) of the state ``theta`` (module docstring), traceable.

    ``leader`` is :math:`\arg\max_j|\beta_j|`, ties to the largest :math:`\mu_j` (the index a
    settled tie resolves to); ``escaped`` certifies that the loss tends to 0, ``settled`` that
    ``leader`` leads :math:`|\beta|` for all later times.

    A coordinate marked in ``trapped`` (:func:`trapped`: every :math:`|w_{lj}|` stays at most
    its present value, below :math:`e`) never catches up with a leader whose smallest layer is
    above :math:`e`, whatever the rates: it needs no comparison solution. Without this, a
    minor coordinate that escapes while a major one is held at 0 by sliding (ℓ∞-SAM, even
    :math:`L`, where rounding leaves :math:`|w|\approx10^{-14}` instead of 0) is never
    settled at :math:`L=2`, where the major coordinate's comparison solution
    :math:`u_je^{\mu_j\tau}` overtakes any slower one.

    ``decoupled`` (exact ℓ∞-SAM, :func:`decouples`; ``bound`` is then ρ) adds an exact
    comparison for *balanced* coordinates (every layer equal, :math:`w_{lj}=w_j\ge0`). Each
    follows its own scalar equation :math:`\dot w_j=\mu_jg(w_j)`,
    :math:`g(w)=(w-\rho)^{L-1}` (:math:`L\ge2`, docs/theory.md §11), so
    :math:`w_j(\tau)=W(w_j(0),\mu_j\tau)` with one flow :math:`W` of :math:`\dot x=g(x)`.
    For a leader with :math:`w_k>\rho`, :math:`W` increases in both arguments above ρ, so a
    balanced :math:`j` with :math:`\rho<w_j\le w_k` and :math:`\mu_j\le\mu_k` stays at
    :math:`w_j(\tau)\le w_k(\tau)`; one with :math:`|w_j|\le\rho` stays there (ρ is an
    equilibrium of :math:`g`; below it the weight shrinks at even :math:`L` and creeps up at
    odd :math:`L`, where :math:`g\ge0`). Either way :math:`j` never overtakes :math:`k`.
    This settles a uniform start :math:`\alpha>\rho` at :math:`\tau=0` (the major
    coordinate leads from :math:`0^+` on),
    which the comparison with GD above certifies only once :math:`w_k-\rho\ge w_j`:
    :math:`\tau\sim1/(2\mu\varepsilon^2)` from :math:`\alpha=\rho(1+\varepsilon)` at
    :math:`L=4`, where the coordinates differ by less than float64 resolves and the rounding
    of :math:`\arg\max|\beta|` reads false switches.

    Arguments:
        theta: state, shape ``(L, d)`` (the depth :math:`L` is read from it, static);
        mu: the example, shape ``(d,)``; bound: :func:`perturbation_bound` of the method;
        trapped: optional boolean mask, shape ``(d,)`` (default: none trapped);
        decoupled: the comparison above (static; default False).
    """
    theta, mu, bound, trapped = _check_certificate(theta, mu, bound, trapped)
    return certify(theta, mu, bound, trapped, decoupled)


def certify(theta, mu, bound, trapped=None, decoupled: bool = False):
    """:func:`certificate` of validated arrays, unchecked (the run layers' every pass), of each
    state ``theta`` (..., L, d) with its ``bound`` (...): traceable, and eager NumPy on NumPy
    arrays (:mod:`analysis._xp`)."""
    xp = namespace(theta, mu, bound, trapped)
    theta, mu, bound = xp.asarray(theta), xp.asarray(mu), xp.asarray(bound)[..., None]
    depth = theta.shape[-2]
    a = xp.min(theta, axis=-2)
    b = xp.max(xp.abs(theta), axis=-2)
    size = log_size(theta)
    top = size == xp.max(size, axis=-1, keepdims=True)
    leader = xp.argmax(xp.where(top, mu, -xp.inf), axis=-1)
    others = xp.arange(mu.shape[-1]) != leader[..., None]
    a_k, mu_k = at(xp, a, leader)[..., None], mu[leader][..., None]
    if depth == 1:
        ok = (a_k >= b) & (mu_k >= mu)
        return xp.ones(leader.shape, bool), leader, xp.all(ok | ~others, axis=-1)
    nonneg = xp.all(theta >= 0, axis=-2)
    u = b if depth % 2 == 0 else xp.maximum(b, bound)
    u = xp.where(nonneg, u, b + bound)  # a negative layer: only |ŵ| <= |w| + e is known
    lower = a_k - bound
    escaped = xp.any(a > bound, axis=-1)
    if depth == 2:
        later = (mu_k >= mu) | (u == 0)
    else:
        later = mu_k * lower ** (depth - 2) >= mu * u ** (depth - 2)
    ok = (lower >= u) & later
    if trapped is not None:  # bounded by b_j < e < a_leader for all later times
        ok = ok | xp.asarray(trapped)
    if decoupled:  # exact ℓ∞-SAM: balanced coordinates compared on one scalar flow
        balanced = a == b  # every layer equal and >= 0
        behind = (b <= bound) | ((a <= a_k) & (mu <= mu_k))
        balanced_k = at(xp, balanced, leader)[..., None]
        ok = ok | (balanced & balanced_k & (a_k > bound) & behind)
    settled = (lower[..., 0] > 0) & xp.all(ok | ~others, axis=-1)
    return escaped, leader, settled


def trapped(method, theta):
    r"""Coordinates that can never grow again: exact ℓ∞-SAM at even :math:`L`, every layer
    :math:`|w_{lj}|<\rho`. Traceable; a boolean mask of shape ``(d,)``.

    For exact ℓ∞-SAM the coordinates decouple (the sign of
    :math:`\partial m/\partial w_{lj}=\mu_j\prod_{l'\ne l}w_{l'j}` involves coordinate
    :math:`j` only): :math:`\dot w_{lj}=\mu_j\prod_{l'\ne l}\hat w_{l'j}` with
    :math:`\hat w_{l'j}=w_{l'j}-\rho\,\sigma_{l'}`,
    :math:`\sigma_{l'}=\mathrm{sign}\prod_{l''\ne l'}w_{l''j}`. Where every
    :math:`0<|w_{l'j}|<\rho`, :math:`\mathrm{sign}\,\hat w_{l'}=-\sigma_{l'}` and, with
    :math:`P=\prod_lw_{lj}`,
    :math:`\prod_{l'\ne l}\sigma_{l'}=\mathrm{sign}(P)^L\,\mathrm{sign}(w_{lj})`, so

    .. math::
        \mathrm{sign}\,\dot w_{lj}=(-1)^{L-1}\mathrm{sign}(P)^L\,\mathrm{sign}(w_{lj})
        =-\mathrm{sign}(w_{lj})\qquad(L\text{ even}):

    every layer shrinks in magnitude, for balanced and unbalanced layers alike. On the
    switching surfaces (a layer at 0) the Filippov velocity is a convex combination of these
    fields, whose nonzero layers all shrink too, so :math:`\max_l|w_{lj}|` never increases:
    the box :math:`\max_l|w_{lj}|<\rho` is invariant (claim C2's "dies" side). At odd
    :math:`L` the sign is that of :math:`P`, and a positive coordinate creeps up instead
    (:func:`never_escapes`). All False for every other method (their perturbation shrinks with
    the gradient) and for the smoothed sign (``delta``). :math:`L` is ``theta.shape[0]``.
    """
    if theta.shape[-2] % 2 or not decouples(method):
        return np.zeros(theta.shape[-1], bool)
    xp = namespace(theta, method.rho)
    return xp.max(xp.abs(theta), axis=-2) < xp.asarray(method.rho)[..., None]


def time_scale(theta, mu, bound):
    r""":math:`s^{2-L}/\min\mu`, :math:`s=\max(\max|w_{lj}|,e)`: the field's own time unit
    (:math:`L` is ``theta.shape[0]``)."""
    xp = namespace(theta, mu, bound)
    s = xp.maximum(xp.max(xp.abs(theta), axis=(-2, -1)), bound)
    return s ** (2 - theta.shape[-2]) / xp.min(xp.asarray(mu))


def keeps_invariant_order(method, theta0, theta, mu):
    r"""False when ``theta`` breaks an order the exact flow keeps: a precision alarm (traceable).

    For GD, ℓ2-SAM and LE-SAM from a balanced start the perturbation is
    :math:`\varepsilon_j=-c\,\mu_jw_j^{L-1}` with one scalar :math:`c\ge0` for all
    coordinates, so every :math:`q_j=\mu_jw_j^{L-2}` obeys the same scalar ODE
    :math:`\dot q=(L-2)q^2(1-cq)^{L-1}` (docs/theory.md §10, with :math:`c=\rho/N` for ℓ2-SAM) and
    the order of the :math:`q_j` never changes (:math:`L\ge3`). Near the degenerate saddle,
    where all :math:`q_j` are equal, a float64 state can lose that order; a leader certified
    from such a state is not to be trusted.

    Exact ℓ∞-SAM (:func:`decouples`) from a balanced start, :math:`L\ge2`: each coordinate
    follows one scalar flow, :math:`w_j(\tau)=W(\alpha_j,\mu_j\tau)` with :math:`W`
    increasing in both arguments above ρ (:func:`certificate`), so of two coordinates with
    :math:`\alpha_j,\alpha_k>\rho`, :math:`\alpha_j\le\alpha_k` and :math:`\mu_j\le\mu_k`
    (one of them strict), :math:`w_j<w_k` at every :math:`\tau>0`. From
    :math:`\alpha=\rho(1+\varepsilon)` the coordinates differ by
    :math:`O(\mu\tau\varepsilon^{L-1})`, below float64's resolution for a long time
    (:math:`\varepsilon=2\cdot10^{-7}`, :math:`L\ge5`): their :math:`|\beta_j|` tie, and
    argmax read index 0 as a switch (the order is one of :math:`\tau>0`: the start itself, where
    tied :math:`\alpha_j` are not yet apart, is not asked it; :func:`analysis._run.conclude`).
    True for every other method and depth. :math:`L` is ``theta0.shape[0]`` (``theta`` has the
    same shape).
    """
    rho = (method.rho,) if decouples(method) else ()  # read below: a traced ρ is JAX
    xp = namespace(theta0, theta, mu, *rho)
    theta0, theta, mu = xp.asarray(theta0), xp.asarray(theta), xp.asarray(mu)
    depth = theta0.shape[-2]
    pairs = (-2, -1)
    if decouples(method) and depth >= 2:
        a0, a = theta0[..., 0, :], xp.min(theta, axis=-2)
        rho = xp.asarray(method.rho)[..., None]
        grow = (a0 > rho)[..., :, None] & (a0 > rho)[..., None, :]
        weak = (a0[..., :, None] <= a0[..., None, :]) & (mu[:, None] <= mu[None, :])
        strict = (a0[..., :, None] < a0[..., None, :]) | (mu[:, None] < mu[None, :])
        behind = grow & weak & strict  # j (row) strictly behind k (column) for all τ > 0
        balanced = xp.all(theta0 == theta0[..., :1, :], axis=pairs)
        return ~balanced | xp.all(~behind | (a[..., :, None] < a[..., None, :]), axis=pairs)
    if not q_order_applies(method, depth):
        return xp.ones(theta.shape[:-2], bool)
    q0 = mu * xp.min(theta0, axis=-2) ** (depth - 2)
    q = mu * xp.min(theta, axis=-2) ** (depth - 2)
    before = q0[..., :, None] < q0[..., None, :]
    return xp.all(~before | (q[..., :, None] < q[..., None, :]), axis=pairs)


def q_order_applies(method, depth: int) -> bool:
    r"""Whether the :math:`q`-order of :func:`keeps_invariant_order` constrains a balanced run of
    ``method`` at ``depth``: GD, ℓ2-SAM and LE-SAM at :math:`L\ge3` (exact ℓ∞-SAM has its own
    order, smoothed ℓ∞-SAM none)."""
    return depth >= 3 and not isinstance(method, flows.LinfSAM)


def invariant_leader(method, theta0, mu):
    r"""The limit leader that the :math:`q`-order theorem proves, or -1 where it does not apply.

    For GD, ℓ2-SAM and LE-SAM at :math:`L\ge3` from a balanced start the :math:`q_j` keep their
    order (:func:`keeps_invariant_order`) and, on an escape, the largest one blows up first
    while the others stay finite (docs/theory.md §10), so :math:`j^\dagger` ends on
    :math:`\arg\max_j\mu_j\alpha_j^{L-2}` (unique). This decides the limit where the float64
    state cannot (near the degenerate saddle the coordinates agree to below double precision).
    Exact ℓ∞-SAM from a balanced start at :math:`L\ge2` (:func:`keeps_invariant_order`):
    the first coordinate to blow up, :math:`\arg\max_{\alpha_j>\rho}\mu_j(\alpha_j-\rho)^{L-2}`
    (:func:`limit_index`; at :math:`L=2` the largest rate among them). Traceable; :math:`L` is
    ``theta0.shape[0]``.
    """
    rho = (method.rho,) if decouples(method) else ()  # limit_index reads it: a traced ρ is JAX
    xp = namespace(theta0, mu, *rho)
    theta0 = xp.asarray(theta0)
    depth = theta0.shape[-2]
    applies = decouples(method) if isinstance(method, flows.LinfSAM) else depth >= 3
    if depth < 2 or not applies:
        return xp.full(theta0.shape[:-2], -1)
    balanced = xp.all(theta0 == theta0[..., :1, :], axis=(-2, -1))
    return xp.where(balanced, limit_index(method, mu, theta0[..., 0, :], depth), -1)


def never_escapes(method, theta):
    r"""True when no coordinate can ever escape: exact ℓ∞-SAM at odd :math:`L\ge3` below ρ.

    ℓ∞-SAM's balanced coordinates decouple, :math:`\dot w_j=\mu_j(w_j-\rho)^{L-1}` for
    :math:`w_j>0` (docs/theory.md §11), and :math:`w_j=\rho` is an equilibrium of each: from
    :math:`0\le w_j<\rho` every weight stays below ρ. At odd :math:`L` the field is
    :math:`\ge0`, so it does not fall to 0 either: the run is *stalled* (bounded, the loss does
    not vanish). False for every other method and depth (traceable; :math:`L` is
    ``theta.shape[0]``).
    """
    depth = theta.shape[-2]
    if depth < 3 or depth % 2 == 0 or not decouples(method):
        return np.zeros(theta.shape[:-2], bool)
    xp = namespace(theta, method.rho)
    rho = xp.asarray(method.rho)[..., None, None]
    return xp.all(theta >= 0, axis=(-2, -1)) & xp.all(theta < rho, axis=(-2, -1))
