"""Cold start: what a fresh process pays before its first result, in four measurements.

    python benchmarks/cold_start.py cache                  # compile time per configuration
    python benchmarks/cold_start.py first-result --repeat 5
    python benchmarks/cold_start.py xla-flags --repeat 3
    python benchmarks/cold_start.py analysis [--skip-check] [--skip-phase] [--method LinfSAM]
                                             [--depths 2,4,6,8] [--n 128]
    python benchmarks/cold_start.py COMMAND --quick        # a reduced run, in seconds

Every measurement runs in fresh interpreters and reports wall time beside process CPU time
(the machine is shared) and the load average (the header line).

``cache``: the compile time per configuration, and the persistent compilation cache across
processes. The same child process runs twice with one fresh JAX persistent compilation cache
folder (and EQX_ON_ERROR=nan: JAX does not cache executables that contain host callbacks, which
is what equinox's runtime checks are otherwise). Each child times
``jit(vmap(point)).lower(...).compile()`` for several configurations (method × depth × solver,
the workload-1 sweep chunk, exact ℓ∞-SAM's Filippov solve and the discrete ``flows.iterate``
loop), split into tracing + lowering (Python, never cached) and the XLA compilation (which the
persistent cache replaces by a load). The first child compiles (cold, writes the cache); the
second finds every executable in the cache (warm). Target: at most 10 s per configuration, cold.

``first-result``: time to a first result. Each run is a new Python process that imports and
configures ``flows`` and runs one ``flows.solve`` (ℓ2-SAM, L = 2, d = 2, the rescaled flow, the
README quick-start problem size) and reports, from inside the process, wall and process CPU time
for: importing JAX, importing flows with ``flows.configure()``, and the first solve (XLA's start,
trace + compile or cache load + run). The cache is ``flows.configure()``'s persistent compilation
cache pointed at a fresh temporary folder (``SAMFLOWS_COMPILATION_CACHE=DIR``): the first process
compiles and writes it (cold), the following ones load the solver from it (warm). A third series
runs with the cache off (``SAMFLOWS_COMPILATION_CACHE=off``), the cold path every time. Medians
over ``--repeat`` processes. Target: import + first solve <= 1.5 s on a warm cache. A fourth
series measures what ``jax.export`` would give (not part of flows): one process exports the
solver that ``flows.solve`` calls (``flows._diffrax.solve_smooth``, flat arrays in and out),
serialises it and saves its trajectory; each following process runs the same ``flows.solve`` with
that solver replaced by the deserialised export, so that nothing of diffrax is traced or lowered
(the XLA executable still comes from the warm cache), and exits with an error unless all 14
arrays of its trajectory equal the saved ones bit for bit. Serialising needs the ``flatbuffers``
package; without it the series is skipped with a message.

``xla-flags``: XLA:CPU's classic emitters without FMA against its default, side by side.
``flows.configure()`` adds ``--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX`` to
``XLA_FLAGS`` (``flows._config.fast_compile_flags``); ``SAMFLOWS_XLA_FAST_COMPILE=off`` leaves
XLA at its default. Each series runs fresh processes (the persistent compilation cache off, so
every configuration compiles), interleaved, that time from inside the process the first calls
(trace + compile + run) of a dense ℓ2-SAM solve, an exact ℓ∞-SAM (Filippov) solve,
``analysis.regime_path`` and a 3-point ``analysis.phase_diagram``, with the seconds JAX's
monitoring attributes to XLA's backend compilation; and the compiled code's speed: a
``jit(vmap(flows.solve))`` over 2,048 (α, ρ) points and a 512-point ``analysis.phase_diagram``
(one worker thread), each the median of 3 calls after a first, compiling one. Medians over
``--repeat`` processes, the CPU ratio, and the largest relative difference between the two
series' answers.

``analysis``: the analysis's speed targets, each cold in its own interpreter (no warm JIT cache,
``SAMFLOWS_COMPILATION_CACHE=off``), so compile time is included; the CPU time is the child's
user + system time. ``python -m analysis check`` (target <= 90 s on 2 CPU cores);
``analysis.critical_alpha(flows.L2SAM(1.0), (1..5), depth=L)`` for each L of ``--depths``
(<= 20 s each; ``--method LinfSAM``: exact ℓ∞-SAM instead); an ``--n`` × ``--n``
``analysis.phase_diagram`` at L = 4, α and ρ log-spaced (128 × 128: <= 30 s).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# `common` (which imports and configures flows) is imported inside each function: the cache's
# child must set JAX's cache options before flows.configure() sees them.

# --- cache: compile time per configuration, the persistent cache across two processes ------


def cache_child(cache_dir, quick):
    """Runs in the child process: time the lowering and compilation of each configuration."""
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    import common
    import jax.numpy as jnp
    import numpy as np

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
    }
    if not quick:
        configs["gd L=2 tsit5"] = solve_config(lambda p: flows.GD(), 2, "tsit5")
        configs["l2sam L=3 tsit5"] = solve_config(flows.L2SAM, 3, "tsit5")
        configs["lesam L=2 tsit5"] = solve_config(lambda p: flows.LESAM(p, 0.3), 2, "tsit5")
        configs["l2sam L=2 kvaerno5"] = solve_config(flows.L2SAM, 2, "kvaerno5")
        # Exact ℓ∞-SAM, plain flow, d = 3: the Filippov segment loop (target < 10 s cold), one
        # solve (its sweeps vmap the same trace).
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


def cache(args):
    if args.child:
        cache_child(args.child, args.quick)
        return
    import common

    common.header("cold start: compile time per configuration, persistent cache across processes")
    folder = tempfile.mkdtemp(prefix="samflows-jax-cache-")
    runs = []
    argv = [sys.executable, __file__, "cache", "--child", folder] + (["--quick"] * args.quick)
    for label in ("cold (1st process)", "warm (2nd process)"):
        t0 = time.perf_counter()
        # JAX never writes executables with host callbacks to the persistent cache,
        # and equinox's error_if (flows' checks on traced values, diffrax's) is a
        # host callback unless EQX_ON_ERROR=nan; so the cached runs set it.
        env = {**os.environ, "EQX_ON_ERROR": "nan"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        runs.append(
            (label, json.loads(proc.stdout.strip().splitlines()[-1]), time.perf_counter() - t0)
        )
    files = sum(len(f) for _, _, f in os.walk(folder))
    print(f"   persistent cache: {folder} ({files} files after both runs)")
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
    common.save("cold_start_cache", record)


# --- first-result: a fresh process, import flows + first solve -----------------------------

FIRST_CHILD = r"""
import json, time
w0, c0 = time.perf_counter(), time.process_time()
import jax, jax.numpy as jnp
w1, c1 = time.perf_counter(), time.process_time()
import flows  # configured before XLA starts (jnp.zeros below), so that its XLA_FLAGS apply
flows.configure()
w2, c2 = time.perf_counter(), time.process_time()
jnp.zeros(1).block_until_ready()
data = flows.single_example([1.0, 2.0])
traj = flows.solve(flows.L2SAM(0.1), data, flows.balanced_init(0.5, 2, 2), t1=2.0, rescaled=True)
traj.status.block_until_ready()
w3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"jax": [w1 - w0, c1 - c0], "flows": [w2 - w1, c2 - c1],
                  "solve": [w3 - w2, c3 - c2], "total": [w3 - w0, c3 - c0],
                  "status": traj.status_name}))
