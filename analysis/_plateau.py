r"""Loss plateaus along a trajectory (docs/theory.md §16).

The margin grows with whichever coordinate escapes, often a minor one, so the loss can fall
while :math:`j^\dagger` is still minor; a plateau appears where a run lingers near a saddle,
e.g. just above :math:`\alpha_c`. Numerically, the plateau is the longest stretch of
saved times :math:`[t_s,t_e]` over which the loss stays within a relative band,

.. math::
    \max_{t_s\le t_k\le t_e}\mathcal L(t_k)\ \le\ (1+b)\min_{t_s\le t_k\le t_e}\mathcal L(t_k),

with height the time average of :math:`\mathcal L` over it (trapezoid rule).
Start and end are as fine as the saving grid.
"""

from typing import NamedTuple

import numpy as np

import flows

from ._inputs import check_trajectory


class Plateau(NamedTuple):
    """Result of :func:`loss_plateau`."""

    start: float
    end: float
    height: float

    @property
    def duration(self) -> float:
        """``end - start``."""
        return self.end - self.start


def loss_plateau(traj: flows.Trajectory, *, band: float = 0.05) -> Plateau:
    r"""Longest stretch :math:`[t_s,t_e]` with :math:`\max\mathcal L\le(1+b)\min\mathcal L` on it.

    Two pointers over the reached saved times find the longest interval (in time)
    whose loss values are positive and stay within the relative band ``band``; the
    first one wins a tie.
    Its height is the time-averaged loss over it (the value itself if it is a point).

    Arguments:
        traj: a :class:`flows.Trajectory` (a fine, equispaced saving grid is best).
        band: relative band :math:`b>0`.

    Returns:
        :class:`Plateau` ``(start, end, height)`` (``duration`` = end - start).

    >>> import flows, analysis
    >>> traj = flows.solve(flows.GD(), flows.single_example([1.0]), flows.balanced_init(
    ...     0.1, 1, 1), t1=10.0, ts=[0.0, 1.0, 2.0, 3.0])  # loss decreases steadily
    >>> analysis.loss_plateau(traj, band=1e-6).duration
    0.0
    """
    traj = check_trajectory(traj)
    if isinstance(band, bool) or not isinstance(band, (int, float)) or not band > 0:
        raise ValueError(f"`band` must be a number > 0; got {band!r}.")
    ok = np.asarray(traj.reached) & np.isfinite(np.asarray(traj.loss))
    t, loss = np.asarray(traj.ts)[ok], np.asarray(traj.loss)[ok]
    if not np.any(loss > 0):
        raise ValueError("`traj` has no reached saved time with a finite, positive loss.")
    best, lo = (0, 0), 0
    for hi in range(t.size):
        if not loss[hi] > 0:  # an underflowed loss (0) is the end of training, not a plateau
            lo = hi + 1
            continue
        while np.max(loss[lo : hi + 1]) > (1 + band) * np.min(loss[lo : hi + 1]):
            lo += 1
        if t[hi] - t[lo] > t[best[1]] - t[best[0]]:
            best = (lo, hi)
    i, j = best
    height = (
        float(loss[i])
        if j == i
        else float(np.trapezoid(loss[i : j + 1], t[i : j + 1]) / (t[j] - t[i]))
    )
    return Plateau(float(t[i]), float(t[j]), height)
