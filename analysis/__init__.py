"""Measurements and predictions built on :mod:`flows`: dominant index, switch times, regimes and
their boundaries, max-margin limits, and the theorem-check report (``python -m analysis check``)."""

from ._boundary import Boundary as Boundary
from ._boundary import boundary as boundary
from ._boundary import critical_alpha as critical_alpha
from ._boundary import direct_alpha as direct_alpha
from ._bounds import L2SAMThresholds as L2SAMThresholds
from ._bounds import l2sam_thresholds as l2sam_thresholds
from ._certify import certificate as certificate
from ._certify import limit_leader as limit_leader
from ._certify import perturbation_bound as perturbation_bound
from ._clock import Clock as Clock
from ._clock import clock_grid as clock_grid
from ._clock import norm_clock as norm_clock
from ._dominant import Switches as Switches
from ._dominant import dominant_index as dominant_index
from ._dominant import fastest_growing_index as fastest_growing_index
from ._dominant import log_abs_beta as log_abs_beta
from ._dominant import switch_times as switch_times
from ._margin import Rate as Rate
from ._margin import convergence_order as convergence_order
from ._margin import convergence_rate as convergence_rate
from ._margin import direction_cosine as direction_cosine
from ._margin import limit_class as limit_class
from ._margin import limit_direction as limit_direction
from ._margin import max_margin as max_margin
from ._phase import phase_diagram as phase_diagram
from ._plateau import Plateau as Plateau
from ._plateau import loss_plateau as loss_plateau
from ._problem import Problem as Problem
from ._regime import REGIMES as REGIMES
from ._regime import RegimePath as RegimePath
from ._regime import regime as regime
from ._regime import regime_code as regime_code
from ._regime import regime_path as regime_path
from ._sharpness import Sharpness as Sharpness
from ._sharpness import sharpness as sharpness
