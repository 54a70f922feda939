"""Shared plumbing for the packages built on :mod:`flows` (:mod:`analysis`, :mod:`figures`,
:mod:`experiments`): not part of the user API.

These are the validators, the unchecked integrator, the configuration, store and provenance
helpers that those packages call, in one clearly internal home (the convention of
``equinox.internal``), so that no package imports another's private modules. A user of the
library needs none of them; their signatures may change with the packages that use them.

* Validators (each raises a ``ValueError`` naming the argument): :func:`as_array`,
  :func:`check_data`, :func:`check_finite`, :func:`check_int`, :func:`check_loss`,
  :func:`check_method`, :func:`check_scalar`, :func:`check_theta`, :func:`real_number`,
  :func:`with_overrides`, :func:`check_dense_size`; :class:`WrongTypeError`; :func:`is_traced`.
* :func:`integrate`: the run of :func:`flows.solve` from validated inputs, unchecked;
  :func:`checked_solver_options`: :class:`flows.SolverOptions` from validated values, unchecked.
* :func:`unit_and_norm`: ``(g/‖g‖, ‖g‖)`` with the norm scaled by ``max|g|`` (the norm of
  the collapse and escape events).
* :func:`enable_compilation_cache`: JAX's persistent compilation cache in a folder;
  :func:`cacheable_checks`: equinox's runtime checks traced as NaN, so that a program with
  them can be cached there.
* :func:`side_by_side`: independent calls in spawned processes configured as this one
  (:func:`default_jobs` of them: one per core; :func:`check_jobs` checks a given number).
* The store's files: :func:`save_npz`, :func:`read_npz`, :func:`save_json`,
  :func:`file_sha256` and :data:`READ_ERRORS` (what a damaged file raises on reading).
* Provenance: :func:`digest` (SHA-256 of a value, as a sweep's cache key describes it) and
  :func:`source_digest` (SHA-256 of a package's Python sources).
"""

from ._config import cacheable_checks, enable_compilation_cache
from ._methods import _unit as unit_and_norm
from ._methods import check_method
from ._numba import engine_run, engine_supports, engine_velocity
from ._options import checked_solver_options
from ._problem import check_data, check_loss, check_theta
from ._processes import check_jobs, default_jobs, side_by_side
from ._solve import check_dense_size, integrate
from ._sweep._key import digest, source_digest
from ._sweep._store import _READ_ERRORS as READ_ERRORS
from ._sweep._store import _read_npz as read_npz
from ._sweep._store import _save_json as save_json
from ._sweep._store import _save_npz as save_npz
from ._sweep._store import _sha256 as file_sha256
from ._tracking import SAMPLES_PER_STEP, TIE_ULPS, tie_margin
from ._validate import (
    WrongTypeError,
    as_array,
    check_finite,
    check_int,
    check_scalar,
    is_traced,
    real_number,
    with_overrides,
)

__all__ = [
    "READ_ERRORS",
    "SAMPLES_PER_STEP",
    "TIE_ULPS",
    "WrongTypeError",
    "as_array",
    "cacheable_checks",
    "check_data",
    "check_dense_size",
    "check_finite",
    "check_int",
    "check_loss",
    "check_method",
    "check_scalar",
    "check_theta",
    "check_jobs",
    "checked_solver_options",
    "default_jobs",
    "digest",
    "enable_compilation_cache",
    "engine_run",
    "engine_supports",
    "engine_velocity",
    "file_sha256",
    "integrate",
    "is_traced",
    "read_npz",
    "real_number",
    "save_json",
    "save_npz",
    "side_by_side",
    "source_digest",
    "tie_margin",
    "unit_and_norm",
    "with_overrides",
]
