"""The CPU cores this process may run on: every default count of threads, workers and jobs."""

import os


def usable_cores() -> int:
    """The cores in this process's CPU affinity mask (a batch system's or ``taskset``'s share of
    the machine, not the whole machine: ``os.cpu_count()``), or ``os.cpu_count()`` where the
    platform has no mask."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
