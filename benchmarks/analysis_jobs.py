"""The jobs users run (the analysis on its default driver, the numba engine), each beside the
straightforward per-trajectory loop measured in the same run, as ratios.

    python benchmarks/analysis_jobs.py               # P2 and P3, the jobs of benchmarks/README.md
    python benchmarks/analysis_jobs.py --regression  # before changing a default: the 64 x 64
                                                     # diagram and critical_alpha at L = 8 against
                                                     # the ratios recorded in regression.json
    python benchmarks/analysis_jobs.py --record      # the same, recording the ratios
    python benchmarks/analysis_jobs.py --only L=8    # the jobs whose names contain "L=8"

Baseline: ``benchmarks/engine.py:user_loop``, the loop a user could write for rescaled ℓ2-SAM at
L = 2 (Dopri5, I controller, closed-form field), on its 65,536 points, one thread: its wall and
CPU seconds are the unit of every ratio, so that a slower or busier machine moves the jobs and
the unit together. Each job runs in a fresh process with warm disk caches (numba's and JAX's,
after one untimed run), as a user's second run would; the process's wall and CPU seconds are
reported with the load average. ``--regression`` exits 1 if a job's ratio exceeds its recorded
ratio by more than 30 % (the spread of repeated runs on a shared machine is ~10 %).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
RECORD = os.path.join(HERE, "regression.json")
CRITICAL = (
    "import flows, analysis; flows.configure(); "
    "print(analysis.critical_alpha(flows.L2SAM(1.0), [1, 2, 3, 4, 5], depth={depth}))"
)
JOBS = {
    "P2 phase L=2 256x256": ["-m", "figures", "phase", "--method", "l2sam", "--depth", "2",
                             "--alpha", "1e-3:10:256", "--rho", "0.01:1:256"],
    "P2 phase L=4 128x128": ["-m", "figures", "phase", "--method", "l2sam", "--depth", "4",
                             "--alpha", "1e-3:10:128", "--rho", "0.01:1:128"],
    "P2 phase L=8 64x64": ["-m", "figures", "phase", "--method", "l2sam", "--depth", "8",
                           "--alpha", "1e-3:10:64", "--rho", "0.01:1:64"],
    "P3 analysis check": ["-m", "analysis", "check"],
    "P3 figures": ["-m", "figures"],
    "P3 critical_alpha L=8": ["-c", CRITICAL.format(depth=8)],
}
REGRESSION = {
    "phase L=2 64x64": ["-m", "figures", "phase", "--method", "l2sam", "--depth", "2",
                        "--alpha", "1e-3:10:64", "--rho", "0.01:1:64"],
    "critical_alpha L=8": ["-c", CRITICAL.format(depth=8)],
}  # fmt: skip


def baseline(n=65536):
    """(wall, CPU) seconds of the user loop's n serial solves (after compiling it)."""
    import engine

    alpha, rho = engine.points(n)
    engine.user_loop(alpha[:64], rho[:64])
    c, w = time.process_time(), time.perf_counter()
    engine.user_loop(alpha, rho)
    return time.perf_counter() - w, time.process_time() - c


def job(args, out):
    """(wall, CPU) seconds of ``python ARGS`` in a fresh process, in a new folder under ``out``
    (a figure command writes there: no result is read from an earlier run's cache)."""
    folder = tempfile.mkdtemp(dir=out)
    if args[:2] == ["-m", "figures"]:
        args = [*args, "--out", folder, "--quiet"]
        if args[2] != "phase":
            args += ["--cache", os.path.join(folder, "cache")]
    before = os.times()
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    if run.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{run.stderr[-2000:]}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--regression", action="store_true")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "jobs"))
    ap.add_argument("--only", default="", help="run the jobs whose names contain one of these "
                    "comma-separated words (e.g. 'L=2,check')")  # fmt: skip
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    jobs = REGRESSION if (a.regression or a.record) else JOBS
    if a.only:
        words = [w.strip() for w in a.only.split(",") if w.strip()]
        jobs = {k: v for k, v in jobs.items() if any(w in k for w in words)}
        if not jobs:
            ap.error(f"--only {a.only!r} matches no job of {sorted(JOBS)}")
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    base_wall, base_cpu = baseline()
    print(f"baseline user loop, 65,536 serial solves: {base_wall:.1f} s wall, {base_cpu:.1f} s CPU")
    print(f"{'job':<24} {'wall s':>8} {'CPU s':>8} {'wall / loop':>12} {'load':>6}")
    ratios = {}
    for name, args in jobs.items():
        job(args, a.out)  # warm the disk caches
        wall, cpu = job(args, a.out)
        ratios[name] = wall / base_wall
        print(f"{name:<24} {wall:8.1f} {cpu:8.1f} {ratios[name]:12.2f} {os.getloadavg()[0]:6.2f}")
    if a.record:
        with open(RECORD, "w") as fh:
            json.dump(ratios, fh, indent=1)
        print(f"recorded {RECORD}")
    if a.regression:
        with open(RECORD) as fh:
            recorded = json.load(fh)
        slower = {k: v / recorded[k] for k, v in ratios.items() if v > 1.3 * recorded[k]}
        for k, v in ratios.items():
            print(f"{k}: {v:.2f} against {recorded[k]:.2f} recorded")
        if slower:
            print(f"REGRESSION: {', '.join(f'{k} x{v:.2f}' for k, v in slower.items())}")
            return 1
        print("no regression")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
