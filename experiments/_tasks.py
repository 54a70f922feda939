r"""The two CNN tasks as :class:`experiments._cnn.Task` arrays (float32, shape ``(n, 1, 8, 8)``).

* ``patches``: binary planted-patch images (:func:`experiments._data.planted_patches`,
  amplitudes ``MAJOR`` and ``MINOR`` on 2×2 patches, noise ``NOISE``); minor pixels = the weak
  patch, major = the strong one; "only minor" images have the major patch's signal removed
  (noise kept), and the other way round.
* ``digits``: the ten digits; minor pixels = the faint stroke pixels
  :math:`0<x<` ``LOW`` (the black background, :math:`x=0`, belongs to neither set), major = the
  bright ones :math:`x\ge` ``LOW``; "only minor" keeps the pixels below ``LOW`` (the others set
  to 0), "only major" those at or above it.

With ``minor_only=True`` a task *trains* on the minor feature alone: its training images and
its test images are the "only minor" ones (the test of networks trained on minor features).

*Bayes ceilings of the patches.* Two classes :math:`\pm m` in white noise of level
:math:`\sigma` are told apart at best with accuracy :math:`\Phi(\lVert m\rVert/\sigma)`. A 2×2
patch of amplitude :math:`a` has :math:`\lVert m\rVert=2a`: with :math:`a_{\rm major}=0.5`,
:math:`a_{\rm minor}=0.4`, :math:`\sigma=1` the major patch alone allows :math:`\Phi(1)=0.841`,
the minor alone :math:`\Phi(0.8)=0.788`, both :math:`\Phi(2\sqrt{0.41})=\Phi(1.281)=0.900`:
a network that uses only the major patch stays 6 points below the ceiling.
"""

import jax.numpy as jnp
import numpy as np

from ._cnn import DTYPE, Task
from ._data import load_digits, planted_patches, split

LOW = 0.5  # digits: pixel intensity below which a stroke pixel counts as minor (faint)
MAJOR, MINOR, NOISE = 0.5, 0.4, 1.0  # planted patches: amplitudes and noise level σ


def bayes_accuracy(*amplitudes, noise: float = NOISE) -> float:
    r"""Bayes accuracy :math:`\Phi(2\sqrt{\sum a^2}/\sigma)` of 2×2 patches of the given
    ``amplitudes`` in white noise of level ``noise`` (see the module docstring)."""
    import scipy.stats

    return float(scipy.stats.norm.cdf(2 * np.sqrt(np.sum(np.square(amplitudes))) / noise))


def _images(a):
    return jnp.asarray(np.asarray(a)[:, None, :, :], DTYPE)


def _labels(a):
    return jnp.asarray(a, jnp.int32)


def patches_task(n_train: int, n_test: int, n_attr: int, seed: int = 0,
                 minor_only: bool = False) -> Task:  # fmt: skip
    """Planted patches: ``n_train`` training and ``n_test`` test images (the first ``n_attr``
    test images are also the attribution images); ``minor_only``: train and test on the minor
    patch alone."""
    if not 1 <= n_attr <= n_test:
        raise ValueError(f"`n_attr` must lie in 1..n_test = {n_test}; got {n_attr!r}.")
    train = planted_patches(n_train, major=MAJOR, minor=MINOR, noise=NOISE, seed=seed)
    test = planted_patches(n_test, major=MAJOR, minor=MINOR, noise=NOISE, seed=seed + 1)
    masks = lambda m: jnp.broadcast_to(jnp.asarray(m), (n_attr, *m.shape))  # noqa: E731
    only_minor = test.images - test.major_signal
    X = train.images - train.major_signal if minor_only else train.images
    tx = only_minor if minor_only else test.images
    return Task(
        X=_images(X),
        y=_labels(train.labels),
        test_X=_images(tx),
        test_y=_labels(test.labels),
        only_minor=_images(only_minor),
        only_major=_images(test.images - test.minor_signal),
        attr_X=_images(tx[:n_attr]),
        attr_y=_labels(test.labels[:n_attr]),
        minor=masks(test.minor_mask),
        major=masks(test.major_mask),
        classes=2,
    )


def digits_task(n_attr: int, test_fraction: float = 1 / 3, seed: int = 0, n_train=None,
                minor_only: bool = False) -> Task:  # fmt: skip
    """All ten digits, split into train and test (``test_fraction``); the first ``n_attr`` test
    images are the attribution images. ``n_train`` keeps only the first training images;
    ``minor_only``: train and test on the faint pixels alone."""
    images, labels = load_digits()
    train, test = split(len(labels), test_fraction, seed)
    if n_train is not None:
        train = train[:n_train]
    if not 1 <= n_attr <= len(test):
        raise ValueError(f"`n_attr` must lie in 1..{len(test)}; got {n_attr!r}.")
    keep_minor = lambda x: np.where(x < LOW, x, 0.0)  # noqa: E731
    tx, X = images[test], images[train]
    if minor_only:
        tx, X = keep_minor(tx), keep_minor(X)
    return Task(
        X=_images(X),
        y=_labels(labels[train]),
        test_X=_images(tx),
        test_y=_labels(labels[test]),
        only_minor=_images(keep_minor(images[test])),
        only_major=_images(np.where(images[test] >= LOW, images[test], 0.0)),
        attr_X=_images(tx[:n_attr]),
        attr_y=_labels(labels[test][:n_attr]),
        minor=jnp.asarray((images[test][:n_attr] > 0) & (images[test][:n_attr] < LOW)),
        major=jnp.asarray(images[test][:n_attr] >= LOW),
        classes=10,
    )
