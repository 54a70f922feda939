"""The lanes of a chunk: :data:`W` trajectories side by side, and each lane's record.

A thread runs :data:`W` trajectories in the lanes of one loop, so that each arithmetic
instruction of a stage serves :data:`W` of them (SIMD); a lane whose trajectory ends takes the
next one at once. Lane w's state is column w of the chunk's blocks (the state y, the stages
K, ...) and of its record: ``lane`` (float64, one row per quantity below) and ``count``
(int64). A helper that reads or updates a lane takes ``(lane, count, w)``.
"""

import numpy as np

from ._jit import jit

#: Trajectories per thread, side by side in the lanes of one loop.
W = 32

# the rows of ``lane``: the step [T0, T1] being tried, its size H; the run's end END, the
# last time a step may end before it is clipped to END (FLOOR, 100 ulps below), the event's
# bisection width SPAN; the thresholds COLLAPSE, ESCAPE (0: none) relative to the start's
# norm NORM0; the absolute tolerance ATOL; the arc-length floor R0; the log state's scale
# SCALE; the PID controller's factor of the last accepted error FACTOR; the event
# condition's sign at T0, GOING
H, T0, T1, END, FLOOR, SPAN, COLLAPSE, ESCAPE, NORM0, ATOL, R0, SCALE, FACTOR, GOING = range(14)
LANE_ROWS = 14
# the rows of ``count``: the trajectory in the lane (-1: idle), the non-finite rejections in
# a row and stalls (flows._options.FiniteController), the steps and rejected steps, the
# saving times written
TRAJ, RUN, STALLS, STEPS, REJECTED, SAVED = range(6)
COUNT_ROWS = 6


@jit
def _new_lanes(nw):
    """The record of ``nw`` idle lanes: (lane, count)."""
    count = np.zeros((COUNT_ROWS, nw), np.int64)
    count[TRAJ] = -1
    return np.ones((LANE_ROWS, nw)), count
