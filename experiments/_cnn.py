r"""Small CNNs trained with SGD, ℓ2-SAM, ℓ∞-SAM and LE-SAM, in JAX + equinox, float32.

*Network.* :math:`x\in\mathbb R^{1\times8\times8}\mapsto` conv 3×3 (``width`` channels,
"same" padding) → ReLU → conv 3×3 → ReLU :math:`=A(x)\in\mathbb R^{K\times8\times8}` →
linear map of the flattened :math:`A` → class scores (a head on the whole map, not a global
average pool: with pooling the 8×8 digits lose where the strokes are, and train slowly).
The last feature maps keep the input grid, so Grad-CAM needs no upsampling
(:mod:`experiments._attribution`).

*Precision.* Training and measurements here run in **float32**, on purpose and
explicitly (every array is cast): the claims tested are about which pixels a network
attends to and how flat its minimum is, relative between methods, at losses of
order 1e-3 to 1e-1; float32's 1e-7 relative rounding is far below the seed-to-seed
spread those comparisons are judged against, and float32 halves the bytes every step
moves on the 2-core budget. (:mod:`flows` enables JAX's x64 mode, so float64 stays the
default elsewhere; the curvature estimators work in the dtype they are given, and
their tests run in float64.)

*Updates.* One rule for all methods, on the minibatch loss :math:`\mathcal L_B`:
:math:`g=\nabla\mathcal L_B(\theta)`,
:math:`\theta\leftarrow\theta-\eta\nabla\mathcal L_B(\theta+\varepsilon)`, with

=========  ===============================================================================
SGD        :math:`\varepsilon=0`
ℓ2-SAM     :math:`\varepsilon=\rho\,g/\lVert g\rVert_2` (norm over all parameters)
ℓ∞-SAM     :math:`\varepsilon=\rho\,\mathrm{sign}(g)` elementwise
LE-SAM     :math:`\varepsilon=\rho_t\,g/\lVert g\rVert_2`,
           :math:`\rho_t=\min(\sigma_t/(\lVert g\rVert_2+\varrho),\rho_{\max})`,
           :math:`\sigma_t=\sigma_0\,\tfrac12(1+\cos(\pi t/T))` (cosine annealing to 0)
=========  ===============================================================================

(the ℓ2 step is the one of ``optax.contrib.sam`` with ``optax.sgd``; the tests check it).
SGD computes the second gradient too (at :math:`\varepsilon=0`), so that every method
runs through one compiled program; the method is data (:class:`Method`), not code.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import flows  # noqa: F401  (importing flows enables float64: dtypes stay explicit)

from ._attribution import gradcam, minor_share, saliency
from ._data import SIZE

DTYPE = jnp.float32
SGD, L2, LINF, LESAM = 0, 1, 2, 3
KINDS = {"SGD": SGD, "l2": L2, "linf": LINF, "lesam": LESAM}


class Method(NamedTuple):
    """One training rule as numbers: ``kind`` (SGD=0, ℓ2=1, ℓ∞=2, LE-SAM=3), the radius
    ``rho`` (ρ_max for LE-SAM) and the initial loss budget ``sigma`` (LE-SAM only)."""

    kind: int
    rho: float = 0.0
    sigma: float = 0.0


def conv3x3(x, weight, bias):
    r"""3×3 convolution with zero "same" padding.

    ``x`` ``(C, H, W)``, ``weight`` ``(O, C, 3, 3)``, ``bias`` ``(O,)`` → ``(O, H, W)``:
    :math:`y_{o,i,j}=b_o+\sum_{c,a,b}w_{o,c,a,b}\,x_{c,i+a-1,j+b-1}`.

    Written as nine shifted copies and one contraction (a matrix product): XLA:CPU runs
    small and batched (vmapped) convolutions far slower than this."""
    _, H, W = x.shape
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1)))
    shifts = jnp.stack([padded[:, a : a + H, b : b + W] for a in range(3) for b in range(3)])
    return (
        jnp.einsum("ock,kchw->ohw", weight.reshape(*weight.shape[:2], 9), shifts)
        + bias[:, None, None]
    )


def _uniform(key, shape, fan_in, scale):
    bound = scale / np.sqrt(fan_in)
    return jax.random.uniform(key, shape, DTYPE, -bound, bound)


class CNN(eqx.Module):
    """Two 3×3 convolutions with ReLU and a linear head on the flattened maps (float32).

    Weights and biases start uniform in :math:`\\pm s/\\sqrt{\text{fan-in}}` (PyTorch's and
    equinox's default with :math:`s=1`), :math:`s` = ``init_scale``."""

    w1: jax.Array
    b1: jax.Array
    w2: jax.Array
    b2: jax.Array
    w3: jax.Array
    b3: jax.Array

    def __init__(self, key, classes: int, width: int = 8, init_scale: float = 1.0):
        if isinstance(classes, bool) or not isinstance(classes, int) or classes < 2:
            raise ValueError(f"`classes` must be an integer >= 2; got {classes!r}.")
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"`width` must be an integer >= 1; got {width!r}.")
        k = jax.random.split(key, 6)
        self.w1 = _uniform(k[0], (width, 1, 3, 3), 9, init_scale)
        self.b1 = _uniform(k[1], (width,), 9, init_scale)
        self.w2 = _uniform(k[2], (width, width, 3, 3), 9 * width, init_scale)
        self.b2 = _uniform(k[3], (width,), 9 * width, init_scale)
        self.w3 = _uniform(k[4], (classes, width, SIZE, SIZE), width * SIZE**2, init_scale)
        self.b3 = _uniform(k[5], (classes,), width * SIZE**2, init_scale)

    def features(self, x):
        """Last feature maps ``A``, ``(width, 8, 8)``, of one image ``x``, ``(1, 8, 8)``."""
        return jax.nn.relu(conv3x3(jax.nn.relu(conv3x3(x, self.w1, self.b1)), self.w2, self.b2))

    def classify(self, A):
        """Class scores from feature maps: a linear map of all of ``A`` (flattened)."""
        return jnp.tensordot(self.w3, A, axes=3) + self.b3

    def __call__(self, x):
        return self.classify(self.features(x))