"""


# The exported solver: its arguments' dynamic leaves in, the Trajectory's 14 arrays out (a
# non-dense trajectory; equinox's tree definitions do not survive pickling, so the flat outputs
# are put back into a Trajectory by field name).
EXPORT_SETUP = r"""
import dataclasses, equinox as eqx, jax, numpy as np
import flows
flows.configure()  # the solver's checks traced as NaN in cacheable_checks below
from flows import _diffrax
from flows._config import cacheable_checks
from jax import export
_NAMES = [f.name for f in dataclasses.fields(flows.Trajectory) if f.name != "interpolation"]
"""

EXPORT_WRITE = r"""
_real = _diffrax.solve_smooth

def exporting(*args):
    dyn, static = eqx.partition(args, eqx.is_array)
    leaves, tree = jax.tree.flatten(dyn)

    def flat(*leaves):
        traj = _real(*eqx.combine(jax.tree.unflatten(tree, leaves), static))
        return [getattr(traj, name) for name in _NAMES]

    with cacheable_checks():
        blob = export.export(jax.jit(flat))(*leaves).serialize()
    open(FOLDER + "/solver.bin", "wb").write(blob)
    traj = _real(*args)
    np.savez(FOLDER + "/traj.npz", **{name: getattr(traj, name) for name in _NAMES})
    return traj

