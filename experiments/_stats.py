"""Means and Student-t confidence intervals over seeds."""

import warnings

import numpy as np
import scipy.stats


def mean_ci(values, axis=0, level=0.95):
    r"""Mean over ``axis`` and the half-width of its ``level`` Student-t interval,
    :math:`t_{(1+\text{level})/2,\,n-1}\,s/\sqrt n`
    (NaN values dropped; half-width NaN for n < 2)."""
    v = np.asarray(values, dtype=np.float64)
    n = np.sum(np.isfinite(v), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, as documented
        mean = np.nanmean(v, axis=axis) if v.size else np.nan
        sd = np.nanstd(v, axis=axis, ddof=1) if v.size else np.nan
        half = scipy.stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    return mean, np.where(n >= 2, half, np.nan)


def fmt(values, digits=3):
    """``"mean ± half-width"`` over axis 0 of ``values`` (95 % t interval)."""
    m, h = mean_ci(values)
    return f"{float(m):.{digits}f} ± {float(h):.{digits}f}"