def cross_entropy(model, X, y):
    """Mean cross-entropy of ``model`` on images ``X`` ``(n, 1, 8, 8)``, labels ``y`` ``(n,)``."""
    logits = jax.vmap(model)(X)
    return jnp.mean(
        jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0]
    )


def accuracy(model, X, y):
    """Share of ``X`` classified as ``y``."""
    return jnp.mean(jnp.argmax(jax.vmap(model)(X), axis=1) == y)


def _global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf * leaf) for leaf in jax.tree.leaves(tree)))


def perturbation(grads, kind, rho, sigma_t, eps=1e-12):
    r"""The perturbation :math:`\varepsilon` of the rule ``kind`` and the radius used.

    Returns ``(epsilon, radius)``; ``radius`` is :math:`\rho_t` for LE-SAM and ``rho``
    otherwise (0 for SGD). ``kind``, ``rho`` and ``sigma_t`` may be traced.
    """
    norm = _global_norm(grads)
    safe = jnp.where(norm > 0, norm, 1.0)
    radius = jnp.where(kind == LESAM, jnp.minimum(sigma_t / (norm + eps), rho), rho)
    radius = jnp.where(kind == SGD, 0.0, radius)

    def leaf(g):
        l2 = radius * g / safe
        linf = rho * jnp.sign(g)
        return jnp.where(kind == LINF, linf, jnp.where((kind == L2) | (kind == LESAM), l2, 0.0))

    return jax.tree.map(leaf, grads), radius


def sam_step(loss, params, lr, kind, rho, sigma_t=0.0):
    r"""One update :math:`\theta-\eta\nabla\mathcal L(\theta+\varepsilon)`.

    Returns ``(params, radius)``.

    ``loss`` maps a parameter pytree to a scalar (the minibatch is closed over).
    """
    grads = jax.grad(loss)(params)
    eps, radius = perturbation(grads, kind, rho, sigma_t)
    g_hat = jax.grad(loss)(jax.tree.map(jnp.add, params, eps))
    return jax.tree.map(lambda p, g: p - lr * g, params, g_hat), radius


def cosine(t, total):
    """Cosine annealing :math:`\\tfrac12(1+\\cos(\\pi t/T))`: 1 at 0, 0 at ``total`` and after."""
    return 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(t / total, 1.0)))


class Task(NamedTuple):
    """Arrays of one training task (all float32 images ``(n, 1, 8, 8)``, int labels).

    ``attr_X``/``attr_y``: images whose attributions are measured; ``minor``/``major``:
    their boolean pixel masks ``(n_attr, 8, 8)``; ``only_minor``/``only_major``: the test
    images with only the minor (major) feature kept."""

    X: jax.Array
    y: jax.Array
    test_X: jax.Array
    test_y: jax.Array
    only_minor: jax.Array
    only_major: jax.Array
    attr_X: jax.Array
    attr_y: jax.Array
    minor: jax.Array
    major: jax.Array
    classes: int