_diffrax.solve_smooth = exporting
"""

EXPORT_READ = r"""

def exported(*args):
    dyn, _ = eqx.partition(args, eqx.is_array)
    solver = export.deserialize(bytearray(open(FOLDER + "/solver.bin", "rb").read()))
    traj = flows.Trajectory(**dict(zip(_NAMES, solver.call(*jax.tree.leaves(dyn)))))
    with np.load(FOLDER + "/traj.npz") as ref:
        for name in _NAMES:  # every array, bit for bit (NaN where the run stopped)
            if not np.array_equal(getattr(traj, name), ref[name], equal_nan=True):
                raise SystemExit(f"the exported solver's {name} differs from flows.solve's")
    return traj

_diffrax.solve_smooth = exported
"""


def first_run(env_value, patch=""):
    import common

    env = {**os.environ, "SAMFLOWS_COMPILATION_CACHE": env_value}
    out = common.run_child(FIRST_CHILD.replace("import flows  #", patch + "import flows  #"), env)
    assert out.pop("status") == "ok"
    return out


def export_series(repeat):
    """Runs of the exported solver (fresh processes), or None without flatbuffers."""
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        print("   exported solver: skipped (serialising needs `pip install flatbuffers`)")
        return None
    folder = tempfile.mkdtemp(prefix="samflows-export-")
    patch = f"FOLDER = {folder!r}\n" + EXPORT_SETUP
    first_run(folder, patch + EXPORT_WRITE)  # exports, solves, writes the cache
    first_run(folder, patch + EXPORT_READ)  # compiles the export's module, writes it to the cache
    return [first_run(folder, patch + EXPORT_READ) for _ in range(repeat)]


def medians(runs, key):
    """Median (wall, CPU) over the runs of one series."""
    return [statistics.median(r[key][i] for r in runs) for i in (0, 1)]


def first_result(args):
    import common

    common.header("cold start: fresh process, import flows + first solve")
    folder = tempfile.mkdtemp(prefix="samflows-first-")
    series = {"cold, cache written": [first_run(folder)]}
    series["warm, cache loaded"] = [first_run(folder) for _ in range(args.repeat)]
    series["cache off"] = [first_run("off") for _ in range(args.repeat)]
    exported = None if args.quick else export_series(args.repeat)
    if exported:
        series["warm, exported solver"] = exported
    print(
        f"   {'series':22s} {'n':>2s}  "
        + "  ".join(f"{k:>16s}" for k in ("import jax", "import flows", "first solve", "total"))
    )
    print(f"   {'':22s} {'':2s}  " + "  ".join(f"{'wall (cpu) s':>16s}" for _ in range(4)))
    for name, runs in series.items():
        cells = []
        for key in ("jax", "flows", "solve", "total"):
            w, c = medians(runs, key)
            cells.append(f"{w:7.2f} ({c:5.2f})")
        print(f"   {name:22s} {len(runs):2d}  " + "  ".join(f"{c:>16s}" for c in cells))
    warm = medians(series["warm, cache loaded"], "total")
    off = medians(series["cache off"], "total")
    print(
        f"   warm total {warm[0]:.2f} s wall ({warm[1]:.2f} s cpu); target <= 1.5 s: "
        f"{'met' if warm[0] <= 1.5 else 'MISSED'}; cache off / warm: {off[1] / warm[1]:.2f}x cpu"
    )
    common.save("cold_start_first_result", series)


# --- xla-flags: XLA:CPU's classic emitters without FMA against its default ----------------

XLA_CHILD = r"""
import json, os, time
import numpy as np
spent = {"xla": 0.0}
import jax
jax.monitoring.register_event_duration_secs_listener(
    lambda e, d, **_: spent.__setitem__("xla", spent["xla"] + d)
    if e == "/jax/core/compile/backend_compile_duration" else None)
