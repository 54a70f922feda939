r"""Experiments beyond the single example: do the theory's predictions hold on real data?

``python -m experiments [--quick] [--out DIR] [--docs DIR]`` runs everything:

* diagonal linear networks (:math:`L=1..4`, :mod:`flows`) on scikit-learn's 8×8 digits,
  one digit against another, pixels as features: the share of :math:`|\beta|` on
  low-intensity pixels, the dominant pixel, and the max-margin directions over training;
* small CNNs (JAX + equinox) on planted minor/major patches and on the digits, with SGD,
  ℓ2-SAM, ℓ∞-SAM and LE-SAM: Grad-CAM and saliency shares on the minor feature, accuracy
  with only one feature kept, and Hessian trace / top eigenvalue at equal training loss.

Results go to netCDF (xarray), figures (5.5 in, PDF + PNG) and a results page with a
verdict per claim. The pieces are public: :func:`gradcam`, :func:`saliency`,
:func:`hutchinson_trace`, :func:`top_eigenvalue`, :func:`sam_step`, :func:`binary_digits`.
"""

from . import _stats as _stats
from ._attribution import gradcam as gradcam
from ._attribution import minor_share as minor_share
from ._attribution import saliency as saliency
from ._cnn import CNN as CNN
from ._cnn import conv3x3 as conv3x3
from ._cnn import cross_entropy as cross_entropy
from ._cnn import perturbation as perturbation
from ._cnn import sam_step as sam_step
from ._data import binary_digits as binary_digits
from ._data import load_digits as load_digits
from ._data import planted_patches as planted_patches
from ._hessian import hutchinson_trace as hutchinson_trace
from ._hessian import hvp as hvp
from ._hessian import top_eigenvalue as top_eigenvalue
from ._run import run as run
