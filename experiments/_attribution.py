r"""Attributions of a convolutional network: Grad-CAM and input-gradient saliency, in JAX.

A network is split as :math:`f(x)=h(A(x))`, with :math:`A(x)\in\mathbb R^{K\times H\times W}`
the feature maps of its last convolution and :math:`h` the head that maps them to the
class scores :math:`f_c`.

*Grad-CAM* (Selvaraju et al., 2017) for class :math:`c`:

.. math::
    \alpha_k=\frac1{HW}\sum_{i,j}\frac{\partial f_c}{\partial A_{kij}},\qquad
    \mathrm{CAM}_{ij}=\max\Big(0,\ \sum_k\alpha_k A_{kij}\Big),

on the :math:`H\times W` grid of :math:`A` (here the input grid: no upsampling).
With a head :math:`h(A)=W\,\mathrm{mean}_{ij}A+b`, :math:`\alpha_k=W_{ck}/(HW)` and
Grad-CAM is the class activation map of Zhou et al. (2016) divided by :math:`HW`.

*Input-gradient saliency*: :math:`S_{ij}=|\partial f_c/\partial x_{ij}|` (summed over
input channels in absolute value). Unlike gradient × input it is not zero on a black
background, so it can show attention to background pixels.

*Minor share* of a non-negative map :math:`M` with two disjoint pixel sets:
:math:`\sum_{\rm minor}M/(\sum_{\rm minor}M+\sum_{\rm major}M)`, NaN where both sums vanish.
"""

import jax
import jax.numpy as jnp

import flows  # noqa: F401  (importing flows enables float64: dtypes stay explicit)


def gradcam(features, head, x, cls):
    r"""Grad-CAM of one input ``x`` for class ``cls``: shape ``(H, W)``, non-negative.

    Arguments:
        features: callable ``x -> A`` with ``A`` of shape ``(K, H, W)``.
        head: callable ``A -> scores`` of shape ``(C,)``.
        x: one input (any shape ``features`` accepts).
        cls: integer class index (may be traced).
    """
    A = features(x)
    if A.ndim != 3:
        raise ValueError(f"`features` must return feature maps of shape (K, H, W); got {A.shape}.")
    dA = jax.grad(lambda a: head(a)[cls])(A)
    weights = jnp.mean(dA, axis=(1, 2))  # α_k
    return jax.nn.relu(jnp.tensordot(weights, A, axes=1))


def saliency(model, x, cls):
    r"""Input-gradient saliency :math:`|\partial f_c/\partial x|` summed over the channel axis 0.

    ``x`` has shape ``(channels, H, W)``; the result has shape ``(H, W)``.
    """
    if x.ndim != 3:
        raise ValueError(f"`x` must have shape (channels, H, W); got {x.shape}.")
    dx = jax.grad(lambda z: model(z)[cls])(x)
    return jnp.sum(jnp.abs(dx), axis=0)


def minor_share(maps, minor, major):
    """Share of each map's mass on ``minor`` against ``major`` pixels: ``(n, H, W) -> (n,)``.

    ``minor`` and ``major`` are boolean masks broadcastable to ``maps`` (per image or one for
    all); ``maps`` are taken in absolute value. NaN where a map is zero on both sets.
    """
    maps = jnp.abs(maps)
    a = jnp.sum(jnp.where(minor, maps, 0.0), axis=(-2, -1))
    b = jnp.sum(jnp.where(major, maps, 0.0), axis=(-2, -1))
    total = a + b
    return jnp.where(total > 0, a / jnp.where(total > 0, total, 1.0), jnp.nan)
