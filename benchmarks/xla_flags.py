"""Issue 14, P2: XLA:CPU's classic emitters without FMA against its default, side by side.

    python benchmarks/xla_flags.py [--repeat 3]

``flows.configure()`` adds ``--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX`` to
``XLA_FLAGS`` (``flows._config.fast_compile_flags``); ``SAMFLOWS_XLA_FAST_COMPILE=off``
leaves XLA at its default. Each series runs fresh processes (the persistent compilation
cache off, so every configuration compiles) that time, from inside the process:

* first calls (trace + compile + run) of four configurations: a dense ℓ2-SAM solve, an
  exact ℓ∞-SAM (Filippov) solve, ``analysis.regime_path`` and a 3-point
  ``analysis.phase_diagram``, with the seconds JAX's monitoring attributes to XLA's
  backend compilation;
* the compiled code's speed: a ``jit(vmap(flows.solve))`` over 2,048 (α, ρ) points and a
  512-point ``analysis.phase_diagram`` (one worker thread), each the median of 3 calls
  after a first, compiling one.

Medians over ``--repeat`` processes, process CPU next to wall (the machine is shared),
and the largest relative difference between the two series' answers.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

CHILD = r"""
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
first("solve linfsam exact", lambda: flows.solve(
    flows.LinfSAM(0.5), DATA, flows.balanced_init(0.3, 2, 5), t1=5.0, rescaled=True).theta_end)
first("regime_path", lambda: analysis.regime_path(flows.L2SAM(1.0), MU, 0.36).times)
first("phase_diagram 3 points", lambda: analysis.phase_diagram(
    flows.L2SAM(1.0), MU, alpha=[0.05, 0.6, 3.0], rho=1.0, progress=False)["t_end"].values)
rng = np.random.default_rng(0)
A, R = jnp.asarray(rng.uniform(0.01, 2, 2048)), jnp.asarray(rng.uniform(0.05, 1, 2048))
batched = jax.jit(jax.vmap(lambda a, r: flows.solve(
    flows.L2SAM(r), DATA, flows.balanced_init(a, 2, 5), t1=20.0, rescaled=True).t_end))
again("run: vmap solve 2048", lambda: batched(A, R).block_until_ready())
again("run: phase_diagram 512", lambda: analysis.phase_diagram(
    flows.L2SAM(1.0), MU, alpha=np.geomspace(0.05, 3, 512), rho=1.0, progress=False,
    workers=1)["t_end"].values)
print(json.dumps({"times": out, "answers": answers, "flags": os.environ.get("XLA_FLAGS", "")}))
"""


def run(setting):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(SAMFLOWS_COMPILATION_CACHE="off", SAMFLOWS_XLA_FAST_COMPILE=setting)
    return common.run_child(CHILD, env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    common.header("issue 14 P2: XLA:CPU classic emitters without FMA vs XLA's default")
    series = {"default": [], "classic": []}
    for _ in range(args.repeat):  # interleaved, so that the load falls on both alike
        series["default"].append(run("off"))
        series["classic"].append(run("on"))
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


if __name__ == "__main__":
    main()
