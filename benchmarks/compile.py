"""Workload 2 (issue 6): compile time per configuration, and the persistent compilation cache.

    python benchmarks/compile.py

Runs the same child process twice with one fresh JAX persistent compilation cache
folder (and EQX_ON_ERROR=nan: JAX does not cache executables that contain host
callbacks, which is what equinox's runtime checks are otherwise). Each child
times ``jit(vmap(point)).lower(...).compile()`` for several configurations
(method × depth × solver, the sweep chunk of workload 1, and the discrete
``flows.iterate`` loop), split into tracing + lowering (Python, never cached)
and the XLA compilation (which the persistent cache replaces by a load). The
first child compiles (cold, writes the cache); the second finds every executable
in the cache (warm). Target: at most
10 s per configuration, cold.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(cache_dir):
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, HERE)
    import common

    import flows

    data = common.DATA
    batch = 1024

    def solve_config(method_fn, depth, solver):
        def point(alpha, p):
            traj = flows.solve(
                method_fn(p),
                data,
                flows.balanced_init(alpha, depth, common.MU.size),
                t1=common.T1,
                ts=jnp.asarray(common.TS),
                rescaled=True,
                solver=solver,
            )
            return traj.status, traj.t_end, traj.beta

        return jax.jit(jax.vmap(point)), (np.full(batch, 0.1), np.full(batch, 0.3))

    configs = {
        "workload-1 chunk (l2sam L=2 tsit5, point())": (
            jax.jit(jax.vmap(common.point)),
            (np.full(batch, 0.1), np.full(batch, 0.3)),
        ),
        "gd L=2 tsit5": solve_config(lambda p: flows.GD(), 2, "tsit5"),
        "l2sam L=3 tsit5": solve_config(flows.L2SAM, 3, "tsit5"),
        "lesam L=2 tsit5": solve_config(lambda p: flows.LESAM(p, 0.3), 2, "tsit5"),
        "l2sam L=2 kvaerno5": solve_config(flows.L2SAM, 2, "kvaerno5"),
    }
    # Exact ℓ∞-SAM, plain flow, d = 3: the Filippov segment loop (issue 11 target:
    # < 10 s cold), one solve (its sweeps vmap the same trace).
    linf_data = flows.single_example([1.0, 2.0, 3.0])

    def linf_point(alpha):
        traj = flows.solve(
            flows.LinfSAM(0.5), linf_data, flows.balanced_init(alpha, 2, 3), t1=10.0,
            collapse_tol=None,
        )  # fmt: skip
        return traj.status, traj.theta_end

    configs["linf L=2 d=3 plain Filippov, one solve"] = (
        jax.jit(linf_point),
        (jnp.array([0.3, 0.5, 0.7]),),
    )
    x = jnp.asarray(np.random.default_rng(0).normal(size=(20, 100)))
    it_data = flows.Dataset(x * jnp.sign(x[:, :1]), jnp.ones(20))
    configs["iterate l2sam L=2 d=100 (workload 3)"] = (
        jax.jit(
            lambda th: (
                flows.iterate(
                    flows.L2SAM(0.05), it_data, th, lr=0.01, steps=1_000_000, every=1000
                ).thetas
            )
        ),
        (jnp.full((2, 100), 0.1),),
    )
    out = {}
    for name, (fn, args) in configs.items():
        t0, c0 = time.perf_counter(), time.process_time()
        lowered = fn.lower(*args)  # trace + lower to StableHLO (Python; never cached)
        t1 = time.perf_counter()
        lowered.compile()  # XLA compile, or a load from the persistent cache
        t2, c2 = time.perf_counter(), time.process_time()
        out[name] = dict(trace_s=t1 - t0, xla_s=t2 - t1, total_s=t2 - t0, cpu_s=c2 - c0)
    print(json.dumps(out))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    sys.path.insert(0, HERE)
    import common

    common.header("workload 2: compile time per configuration, persistent cache across processes")
    cache = tempfile.mkdtemp(prefix="samflows-jax-cache-")
    runs = []
    for label in ("cold (1st process)", "warm (2nd process)"):
        t0 = time.perf_counter()
        # JAX never writes executables with host callbacks to the persistent cache,
        # and equinox's error_if (flows' checks on traced values, diffrax's) is a
        # host callback unless EQX_ON_ERROR=nan; so the cached runs set it.
        env = {**os.environ, "EQX_ON_ERROR": "nan"}
        proc = subprocess.run(
            [sys.executable, __file__, "--child", cache], capture_output=True, text=True, env=env
        )
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        runs.append(
            (label, json.loads(proc.stdout.strip().splitlines()[-1]), time.perf_counter() - t0)
        )
    files = sum(len(f) for _, _, f in os.walk(cache))
    print(f"   persistent cache: {cache} ({files} files after both runs)")
    print(
        f"   {'configuration':46s} {'cold: trace+lower  xla  total (cpu)':>38s}"
        f" | {'warm: trace+lower  xla  total':>30s}  target <= 10 s"
    )
    record = {}
    for name in runs[0][1]:
        cold, warm = runs[0][1][name], runs[1][1][name]
        verdict = "met" if cold["total_s"] <= 10 else "MISSED"
        print(
            f"   {name:46s} {cold['trace_s']:12.1f} {cold['xla_s']:6.1f} {cold['total_s']:6.1f}"
            f" ({cold['cpu_s']:5.1f}) | {warm['trace_s']:12.1f} {warm['xla_s']:6.1f}"
            f" {warm['total_s']:6.1f}  {verdict}"
        )
        record[name] = {"cold": cold, "warm": warm}
    for label, _, wall in runs:
        print(f"   {label}: whole process {wall:.1f} s")
    record["process_wall_s"] = [w for _, _, w in runs]
    common.save("compile", record)


if __name__ == "__main__":
    main()
