r"""The tie rule of the dominant index :math:`j^\dagger=\arg\max_j|\beta_j|` along a run.

Two values of :math:`\log|\beta|` closer than ``TIE_ULPS`` ulps of
:math:`\max(1,|\log|\beta_{\rm lead}||)` are tied: the leader changes only where another index
exceeds it by more than :func:`tie_margin`. Near a tie (the uniform start, where the gaps grow
from 0 as :math:`\lambda^{L-2}\tau` on the scale twin :math:`\lambda`) rounding alone would read
switches back and forth; a genuine change exceeds the margin within a few samples and is then
located at the crossing itself, so the margin moves no switch time (docs/theory.md §13). The
numba engine (:func:`flows._engine._overtaker`) and :func:`analysis.switch_times` read it here.
"""

import numpy as np

#: Two values of log|β| closer than this many ulps of their size are tied (rounding).
TIE_ULPS = 64
#: Points of each accepted step at which the compiled runs read j† (the default of
#: :func:`analysis.switch_times`' ``samples_per_step``).
SAMPLES_PER_STEP = 4


def tie_margin(log_lead):
    r"""The margin by which :math:`\log|\beta_j|` must exceed the leader's
    :math:`\log|\beta_{\rm lead}|` to take over: ``TIE_ULPS`` ulps of
    :math:`\max(1,|\log|\beta_{\rm lead}||)`."""
    return TIE_ULPS * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(log_lead))
