"""``python -m flows``: a short demo that integrates every method and prints a summary."""

import jax.numpy as jnp

import flows
from samflows_cli import ArgumentParser, run_command  # the command lines' one parser


def main(argv=None) -> int:
    ArgumentParser(
        prog="python -m flows",
        description="A 10-second demo: the rescaled flows of GD, l2-SAM and LE-SAM (L = 2, "
        "mu = (1..5)) and a discrete l2-SAM run, one summary line each. It takes no arguments.",
    ).parse_args(argv)
    flows.configure()  # before the first JAX computation
    data = flows.single_example([1.0, 2.0, 3.0, 4.0, 5.0])
    theta0 = flows.balanced_init(0.3, depth=2, d=5)
    methods = {"GD": flows.GD(), "L2-SAM": flows.L2SAM(0.5), "LE-SAM": flows.LESAM(0.35, 0.3)}
    print("rescaled flows, L = 2, mu = (1..5), alpha = 0.3")
    print(f"{'method':8} {'status':10} {'tau_end':>9} {'steps':>6}  j_dagger(tau) along the path")
    for name, method in methods.items():
        traj = flows.solve(
            method, data, theta0, t1=30.0, rescaled=True, ts=jnp.linspace(0.0, 30.0, 301)
        )
        b = traj.beta[traj.reached]
        order = [int(j) + 1 for j in jnp.argmax(jnp.abs(b[1:]), axis=-1)]
        path = [j for i, j in enumerate(order) if i == 0 or j != order[i - 1]]
        print(
            f"{name:8} {traj.status_name:10} {float(traj.t_end):9.4f} {int(traj.n_steps):6d}  "
            f"{' -> '.join(map(str, path))}"
        )
    it = flows.iterate(flows.L2SAM(0.05), data, theta0, lr=1e-2, steps=1000, every=100)
    print(
        f"discrete L2-SAM, lr=1e-2, 1000 steps: status {it.status_name}, "
        f"loss {float(it.loss[0]):.4f} -> {float(it.loss[-1]):.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(run_command("python -m flows", main))
