"""Continuous- and discrete-time dynamics of GD and SAM variants on diagonal linear networks.

Importing :mod:`flows` enables JAX's x64 mode (everything is float64) and changes no other
global setting; :func:`flows.configure` applies the XLA flags, compilation cache and the rest
that the command lines use (call it right after the import).
"""

from . import _config as _config  # enables float64 before anything else is traced
from ._config import configure as configure
from ._dynamics import rescaled_velocity as rescaled_velocity
from ._dynamics import velocity as velocity
from ._iterate import iterate as iterate
from ._many import solve_many as solve_many
from ._methods import GD as GD
from ._methods import L2SAM as L2SAM
from ._methods import LESAM as LESAM
from ._methods import USAM as USAM
from ._methods import AbstractMethod as AbstractMethod
from ._methods import LinfSAM as LinfSAM
from ._methods import OneSAM as OneSAM
from ._options import DIFFRAX_SOLVERS as DIFFRAX_SOLVERS
from ._options import SCIPY_SOLVERS as SCIPY_SOLVERS
from ._options import SolverOptions as SolverOptions
from ._problem import Dataset as Dataset
from ._problem import balanced_init as balanced_init
from ._problem import beta as beta
from ._problem import log_speed as log_speed
from ._problem import loss_derivative as loss_derivative
from ._problem import loss_fn as loss_fn
from ._problem import margins as margins
from ._problem import objective as objective
from ._problem import predictions as predictions
from ._problem import product_init as product_init
from ._problem import single_example as single_example
from ._solve import solve as solve
from ._sweep import SweepOptions as SweepOptions
from ._sweep import SweepResult as SweepResult
from ._sweep import load_sweep as load_sweep
from ._sweep import sweep as sweep
from ._trajectory import DenseOutput as DenseOutput
from ._trajectory import Status as Status
from ._trajectory import Trajectory as Trajectory
