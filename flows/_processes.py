"""Independent jobs side by side, one spawned process each, configured as this process is.

The command lines (``python -m figures``, ``python -m analysis check``) are lists of
independent jobs, most of them single-threaded (a JAX program, a scipy reference, one
trajectory). :func:`side_by_side` runs such a list on the machine's cores.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing

from ._config import configuration, configure
from ._cores import usable_cores
from ._validate import check_int


def default_jobs(n_calls: int) -> int:
    """One process per usable core, at most one per call (and at least one)."""
    return max(1, min(usable_cores(), n_calls))


def check_jobs(jobs) -> int | None:
    """``jobs`` of a command that runs :func:`side_by_side`: None (its default) or an integer
    >= 1, else a ``ValueError`` naming ``jobs``."""
    return None if jobs is None else check_int("jobs", jobs, minimum=1)


def side_by_side(calls, jobs: int) -> list:
    """``[fn(*args) for fn, args in calls]``, computed in ``jobs`` processes.

    The calls are handed out in their order, each to the next free process, so put the
    longest first. The processes are spawned, not forked (JAX's threads do not survive a
    fork), and each applies :func:`flows.configure` as this process applied it
    (:func:`flows._config.configuration`) before its first call, so that it computes the
    same numbers, bit for bit. ``fn`` must be importable (a module-level function) and
    ``args`` picklable. An exception in a call is raised here, after the calls before it
    in the list have been collected. With ``jobs == 1`` the calls run in this process.
    """
    calls = list(calls)
    if jobs == 1 or len(calls) <= 1:
        return [fn(*args) for fn, args in calls]
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        min(jobs, len(calls)), mp_context=spawn, initializer=_configure, initargs=(configuration(),)
    ) as pool:
        futures = [pool.submit(fn, *args) for fn, args in calls]
        return [f.result() for f in futures]


def _configure(settings: dict) -> None:
    configure(**settings)
