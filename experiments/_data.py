r"""Data sets of the experiments: scikit-learn's bundled 8×8 digits and planted-patch images.

Both are generated on the machine (the digits ship inside scikit-learn, nothing is
downloaded) and are deterministic given their seeds.

*Digits.* 1,797 grey images of 8×8 pixels with values 0..16, scaled here to
:math:`[0, 1]`. The binary task is one digit (:math:`y=+1`) against another
(:math:`y=-1`); the multi-class task keeps all ten.

*Pixel intensity.* For the diagonal networks a pixel :math:`j` is a feature and its
intensity is :math:`\mu_j=\frac1n\sum_i x_{ij}` over the training images, the analogue of
the single-example :math:`\mu_j` of the theory: pixels with small :math:`\mu_j` are the
**minor** (low-intensity) features, those with large :math:`\mu_j` the **major** ones.

*Planted patches.* Images :math:`x=s\,(a_{\rm major}P_{\rm major}+a_{\rm minor}P_{\rm minor})
+\sigma\xi` with :math:`s=2y-1`, :math:`y\in\{0,1\}`, two disjoint square patches
:math:`P` (indicator images) and white noise :math:`\xi`. Both patches predict the label
perfectly; the minor one is weaker (:math:`a_{\rm minor}<a_{\rm major}`).
"""

from typing import NamedTuple

import numpy as np

SIZE = 8  # image side, pixels


def _check_digit(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 9:
        raise ValueError(f"`{name}` must be an integer digit 0..9; got {value!r}.")
    return int(value)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 digits: images ``(1797, 8, 8)`` float64 in ``[0, 1]`` and labels ``(1797,)`` int.

    From :func:`sklearn.datasets.load_digits` (bundled with scikit-learn, no download);
    pixel values 0..16 are divided by 16.
    """
    from sklearn.datasets import load_digits as sk_load_digits

    bunch = sk_load_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    return images, np.asarray(bunch.target, dtype=np.int64)


def binary_digits(positive: int = 3, negative: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Digit ``positive`` (label +1) against digit ``negative`` (label -1).

    Returns:
        ``X`` of shape ``(n, 64)`` (flattened pixels in ``[0, 1]``, float64) and ``y`` of
        shape ``(n,)`` with values ±1.0, in the order of scikit-learn's data set.

    Raises:
        ValueError: a digit outside 0..9, or the two digits equal.
    """
    positive = _check_digit("positive", positive)
    negative = _check_digit("negative", negative)
    if positive == negative:
        raise ValueError(f"`negative` must differ from `positive`; both are {positive}.")
    images, labels = load_digits()
    keep = (labels == positive) | (labels == negative)
    X = images[keep].reshape(-1, SIZE * SIZE)
    y = np.where(labels[keep] == positive, 1.0, -1.0)
    return X, y


def split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic random split of ``range(n)`` into (train, test) index arrays."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must lie in (0, 1); got {test_fraction!r}.")
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, int(round(test_fraction * n)))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


class Patches(NamedTuple):
    """Planted-patch images: ``images`` ``(n, 8, 8)``, ``labels`` ``(n,)`` in {0, 1}, the two
    patch masks ``(8, 8)`` (bool) and the noise-free signal of each patch ``(n, 8, 8)``."""

    images: np.ndarray
    labels: np.ndarray
    major_mask: np.ndarray
    minor_mask: np.ndarray
    major_signal: np.ndarray
    minor_signal: np.ndarray


def patch_masks(width: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The major patch (top-left corner, offset 1) and the minor one (bottom-right, offset 1)."""
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or not 1 <= width <= 3:
        raise ValueError(f"`width` must be an integer 1..3; got {width!r}.")
    major = np.zeros((SIZE, SIZE), bool)
    minor = np.zeros((SIZE, SIZE), bool)
    major[1 : 1 + width, 1 : 1 + width] = True
    minor[SIZE - 1 - width : SIZE - 1, SIZE - 1 - width : SIZE - 1] = True
    return major, minor


def planted_patches(
    n: int, *, major: float = 1.0, minor: float = 0.3, noise: float = 0.5, seed: int = 0
) -> Patches:
    r"""``n`` images :math:`s(a_{\rm major}P_{\rm major}+a_{\rm minor}P_{\rm minor})+\sigma\xi`.

    Labels are balanced Bernoulli draws; :math:`\xi` is standard normal per pixel.

    Raises:
        ValueError: ``n < 2``, a negative amplitude or noise, or ``minor > major``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"`n` must be an integer >= 2; got {n!r}.")
    for name, value in (("major", major), ("minor", minor), ("noise", noise)):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"`{name}` must be a finite number >= 0; got {value!r}.")
    if minor > major:
        raise ValueError(f"`minor` ({minor}) must not exceed `major` ({major}).")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    sign = (2.0 * labels - 1.0)[:, None, None]
    major_mask, minor_mask = patch_masks()
    major_signal = sign * major * major_mask
    minor_signal = sign * minor * minor_mask
    images = major_signal + minor_signal + noise * rng.standard_normal((n, SIZE, SIZE))
    return Patches(images, labels, major_mask, minor_mask, major_signal, minor_signal)