import jax.numpy as jnp
import flows, analysis
flows.configure()

QUICK = QUICK_VALUE
MU = [1.0, 2.0, 3.0, 4.0, 5.0]
DATA = flows.single_example(MU)
out, answers = {}, {}

def first(name, fn):
    x0, w0, c0 = spent["xla"], time.perf_counter(), time.process_time()
    answers[name] = np.ravel(np.asarray(fn(), dtype=float)).tolist()
    out[name] = [time.perf_counter() - w0, time.process_time() - c0, spent["xla"] - x0]

def again(name, fn, n=3):
    fn()
    times = []
    for _ in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        times.append((time.perf_counter() - w0, time.process_time() - c0))
    answers[name] = np.ravel(np.asarray(value, dtype=float)).tolist()
    wall, cpu = np.median(np.array(times), axis=0)
    out[name] = [float(wall), float(cpu), 0.0]

first("solve l2sam dense", lambda: flows.solve(
    flows.L2SAM(0.5), DATA, flows.balanced_init(0.3, 2, 5), t1=5.0, rescaled=True,
    dense=True).theta_end)
if not QUICK:
    first("solve linfsam exact", lambda: flows.solve(
        flows.LinfSAM(0.5), DATA, flows.balanced_init(0.3, 2, 5), t1=5.0,
        rescaled=True).theta_end)
    first("regime_path", lambda: analysis.regime_path(flows.L2SAM(1.0), MU, 0.36).times)
    first("phase_diagram 3 points", lambda: analysis.phase_diagram(
        flows.L2SAM(1.0), MU, alpha=[0.05, 0.6, 3.0], rho=1.0, progress=False)["t_end"].values)
N = 64 if QUICK else 2048
rng = np.random.default_rng(0)
A, R = jnp.asarray(rng.uniform(0.01, 2, N)), jnp.asarray(rng.uniform(0.05, 1, N))
batched = jax.jit(jax.vmap(lambda a, r: flows.solve(
    flows.L2SAM(r), DATA, flows.balanced_init(a, 2, 5), t1=20.0, rescaled=True).t_end))
again(f"run: vmap solve {N}", lambda: batched(A, R).block_until_ready())
if not QUICK:
    again("run: phase_diagram 512", lambda: analysis.phase_diagram(
        flows.L2SAM(1.0), MU, alpha=np.geomspace(0.05, 3, 512), rho=1.0, progress=False,
        workers=1)["t_end"].values)
