r"""The per-trajectory engine: one compiled adaptive loop per trajectory (numba).

Every trajectory runs its own explicit Runge–Kutta loop, with its own step sizes, accepted
and rejected steps, saving times and stopping event; nothing is shared between trajectories
but the arithmetic units. A thread runs :data:`W` trajectories side by side in the lanes of
one loop, so that each arithmetic instruction of a stage serves :data:`W` of them (SIMD), and
a lane whose trajectory ends takes the next trajectory at once (no lockstep). Threads share
the batch in chunks: the compiled loop releases the GIL, and a thread pool runs one chunk per
thread at a time. The machine code is cached on disk (numba's ``cache=True``): a fresh
process loads it instead of compiling it.

The algorithm is diffrax's, step for step, so that the two backends take the same steps and
agree to rounding (:func:`flows.solve` with ``backend="diffrax"``). The modules, each with
one job:

==================  =========================================================================
``_tableau``        diffrax's Tsit5 and Dopri5: stages, error weights, dense interpolants
``_norms``          norms without under- or overflow
``_vector_field``   the vector field on all lanes (the rules of :mod:`flows._rules`, the
                    losses of :mod:`flows._problem`), and its log form
``_events``         the stopping conditions, their sign at each step, the event's bisection
``_controller``     diffrax's PID step size controller and the error norm
``_leader``         j† along each run (the analysis's pass policy hooks)
``_chunk``          the loop over one chunk of trajectories, :data:`W` lanes at a time
``_run``            :func:`run_many` (threads over chunks) and :func:`fields`
==================  =========================================================================
"""

from .._problem import LOSSES as _ALL_LOSSES
from ._chunk import W
from ._leader import _order_kept as _order_kept
from ._leader import _overtaker as _overtaker
from ._run import fields, run_many
from ._tableau import SOLVERS
from ._vector_field import _broadcast as _broadcast
from ._vector_field import _field as _field
from ._vector_field import _log_field as _log_field
from ._vector_field import _scratch as _scratch

#: The losses that the engine integrates, by name, and their codes (flows._problem.LOSSES).
LOSSES = {name: _ALL_LOSSES[name] for name in ("logistic", "exponential")}

__all__ = ["LOSSES", "SOLVERS", "W", "fields", "run_many"]
