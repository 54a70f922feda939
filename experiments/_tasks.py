"""The two CNN tasks as :class:`experiments._cnn.Task` arrays (float32, shape ``(n, 1, 8, 8)``).

* ``patches``: binary planted-patch images (:func:`experiments._data.planted_patches`, noise
  ``NOISE``);
  minor pixels = the weak patch, major = the strong one; "only minor" test images have the
  major patch's signal removed (noise kept), and the other way round.
* ``digits``: the ten digits; minor pixels = low intensity (:math:`x<` ``LOW``, background
  included), major = high intensity (:math:`x\\ge` ``LOW``); "only minor" keeps the pixels
  below ``LOW`` (the others set to 0), "only major" those at or above it.
"""

import jax.numpy as jnp
import numpy as np

from ._cnn import DTYPE, Task
from ._data import load_digits, planted_patches, split

LOW = 0.5  # digits: pixel intensity below which a pixel counts as minor (low-intensity)
# planted patches: noise level σ. With amplitudes 1 (major) and 0.3 (minor) on 2×2 patches the
# Bayes accuracy is Φ(2) = 0.977 from the major patch alone, Φ(0.6) = 0.726 from the minor one.
NOISE = 1.0


def _images(a):
    return jnp.asarray(np.asarray(a)[:, None, :, :], DTYPE)


def _labels(a):
    return jnp.asarray(a, jnp.int32)


def patches_task(n_train: int, n_test: int, n_attr: int, seed: int = 0) -> Task:
    """Planted patches: ``n_train`` training and ``n_test`` test images (the first ``n_attr``
    test images are also the attribution images)."""
    if not 1 <= n_attr <= n_test:
        raise ValueError(f"`n_attr` must lie in 1..n_test = {n_test}; got {n_attr!r}.")
    train = planted_patches(n_train, noise=NOISE, seed=seed)
    test = planted_patches(n_test, noise=NOISE, seed=seed + 1)
    masks = lambda m: jnp.broadcast_to(jnp.asarray(m), (n_attr, *m.shape))  # noqa: E731
    return Task(
        X=_images(train.images),
        y=_labels(train.labels),
        test_X=_images(test.images),
        test_y=_labels(test.labels),
        only_minor=_images(test.images - test.major_signal),
        only_major=_images(test.images - test.minor_signal),
        attr_X=_images(test.images[:n_attr]),
        attr_y=_labels(test.labels[:n_attr]),
        minor=masks(test.minor_mask),
        major=masks(test.major_mask),
        classes=2,
    )


def digits_task(n_attr: int, test_fraction: float = 1 / 3, seed: int = 0, n_train=None) -> Task:
    """All ten digits, split into train and test (``test_fraction``); the first ``n_attr`` test
    images are the attribution images. ``n_train`` keeps only the first training images."""
    images, labels = load_digits()
    train, test = split(len(labels), test_fraction, seed)
    if n_train is not None:
        train = train[:n_train]
    if not 1 <= n_attr <= len(test):
        raise ValueError(f"`n_attr` must lie in 1..{len(test)}; got {n_attr!r}.")
    tx = images[test]
    return Task(
        X=_images(images[train]),
        y=_labels(labels[train]),
        test_X=_images(tx),
        test_y=_labels(labels[test]),
        only_minor=_images(np.where(tx < LOW, tx, 0.0)),
        only_major=_images(np.where(tx >= LOW, tx, 0.0)),
        attr_X=_images(tx[:n_attr]),
        attr_y=_labels(labels[test][:n_attr]),
        minor=jnp.asarray(tx[:n_attr] < LOW),
        major=jnp.asarray(tx[:n_attr] >= LOW),
        classes=10,
    )
