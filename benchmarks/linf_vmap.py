"""Exact ℓ∞-SAM (Filippov) throughput: a boundary-search batch and single solves, before/after.

Run: ``python benchmarks/linf_vmap.py [--baseline REV]`` (CPU, a few minutes).

Workloads, all rescaled, L = 2, d = 4, μ = (1, 2, 3, 4), ρ = 0.1, tolerances of
``analysis.critical_alpha`` (rtol 1e-11, atol 1e-30), to t1 = 1e3 or escape (1e3 ‖θ₀‖):

* ``batch``: 17 solves vmapped, α = 0.1·2^(k + 1/π), k = -8..8 (the batch that
  ``analysis.critical_alpha(flows.LinfSAM(...))`` and ℓ∞ phase diagrams run): the small α
  collapse after 3 switches, sliding most of the time; the large α escape after one segment;
* ``no sliding``: one solve, α = 0.1247 (escapes, 272 steps, never slides);
* ``sliding``: one solve, α = 0.0623 (three coordinates die, then the run collapses).

Prints the median over REPEATS (after a compile run) of wall and process CPU seconds. With
``--baseline REV`` the package ``flows`` of git revision REV is loaded alongside
(as ``flows_baseline``, from ``git archive``) and every workload runs on both, in one
process, repeats interleaved, with the ratios; the answers (status, steps, t_end) are
compared. The batch is also checked against the same solves one by one.
"""

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

import flows

flows.configure()
MU = [1.0, 2.0, 3.0, 4.0]
ALPHAS = 0.1 * 2.0 ** (np.linspace(-8, 8, 17) + 1 / np.pi)
NO_SLIDING, SLIDING = 8, 7  # indices into ALPHAS
T1 = 1e3
REPEATS = 5


def workloads(pkg):
    """The three compiled workloads on the package ``pkg`` (flows, or a baseline of it)."""
    data = pkg.single_example(MU)

    def one(alpha):
        tr = pkg.solve(
            pkg.LinfSAM(0.1), data, pkg.balanced_init(alpha, 2, 4), t1=T1, rescaled=True,
            rtol=1e-11, atol=1e-30, escape_tol=1e3, max_steps=16384,
        )  # fmt: skip
        return tr.status, tr.n_steps, tr.t_end

    single = jax.jit(one)
    return {
        "batch": (jax.jit(jax.vmap(one)), np.asarray(ALPHAS)),
        "no sliding": (single, np.asarray(ALPHAS[NO_SLIDING])),
        "sliding": (single, np.asarray(ALPHAS[SLIDING])),
    }, single


def load_baseline(rev):
    """``flows`` at git revision ``rev``, imported as the package ``flows_baseline``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="flows_baseline_")
    archive = subprocess.run(
        ["git", "archive", rev, "flows"], cwd=root, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    os.rename(os.path.join(tmp, "flows"), os.path.join(tmp, "flows_baseline"))
    sys.path.insert(0, tmp)
    return importlib.import_module("flows_baseline")


def run_once(fn, arg):
    w, c = time.perf_counter(), time.process_time()
    out = jax.block_until_ready(fn(arg))
    return time.perf_counter() - w, time.process_time() - c, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="git revision to compare with (e.g. main, a71e826)")
    args = parser.parse_args()
    versions = {"now": workloads(flows)}
    if args.baseline:
        versions[f"baseline {args.baseline}"] = workloads(load_baseline(args.baseline))
    names = list(versions)
    times = {(v, w): ([], []) for v in names for w in versions[names[0]][0]}
    answers = {}
    for w in versions[names[0]][0]:
        for v in names:  # compile and first run
            fn, arg = versions[v][0][w]
            wall, _, answers[v, w] = run_once(fn, arg)
            print(f"{w:>10} | {v}: compile + first run {wall:.1f} s", flush=True)
        for _ in range(REPEATS):  # interleaved repeats
            for v in names:
                fn, arg = versions[v][0][w]
                wall, cpu, _ = run_once(fn, arg)
                times[v, w][0].append(wall)
                times[v, w][1].append(cpu)
    print(f"\n## medians of {REPEATS} runs after compile: wall ms (process CPU ms)")
    print(f"{'workload':>10} | " + " | ".join(f"{v:>26}" for v in names) + " | ratio wall (CPU)")
    for w in versions[names[0]][0]:
        med = [[statistics.median(x) * 1e3 for x in times[v, w]] for v in names]
        cells = " | ".join(f"{m[0]:>14.1f} ({m[1]:>8.1f})" for m in med)
        ratio = ""
        if len(names) > 1:
            ratio = f" | {med[1][0] / med[0][0]:.1f}x ({med[1][1] / med[0][1]:.1f}x)"
        steps = [np.asarray(answers[v, w][1]).sum() for v in names]
        print(f"{w:>10} | {cells}{ratio}   steps {steps}")
    for w in versions[names[0]][0]:
        status, steps, t_end = (np.asarray(x) for x in answers[names[0], w])
        print(f"\n## {w} (now): status {np.atleast_1d(status).tolist()}, steps "
              f"{np.atleast_1d(steps).tolist()}")  # fmt: skip
        for v in names[1:]:
            b_status, b_steps, b_t_end = (np.asarray(x) for x in answers[v, w])
            rel = np.max(np.abs(t_end - b_t_end) / np.abs(b_t_end))
            print(f"   {v}: same status {np.array_equal(status, b_status)}, same steps "
                  f"{np.array_equal(steps, b_steps)} (baseline {np.atleast_1d(b_steps).tolist()}),"
                  f" t_end max rel. diff {rel:.1e}")  # fmt: skip
    single = versions[names[0]][1]
    status, steps, t_end = answers[names[0], "batch"]
    rows = [jax.block_until_ready(single(a)) for a in np.asarray(ALPHAS)]
    same = all(
        int(s) == int(status[i]) and int(n) == int(steps[i]) and float(t) == float(t_end[i])
        for i, (s, n, t) in enumerate(rows)
    )
    print(f"\n## the batch equals the solves one by one (status, steps, t_end): {same}")


if __name__ == "__main__":
    main()
