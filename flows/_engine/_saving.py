"""What the engine writes of a run: the saved states at the saving times ``ts``, from the
interpolant of the step that covers each, and the run's end (state, status, end time, step
counts), with NaN at the saving times past the end.
"""

import numpy as np

from ._field import _exp
from ._jit import jit
from ._lanes import REJECTED, SAVED, STEPS
from ._tableau import _interpolate


@jit
def _blank(saved, n):
    """Trajectory n's saved states: NaN until written."""
    for k in range(saved.shape[1]):
        for i in range(saved.shape[2]):
            saved[n, k, i] = np.nan


@jit
def _save_steps(saved, n, ts, count, w, solver, t0, t1, y, yi, K, ns, logs, Ld, scale):
    """The saving times in lane w's accepted step [t0, t1] not yet written, from its
    interpolant (``logs``: the state is u = log(θ/``scale``), θ is saved)."""
    T = ts.shape[0]
    while count[SAVED, w] < T and ts[count[SAVED, w]] <= t1:
        k = count[SAVED, w]
        _interpolate(solver, ts[k], t0, t1, y, yi, K, w, ns, saved[n, k])
        if logs:
            _exp(saved[n, k], Ld, scale)
        count[SAVED, w] = k + 1


@jit
def _finish(outputs, n, code, t_end, ts, te, count, w):
    """Trajectory n ended with ``code`` at ``te`` of the integration variable, reported as
    ``t_end`` (its state is written already): its status, end time and step counts, and NaN
    at the saving times past ``te``."""
    saved, yend, status, t_ends, n_steps, n_rejected = outputs
    status[n] = code
    t_ends[n] = t_end
    n_steps[n] = count[STEPS, w]
    n_rejected[n] = count[REJECTED, w]
    for k in range(ts.shape[0]):
        if ts[k] > te:
            for i in range(saved.shape[2]):
                saved[n, k, i] = np.nan
