"""Issue 10's speed targets, each measured cold in a fresh process (wall and process CPU time).

* ``python -m analysis check``: target <= 90 s cold on 2 CPU cores;
* ``analysis.critical_alpha(flows.L2SAM(1.0), (1..5), depth=L)`` for L = 2..8: <= 20 s cold each
  (``--method LinfSAM``: exact ℓ∞-SAM instead);
* a 128×128 ``analysis.phase_diagram`` at L = 4 (α, ρ log-spaced): <= 30 s.

Usage: ``python benchmarks/analysis_speed.py [--skip-check] [--skip-phase] [--method LinfSAM]
[--depths 2,4,6,8]``. Each measurement runs in its own interpreter (no warm JIT cache, and
``SAMFLOWS_COMPILATION_CACHE=off``: no persistent compilation cache), so
compile time is included; the printed CPU time is the child's user + system time.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CRITICAL = """
import flows, analysis, time
flows.configure()
t = time.perf_counter()
b = analysis.critical_alpha(flows.{method}(1.0), [1.0, 2.0, 3.0, 4.0, 5.0], depth={depth},
                            full_output=True)
print({{"value": b.value, "exists": b.exists, "solves": b.solves,
        "inner_s": time.perf_counter() - t}})
"""

PHASE = """
import flows, analysis, numpy as np, time
flows.configure()
t = time.perf_counter()
ds = analysis.phase_diagram(flows.L2SAM(1.0), [1.0, 2.0, 3.0, 4.0, 5.0],
                            alpha=np.geomspace(1e-2, 1.0, {n}), rho=np.geomspace(1e-2, 1.0, {n}),
                            depth=4, progress=False)
codes = np.bincount(ds["code"].values.ravel(), minlength=5).tolist()
print({{"codes": codes, "max_passes": int(ds["passes"].max()), "inner_s": time.perf_counter() - t}})
"""


def _child(args):
    """Run a child process; (wall s, child CPU s, its stdout's last line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    env = {**os.environ, "SAMFLOWS_COMPILATION_CACHE": "off"}
    out = subprocess.run(args, capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout.strip().splitlines()[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--depths", default="2,3,4,5,6,7,8")
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--skip-phase", action="store_true")
    parser.add_argument("--method", choices=("L2SAM", "LinfSAM"), default="L2SAM")
    args = parser.parse_args()
    rows = []
    if not args.skip_check:
        wall, cpu, last = _child([sys.executable, "-m", "analysis", "check"])
        rows.append(("python -m analysis check", wall, cpu, 90.0, last))
    for depth in (int(x) for x in args.depths.split(",")):
        code = CRITICAL.format(depth=depth, method=args.method)
        wall, cpu, last = _child([sys.executable, "-c", code])
        rows.append((f"critical_alpha {args.method} L={depth}", wall, cpu, 20.0, last))
    if not args.skip_phase:
        wall, cpu, last = _child([sys.executable, "-c", PHASE.format(n=args.n)])
        rows.append((f"phase_diagram {args.n}x{args.n} L=4", wall, cpu, 30.0, last))
    print(f"{'workload':34s} {'wall s':>8s} {'cpu s':>8s} {'target':>7s}  verdict  result")
    for name, wall, cpu, target, last in rows:
        verdict = "met" if wall <= target else "missed"
        print(f"{name:34s} {wall:8.1f} {cpu:8.1f} {target:7.0f}  {verdict:7s}  {last[:110]}")
    print(json.dumps([dict(name=r[0], wall=r[1], cpu=r[2], target=r[3]) for r in rows]))


if __name__ == "__main__":
    main()