print(json.dumps({"times": out, "answers": answers, "flags": os.environ.get("XLA_FLAGS", "")}))
"""


def xla_run(setting, quick):
    import common

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(SAMFLOWS_COMPILATION_CACHE="off", SAMFLOWS_XLA_FAST_COMPILE=setting)
    return common.run_child(XLA_CHILD.replace("QUICK_VALUE", str(bool(quick))), env)


def xla_flags(args):
    import common

    common.header("cold start: XLA:CPU classic emitters without FMA vs XLA's default")
    series = {"default": [], "classic": []}
    for _ in range(args.repeat):  # interleaved, so that the load falls on both alike
        series["default"].append(xla_run("off", args.quick))
        series["classic"].append(xla_run("on", args.quick))
    print(
        f"   XLA_FLAGS: default {series['default'][0]['flags']!r}, "
        f"classic {series['classic'][0]['flags']!r}"
    )
    names = list(series["default"][0]["times"])
    print(
        f"   {'':26s} {'default: wall (cpu) [xla]':>28s} {'classic: wall (cpu) [xla]':>28s}"
        f" {'cpu ratio':>9s}"
    )
    for name in names:
        (w0, c0, x0), (w1, c1, x1) = (
            [statistics.median(r["times"][name][i] for r in series[key]) for i in range(3)]
            for key in series
        )
        print(
            f"   {name:26s} {w0:9.2f} ({c0:6.2f}) [{x0:5.2f}] {w1:9.2f} ({c1:6.2f}) [{x1:5.2f}]"
            f" {c1 / c0:9.2f}"
        )
    print("   largest relative difference between the two series' answers:")
    for name in names:
        a = series["default"][0]["answers"][name]
        b = series["classic"][0]["answers"][name]
        worst = max(
            (abs(x - y) / max(abs(x), abs(y)) for x, y in zip(a, b, strict=True) if x != y),
            default=0.0,
        )
        print(f"     {name:26s} {worst:.2e} ({len(a)} numbers)")
    common.save("cold_start_xla_flags", {k: [r["times"] for r in v] for k, v in series.items()})


# --- analysis: the analysis's speed targets, cold --------------------------------------------

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


def timed_child(argv):
    """Run a child process, cache off; (wall s, child CPU s, its stdout's last line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    env = {**os.environ, "SAMFLOWS_COMPILATION_CACHE": "off"}
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout.strip().splitlines()[-1]


def analysis_speed(args):
    import common

    common.header("cold start: the analysis's speed targets, each in a fresh process")
    if args.quick:
        args.skip_check, args.skip_phase, args.depths = True, True, "2"
    rows = []
    if not args.skip_check:
        wall, cpu, last = timed_child([sys.executable, "-m", "analysis", "check"])
        rows.append(("python -m analysis check", wall, cpu, 90.0, last))
    for depth in (int(x) for x in args.depths.split(",")):
        code = CRITICAL.format(depth=depth, method=args.method)
        wall, cpu, last = timed_child([sys.executable, "-c", code])
        rows.append((f"critical_alpha {args.method} L={depth}", wall, cpu, 20.0, last))
    if not args.skip_phase:
        wall, cpu, last = timed_child([sys.executable, "-c", PHASE.format(n=args.n)])
        rows.append((f"phase_diagram {args.n}x{args.n} L=4", wall, cpu, 30.0, last))
    print(f"{'workload':34s} {'wall s':>8s} {'cpu s':>8s} {'target':>7s}  verdict  result")
    for name, wall, cpu, target, last in rows:
        verdict = "met" if wall <= target else "missed"
        print(f"{name:34s} {wall:8.1f} {cpu:8.1f} {target:7.0f}  {verdict:7s}  {last[:110]}")
    record = [dict(name=r[0], wall=r[1], cpu=r[2], target=r[3]) for r in rows]
    print(json.dumps(record))
    common.save("cold_start_analysis", record)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    quick = argparse.ArgumentParser(add_help=False)
    quick.add_argument("--quick", action="store_true", help="a reduced run, in seconds")
    p = sub.add_parser("cache", parents=[quick], help="compile times; the cache across processes")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.set_defaults(run=cache)
    p = sub.add_parser("first-result", parents=[quick], help="import flows + first solve")
    p.add_argument("--repeat", type=int, default=5)
    p.set_defaults(run=first_result)
    p = sub.add_parser("xla-flags", parents=[quick], help="XLA:CPU classic emitters vs default")
    p.add_argument("--repeat", type=int, default=3)
    p.set_defaults(run=xla_flags)
    p = sub.add_parser("analysis", parents=[quick], help="the analysis's speed targets, cold")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--skip-phase", action="store_true")
    p.add_argument("--depths", default="2,3,4,5,6,7,8")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--method", choices=("L2SAM", "LinfSAM"), default="L2SAM")
    p.set_defaults(run=analysis_speed)
    args = parser.parse_args()
    if args.quick and hasattr(args, "repeat"):
        args.repeat = 1
    args.run(args)


if __name__ == "__main__":
    main()
