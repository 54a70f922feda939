"""Issue 14, P2: time to a first result in a fresh process, on a cold and a warm cache.

    python benchmarks/first_result.py [--repeat 5]

Each run is a new Python process that imports and configures ``flows`` and runs one
``flows.solve`` (ℓ2-SAM, L = 2, d = 2, the rescaled flow, the README quick-start problem size)
and reports, from inside the process, wall and process CPU time for: importing JAX, importing
flows with ``flows.configure()``, and the first solve (XLA's start, trace + compile or cache
load + run). The cache is ``flows.configure()``'s persistent compilation cache pointed at a
fresh temporary folder (``SAMFLOWS_COMPILATION_CACHE=DIR``): the first process compiles and
writes it (cold), the following ones load the solver from it (warm). A third series runs with
the cache off (``SAMFLOWS_COMPILATION_CACHE=off``), which is the cold path every time. Medians
over ``--repeat`` processes, process CPU next to wall (the machine is shared).
Target: import + first solve <= 1.5 s on a warm cache.

A fourth series measures what ``jax.export`` would give (issue 14, fifth round; not part of
flows). One process exports the solver that ``flows.solve`` calls
(``flows._diffrax.solve_smooth``, flat arrays in and out), serialises it and saves its
trajectory; each following process runs the same ``flows.solve`` with that solver replaced by
the deserialised export, so that nothing of diffrax is traced or lowered (the XLA executable
still comes from the warm cache), and exits with an error unless all 14 arrays of its
trajectory equal the saved ones bit for bit. Serialising needs the ``flatbuffers`` package
(``pip install flatbuffers``); without it the series is skipped with a message.
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

CHILD = r"""
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


def run(env_value, patch=""):
    env = {**os.environ, "SAMFLOWS_COMPILATION_CACHE": env_value}
    out = common.run_child(CHILD.replace("import flows  #", patch + "import flows  #"), env)
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
    run(folder, patch + EXPORT_WRITE)  # exports, solves, writes the cache
    run(folder, patch + EXPORT_READ)  # compiles the export's module and writes it to the cache
    return [run(folder, patch + EXPORT_READ) for _ in range(repeat)]


def median(runs, key):
    return [statistics.median(r[key][i] for r in runs) for i in (0, 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    common.header("issue 14 P2: fresh process, import flows + first solve")
    cache = tempfile.mkdtemp(prefix="samflows-first-")
    series = {"cold, cache written": [run(cache)]}
    series["warm, cache loaded"] = [run(cache) for _ in range(args.repeat)]
    series["cache off"] = [run("off") for _ in range(args.repeat)]
    exported = export_series(args.repeat)
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
            w, c = median(runs, key)
            cells.append(f"{w:7.2f} ({c:5.2f})")
        print(f"   {name:22s} {len(runs):2d}  " + "  ".join(f"{c:>16s}" for c in cells))
    warm = median(series["warm, cache loaded"], "total")
    off = median(series["cache off"], "total")
    print(
        f"   warm total {warm[0]:.2f} s wall ({warm[1]:.2f} s cpu); target <= 1.5 s: "
        f"{'met' if warm[0] <= 1.5 else 'MISSED'}; cache off / warm: {off[1] / warm[1]:.2f}x cpu"
    )


if __name__ == "__main__":
    main()
