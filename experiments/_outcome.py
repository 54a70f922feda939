r"""The one rule that turns a measured interval into an outcome, fixed before any run.

A claim predicts the sign :math:`s\in\{+1,-1\}` of a paired difference :math:`D` (method minus
baseline, same seed). Over :math:`n` seeds the 95 % Student-t interval of its mean is
:math:`[\bar D-h,\ \bar D+h]`, :math:`h=t_{0.975,\,n-1}\,\hat s_D/\sqrt n`
(:func:`experiments._stats.mean_ci`). One case's outcome is

* **supported**: the interval lies on the predicted side of 0 (:math:`s\bar D>h`);
* **contradicted**: it lies on the other side (:math:`s\bar D<-h`);
* **inconclusive**: it contains 0 (:math:`|\bar D|\le h`), or it is missing (a mean or
  half-width that is NaN: fewer than two finite values, a level never reached).

A claim made of several cases (depths, tasks, attributions) is *supported* when every case is,
*contradicted* when at least one case is (one counter-example refutes a claim "for every
case"), and *inconclusive* otherwise. Each outcome carries its reason.

*Power.* The interval excludes 0 only when :math:`|\bar D|/\hat s_D>t_{0.975,\,n-1}/\sqrt n`:
with :math:`n` seeds the smallest detectable effect is :func:`min_detectable` :math:`(n)`
standard deviations of the paired difference (1.24 at :math:`n=5`, 0.72 at :math:`n=10`), and
:math:`h` itself is the smallest detectable effect in the measured units.
"""

from typing import NamedTuple

import numpy as np
import scipy.stats

from ._stats import mean_ci

OUTCOMES = ("supported", "contradicted", "inconclusive")
NOT_JUDGED = "not judged"  # the outcome of every claim in a --quick run


class Outcome(NamedTuple):
    """An outcome (one of :data:`OUTCOMES`, or :data:`NOT_JUDGED`) and its reason."""

    label: str
    reason: str


def _check_predicted(predicted):
    if predicted not in (1, -1) or isinstance(predicted, bool):
        raise ValueError(f"`predicted` must be +1 or -1 (the predicted sign); got {predicted!r}.")


def outcome(mean, half, predicted: int, name: str = "the interval") -> Outcome:
    """The outcome of one case from its interval ``mean ± half`` and the ``predicted`` sign
    (+1: above 0, -1: below 0); see the module docstring."""
    _check_predicted(predicted)
    mean, half = float(mean), float(half)
    if not (np.isfinite(mean) and np.isfinite(half)):
        return Outcome("inconclusive", f"{name} is missing (mean {mean:g}, half-width {half:g})")
    if half < 0:
        raise ValueError(f"`half` must be >= 0 (a half-width); got {half!r}.")
    lo, hi = mean - half, mean + half
    side = "above" if predicted > 0 else "below"
    other = "below" if predicted > 0 else "above"
    where = f"{name} [{lo:+.3g}, {hi:+.3g}]"
    if predicted * mean > half:
        return Outcome("supported", f"{where} lies {side} 0, as predicted")
    if predicted * mean < -half:
        return Outcome("contradicted", f"{where} lies {other} 0")
    return Outcome("inconclusive", f"{where} contains 0")


def case(values, predicted: int, name: str = "the interval") -> Outcome:
    """:func:`outcome` of the 95 % t interval of ``values`` (paired differences over seeds;
    NaN values are dropped, as runs that did not reach a level)."""
    m, h = mean_ci(np.asarray(values, dtype=np.float64).ravel())
    return outcome(m, h, predicted, name)


def combine(cases) -> Outcome:
    """A claim's outcome from its cases' outcomes: supported when all are, contradicted when
    any is, inconclusive otherwise (also with no case at all)."""
    cases = list(cases)
    if not cases:
        return Outcome("inconclusive", "no case could be measured")
    labels = [c.label for c in cases]
    if all(label == "supported" for label in labels):
        return Outcome("supported", "every case supported: " + "; ".join(c.reason for c in cases))
    bad = [c.reason for c in cases if c.label == "contradicted"]
    if bad:
        return Outcome("contradicted", "; ".join(bad))
    open_ = [c.reason for c in cases if c.label != "supported"]
    return Outcome("inconclusive", "; ".join(open_))


def min_detectable(n: int, level: float = 0.95) -> float:
    r"""Smallest :math:`|\bar D|/\hat s_D` whose ``level`` t interval over ``n`` values
    excludes 0: :math:`t_{(1+\text{level})/2,\,n-1}/\sqrt n`."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"`n` must be an integer >= 2 (seeds); got {n!r}.")
    return float(scipy.stats.t.ppf(0.5 + level / 2, n - 1) / np.sqrt(n))
