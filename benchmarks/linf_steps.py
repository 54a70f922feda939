r"""Numbers for issue 3 (ℓ∞-SAM as a Filippov system): work, δ-ladder, η → 0 rate.

Run: ``python benchmarks/linf_steps.py`` (CPU, about a minute or two).

* step counts of the Filippov solve with sliding, at horizons T, 10T, 100T, and of
  runs without sliding; the raw sign fed to a plain adaptive solve for contrast;
* the δ-ladder: max error of the regularised flow (sign ≈ tanh(g/δ)) against the
  Filippov flow, and its step count;
* the η-ladder: discrete ℓ∞-SAM against the Filippov flow, fitted log-log slope.
"""

import jax.numpy as jnp
import numpy as np

import flows

flows.configure()


class RawSign(flows.AbstractMethod):
    """ℓ∞-SAM's rule with the raw sign and nothing else: a field that ``solve`` treats as
    smooth (what it did for ℓ∞-SAM before issue 3). Public names only (issue 11)."""

    rho: float

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        del theta, t, grad_scale
        return self.rho * jnp.sign(grad)


RHO = 0.5
MU = jnp.array([1.0, 2.0, 3.0])
DATA = flows.single_example(MU)


def work():
    print("## steps (rescaled flow, L=2, mu=(1,2,3), rho=0.5, tsit5, rtol=1e-8)")
    cases = {
        "sliding: alpha=(0.3,0.5,0.45)": (jnp.array([0.3, 0.5, 0.45]), (10.0, 100.0, 1000.0)),
        "no sliding: alpha=(0.6,0.7,0.8)": (jnp.array([0.6, 0.7, 0.8]), (1.0, 2.0, 3.0)),
    }
    for name, (alpha, horizons) in cases.items():
        theta0 = flows.balanced_init(alpha, 2)
        row = []
        for t1 in horizons:
            tr = flows.solve(
                flows.LinfSAM(RHO), DATA, theta0, t1=t1, rescaled=True, escape_tol=1e30
            )
            row.append(
                f"T={t1:g}: {int(tr.n_steps)} steps, {int(tr.n_switches)} switches, "
                f"sliding {float(tr.t_sliding):.3f}, {tr.status_name}"
            )
        print(f"- {name}: " + "; ".join(row))
    # Plain flow, one coordinate dead (sliding), one growing like log t.
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(jnp.array([0.3, 0.8]), 2)
    row = []
    for t1 in (20.0, 200.0, 2000.0):
        tr = flows.solve(flows.LinfSAM(RHO), data, theta0, t1=t1, collapse_tol=None)
        row.append(f"T={t1:g}: {int(tr.n_steps)} steps, sliding {float(tr.t_sliding):.2f}")
    print("- plain flow, mu=(1,2), alpha=(0.3,0.8): " + "; ".join(row))
    # The raw sign fed to a smooth adaptive solve (what solve did before issue 3).
    theta0 = flows.balanced_init(jnp.array([0.3, 0.5, 0.45]), 2)
    raw = flows.solve(
        RawSign(RHO), DATA, theta0, t1=10.0, ts=jnp.linspace(0.0, 10.0, 41), rescaled=True,
        max_steps=20_000,
    )  # fmt: skip
    print(
        f"- raw sign, plain diffrax solve, same sliding case, T=10: {int(raw.n_steps)} steps, "
        f"{raw.status_name} at t={float(raw.t_end):.4f}"
    )


def delta_ladder():
    print("\n## delta ladder (rescaled, alpha=(0.3,0.5,0.7), tau in [0,1], max |theta err|)")
    alpha = jnp.array([0.3, 0.5, 0.7])
    theta0 = flows.balanced_init(alpha, 2)
    ts = jnp.linspace(0.0, 1.0, 201)
    exact = flows.solve(flows.LinfSAM(RHO), DATA, theta0, t1=1.0, ts=ts, rescaled=True)
    print(f"- Filippov: {int(exact.n_steps)} steps")
    for solver in ("tsit5", "kvaerno5"):
        for delta in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5):
            reg = flows.solve(
                flows.LinfSAM(RHO, delta=delta), DATA, theta0, t1=1.0, ts=ts, rescaled=True,
                solver=solver, max_steps=200_000,
            )  # fmt: skip
            err = float(jnp.max(jnp.abs(reg.thetas - exact.thetas)))
            print(f"- {solver} delta={delta:.0e}: err={err:.3e}, {int(reg.n_steps)} steps")


def eta_ladder():
    print("\n## eta ladder (plain flow, mu=1.5, theta0=(-0.2, 0.9), t in [0,4])")
    data = flows.single_example([1.5])
    theta0 = jnp.array([[-0.2], [0.9]])
    t1, grid = 4.0, 4000
    ts = jnp.linspace(0.0, t1, grid + 1)
    flow = flows.solve(flows.LinfSAM(RHO), data, theta0, t1=t1, ts=ts, collapse_tol=None)
    ns = [250, 400, 500, 800, 1000, 2000, 4000]
    errs = []
    for n in ns:
        it = flows.iterate(flows.LinfSAM(RHO), data, theta0, lr=t1 / n, steps=n)
        errs.append(float(np.abs(np.asarray(it.thetas - flow.thetas[:: grid // n])).max()))
        print(f"- eta={t1 / n:.4g}: max err {errs[-1]:.3e}")
    slope = np.polyfit(np.log(t1 / np.array(ns)), np.log(errs), 1)[0]
    print(f"- fitted slope {slope:.3f} (flow: {int(flow.n_switches)} switches)")


if __name__ == "__main__":
    work()
    delta_ladder()
    eta_ladder()
