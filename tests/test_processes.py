"""flows._processes: calls side by side in spawned processes give this process's numbers."""

import os

import numpy as np
import pytest

import flows
from flows.internal import default_jobs, side_by_side


def _solve_at(rho, depth):
    """A solve whose last bits depend on the XLA settings (an adaptive ℓ2-SAM run, L ≥ 3)."""
    traj = flows.solve(
        flows.L2SAM(rho),
        flows.single_example([1.0, 2.0, 3.0]),
        flows.balanced_init(0.3, depth, 3),
        t1=0.5,
        rescaled=True,
    )
    return os.getpid(), np.asarray(traj.thetas[-1]), int(traj.n_steps)


def _fails(text):
    raise ValueError(text)


def test_calls_in_other_processes_give_this_processs_numbers():
    calls = [(_solve_at, (0.2, 3)), (_solve_at, (0.5, 4)), (_solve_at, (0.1, 5))]
    there = side_by_side(calls, 2)
    here = [fn(*args) for fn, args in calls]
    assert {pid for pid, *_ in there} - {os.getpid()} == {pid for pid, *_ in there}
    assert len({pid for pid, *_ in there}) == 2  # two processes
    for (_, theta, steps), (_, want, want_steps) in zip(there, here, strict=True):
        np.testing.assert_array_equal(theta, want)  # bit for bit
        assert steps == want_steps


def test_one_job_runs_here_and_an_error_is_raised_here():
    assert side_by_side([(os.getpid, ())], 1) == [os.getpid()]
    with pytest.raises(ValueError, match="second"):
        side_by_side([(os.getpid, ()), (_fails, ("second",))], 2)


def test_default_jobs_is_one_per_core_at_most_one_per_call():
    cores = len(os.sched_getaffinity(0))
    assert default_jobs(1) == 1 and default_jobs(0) == 1
    assert default_jobs(10_000) == cores