class Schedule(NamedTuple):
    """Training length: ``steps`` updates of batch ``batch`` at rate ``lr``, measured every
    ``every`` steps; CNN ``width`` and ``init_scale``; ``n_maps`` attribution maps kept per
    checkpoint."""

    steps: int
    every: int
    batch: int
    lr: float
    width: int = 8
    init_scale: float = 1.0
    n_maps: int = 2


def _measure(model, task: Task, n_maps: int):
    def cam(x, c):
        return gradcam(model.features, model.classify, x, c)

    cams = jax.vmap(cam)(task.attr_X, task.attr_y)
    sals = jax.vmap(lambda x, c: saliency(model, x, c))(task.attr_X, task.attr_y)
    return {
        "train_loss": cross_entropy(model, task.X, task.y),
        "test_acc": accuracy(model, task.test_X, task.test_y),
        "acc_only_minor": accuracy(model, task.only_minor, task.test_y),
        "acc_only_major": accuracy(model, task.only_major, task.test_y),
        "cam_minor_share": jnp.nanmean(minor_share(cams, task.minor, task.major)),
        "sal_minor_share": jnp.nanmean(minor_share(sals, task.minor, task.major)),
        "cam_maps": cams[:n_maps],
        "sal_maps": sals[:n_maps],
    }


