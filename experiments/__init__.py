r"""Experiments beyond the single example: do the theory's predictions hold on real data?

``python -m experiments [--quick] [--out DIR] [--docs DIR]`` runs everything:

* diagonal linear networks (:math:`L=1..4`, :mod:`flows`) on scikit-learn's 8×8 digits,
  one digit against another, pixels as features: the share of :math:`|\beta|` on
  low-intensity pixels, the dominant pixel, and the max-margin directions over training;
* small CNNs (JAX + equinox) on planted minor/major patches and on the digits, with SGD,
  ℓ2-SAM and LE-SAM (and from a small start, SGD and ℓ2-SAM, also trained on the minor
  feature alone): Grad-CAM and saliency shares on the minor feature, accuracy
  with only one feature kept, and Hessian trace / top eigenvalue at equal training loss.

Results go to netCDF (xarray), figures (5.5 in, PDF + PNG) and a results page with a
verdict per claim. The public names below are imported on first use, so that
``python -m experiments --help`` (and a bad flag) answers without loading JAX.
"""

from analysis.internal import lazy_exports

_EXPORTS = {
    "gradcam": "_attribution",
    "minor_share": "_attribution",
    "saliency": "_attribution",
    "CNN": "_cnn",
    "conv3x3": "_cnn",
    "cross_entropy": "_cnn",
    "perturbation": "_cnn",
    "sam_step": "_cnn",
    "binary_digits": "_data",
    "load_digits": "_data",
    "planted_patches": "_data",
    "hutchinson_trace": "_hessian",
    "hvp": "_hessian",
    "top_eigenvalue": "_hessian",
    "run": "_run",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