def train(params, batch_key, static, task: Task, schedule: Schedule, kind, rho, sigma):
    r"""Train one CNN from ``params``; returns (records over checkpoints, params at each).

    Records (leading axis: checkpoints 0, every, ..., steps) are those of ``_measure`` plus
    ``radius``, the mean radius over the steps before each checkpoint (0 at step 0), and
    ``capped``, the share of those steps on which LE-SAM's cap binds (:math:`\rho_t=\rho_{\max}`,
    i.e. :math:`\sigma_t/(\lVert g\rVert_2+\varrho)\ge\rho_{\max}`; 0 for the other rules).
    Minibatches are drawn with replacement from ``batch_key``.
    """
    n = task.X.shape[0]

    def step(k, carry):
        params, total, capped = carry
        idx = jax.random.randint(jax.random.fold_in(batch_key, k), (schedule.batch,), 0, n)
        X, y = task.X[idx], task.y[idx]

        def loss(p):
            return cross_entropy(eqx.combine(p, static), X, y)

        sigma_t = sigma * cosine(k.astype(DTYPE), schedule.steps)
        params, radius = sam_step(loss, params, schedule.lr, kind, rho, sigma_t)
        binds = (kind == LESAM) & (radius >= rho)  # min(σ_t/(‖g‖+ϱ), ρ_max) returned ρ_max
        return params, total + radius, capped + binds.astype(DTYPE)

    def chunk(params, c):
        # checkpoint 0 measures the start: no steps before it (one measuring program)
        first = (c - 1) * schedule.every
        last = jnp.where(c == 0, first, first + schedule.every)
        zero = jnp.zeros((), DTYPE)
        params, total, capped = jax.lax.fori_loop(first, last, step, (params, zero, zero))
        rec = _measure(eqx.combine(params, static), task, schedule.n_maps)
        rec["radius"] = total / schedule.every
        rec["capped"] = capped / schedule.every
        return params, (rec, params)

    _, (recs, kept) = jax.lax.scan(chunk, params, jnp.arange(schedule.steps // schedule.every + 1))
    return recs, kept


def init_params(seeds, classes: int, schedule: Schedule):
    """Start parameters for each seed, stacked on a leading axis, and the static model part.

    Drawn outside any ``jit``: drawn inside, the initialisers would be compiled."""
    models = [
        CNN(jax.random.PRNGKey(int(s)), classes, schedule.width, schedule.init_scale) for s in seeds
    ]
    parts = [eqx.partition(m, eqx.is_array) for m in models]
    params = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[p for p, _ in parts])
    return params, parts[0][1]


def sgd_grad_norms(seed, task: Task, schedule: Schedule) -> np.ndarray:
    r"""The minibatch gradient norms :math:`\lVert g_k\rVert_2`, :math:`k=0..T-1`, of an SGD
    run of ``schedule`` from ``seed``'s start and batches (those of :func:`train_seeds`)."""
    params, static = init_params((seed,), task.classes, schedule)
    key = jax.random.fold_in(jax.random.PRNGKey(int(seed)), 1)
    return np.asarray(_grad_norms(jax.tree.map(lambda x: x[0], params), key, static, task,
                                  schedule), np.float64)  # fmt: skip


@eqx.filter_jit
def _grad_norms(params, batch_key, static, task, schedule):
    n = task.X.shape[0]

    def step(params, k):
        idx = jax.random.randint(jax.random.fold_in(batch_key, k), (schedule.batch,), 0, n)
        g = jax.grad(lambda p: cross_entropy(eqx.combine(p, static), task.X[idx], task.y[idx]))(
            params
        )
        return jax.tree.map(lambda p, gi: p - schedule.lr * gi, params, g), _global_norm(g)

    return jax.lax.scan(step, params, jnp.arange(schedule.steps))[1]


def pilot_sigma(norms, rho_max: float, quantile: float) -> float:
    r"""LE-SAM's :math:`\sigma_0` from a pilot run's gradient norms ``norms`` (steps
    :math:`k=0..T-1`): :math:`\sigma_0=\rho_{\max}\,q\big(\lVert g_k\rVert/c_k\big)`, the
    ``quantile`` :math:`q` of the norms over the cosine factor :math:`c_k` (:func:`cosine`).

    The cap binds at step :math:`k` when :math:`\sigma_0c_k/\lVert g_k\rVert\ge\rho_{\max}`,
    i.e. when :math:`\lVert g_k\rVert/c_k\le\sigma_0/\rho_{\max}`: on the pilot's own
    steps, on a share ``quantile`` of them."""
    if not 0 < quantile < 1:
        raise ValueError(f"`quantile` must lie in (0, 1); got {quantile!r}.")
    norms = np.asarray(norms, np.float64)
    c = np.asarray(cosine(np.arange(norms.size, dtype=np.float64), norms.size))
    return float(rho_max * np.quantile(norms / c, quantile))


def calibrate_sigma(seed, task: Task, schedule: Schedule, rho_max: float, share: float,
                    upper: float, halvings: int = 7, span: float = 100.0):  # fmt: skip
    r"""LE-SAM's :math:`\sigma_0` calibrated on a pilot LE-SAM run from ``seed``: the largest
    :math:`\sigma_0` found by bisection in :math:`\log\sigma_0` over
    [``upper``/``span``, ``upper``] (``halvings`` halvings) at which the cap
    :math:`\rho_{\max}` binds on at most a share ``share`` of the pilot's steps (the ``capped``
    record of :func:`train`). Returns ``(sigma0, pilot share at sigma0)``; where even the lower
    end binds more often, that end and its share."""
    if not 0 < share < 1:
        raise ValueError(f"`share` must lie in (0, 1); got {share!r}.")

    def binding(sigma):
        recs, _ = train_seeds((seed,), task, schedule, Method(LESAM, rho_max, sigma))
        return float(np.mean(recs["capped"][0, 1:]))

    lo, hi = np.log(upper / span), np.log(upper)
    top = binding(upper)
    if top <= share:
        return float(upper), top
    best = (float(np.exp(lo)), binding(float(np.exp(lo))))
    if best[1] > share:
        return best
    for _ in range(halvings):
        mid = 0.5 * (lo + hi)
        b = binding(float(np.exp(mid)))
        if b <= share:
            lo, best = mid, (float(np.exp(mid)), b)
        else:
            hi = mid
    return best


def train_seeds(seeds, task: Task, schedule: Schedule, method: Method):
    """:func:`train` for each seed (vmapped); records as numpy, params kept as JAX arrays."""
    if schedule.steps % schedule.every:
        raise ValueError(
            f"`steps` ({schedule.steps}) must be a multiple of `every` ({schedule.every})."
        )
    params, static = init_params(seeds, task.classes, schedule)
    batch_keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(int(s)), 1) for s in seeds])
    recs, kept = _train_many(
        params,
        batch_keys,
        static,
        task,
        schedule,
        jnp.asarray(method.kind),
        jnp.asarray(method.rho, DTYPE),
        jnp.asarray(method.sigma, DTYPE),
    )
    return jax.tree.map(np.asarray, recs), kept


@eqx.filter_jit
def _train_many(params, keys, static, task, schedule, kind, rho, sigma):
    return jax.vmap(lambda p, k: train(p, k, static, task, schedule, kind, rho, sigma))(
        params, keys
    )
