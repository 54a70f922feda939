"""Shared pieces of the benchmark scripts: the phase-diagram workload, timers, machine info.

Workload 1 (issue 6): ℓ2-SAM at L = 2 on the single example μ = (1, 2, 3, 4, 5),
rescaled flow from the uniform balanced initialisation w(0) = α, run to escape
(‖θ‖ = 1e6 ‖θ₀‖) or collapse (‖θ‖ = 1e-6 ‖θ₀‖) or τ = T1, recording
j†(τ) = argmax_j |β_j(τ)| (first index on ties; -1 after the run stopped) on a
τ grid. Tolerances are flows.solve's defaults (rtol 1e-8, atol 1e-10) for both
the sweep and the scipy baseline.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import flows

flows.configure()  # as the command lines run: before the first JAX computation (DATA below)
MU = np.arange(1.0, 6.0)
DATA = flows.single_example(MU)
DEPTH = 2
T1 = 100.0
# j†(τ) is recorded at 0 and at 63 log-spaced τ in [1e-2, T1]: escapes happen at
# τ ~ 1..20, and a log grid resolves both the early and the late switches.
TS = np.concatenate([[0.0], np.geomspace(1e-2, T1, 63)])
ALPHA_RANGE = (1e-3, 1.0)
RHO_RANGE = (1e-2, 1.0)


def point(alpha, rho):
    """One grid point: solve, then reduce the Trajectory to a few small arrays."""
    traj = flows.solve(
        flows.L2SAM(rho),
        DATA,
        flows.balanced_init(alpha, DEPTH, MU.size),
        t1=T1,
        ts=jnp.asarray(TS),
        rescaled=True,
    )
    j = jnp.where(traj.reached, jnp.argmax(jnp.abs(traj.beta), axis=-1), -1)
    return {
        "status": traj.status.astype(jnp.int8),
        "t_end": traj.t_end,
        "n_steps": traj.n_steps.astype(jnp.int32),
        "j_dagger": j.astype(jnp.int8),
    }


def sweep_chunk(chunk=None):
    """Points per chunk for workload 1: ``chunk``, or the size flows.sweep picks by default.

    The default is read from the manifest of a small sweep (which also compiles the
    chunk function); its grid holds at least one default chunk on CPU (256) and GPU (8192).
    """
    if chunk:
        return int(chunk)
    n = 32 if jax.default_backend() == "cpu" else 128
    warm = flows.sweep(point, grid(n, n), order=expected_cost, progress=False)  # compiles
    return int(warm.manifest["chunk_size"])


def chunk_efficiency(n_steps, chunk_size: int) -> float:
    r"""Lockstep efficiency :math:`\sum_i s_i/\sum_c(|c|\max_{i\in c}s_i)` of vmapped solves.

    ``n_steps`` lists the solver steps per point *in execution order* (sorted by
    the sweep's ``order``); ``chunk_size`` is the batch size. 1 means no point
    waited for a slower one in its batch.

    >>> chunk_efficiency([1, 1, 2, 2], 2), chunk_efficiency([1, 2, 1, 2], 2)
    (1.0, 0.75)
    """
    s = np.asarray(n_steps, dtype=np.float64).ravel()
    chunks = [s[i : i + chunk_size] for i in range(0, s.size, chunk_size)]
    return float(s.sum() / sum(c.max() * c.size for c in chunks))


def grid(n_alpha, n_rho):
    """The (α, ρ) axes: log-uniform over ALPHA_RANGE × RHO_RANGE."""
    return {
        "alpha": np.geomspace(*ALPHA_RANGE, n_alpha),
        "rho": np.geomspace(*RHO_RANGE, n_rho),
    }


def expected_cost(points):
    """Expected-cost key: by scale invariance the path depends on α/ρ only (docs/theory.md §6)."""
    return np.log(points["alpha"] / points["rho"])


def median_time(fn, repeats):
    """Run ``fn`` ``repeats`` times; return (median seconds, all times, last result)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def machine() -> str:
    """One line describing the machine and the JAX backend."""
    model = "unknown CPU"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{model}, {os.cpu_count()} cores, backend {jax.default_backend()} "
        f"({len(jax.devices())} device(s): {jax.devices()[0].device_kind}), "
        f"python {platform.python_version()}, jax {jax.__version__}, load avg {load:.2f}"
    )


def save(name: str, record: dict) -> None:
    """Write ``record`` to benchmarks/results/<name>.json (ignored by git)."""
    import json

    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.json"), "w") as fh:
        json.dump(record, fh, indent=1, default=float)


def run_child(code: str, env: dict) -> dict:
    """Run ``code`` in a fresh interpreter with environment ``env`` and return the JSON object
    on its last line of output; exit with the end of its stderr if it fails."""
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def header(title: str) -> None:
    print(f"== {title}")
    print(f"   machine: {machine()}")
    print(f"   command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")


# --- the baselines: scipy solve_ivp (LSODA with a Jacobian) in a Python loop ---------


def scipy_flows_point(alpha, rho):
    """Baseline A: flows' own scipy backend (jitted JAX field and autodiff Jacobian)."""
    traj = flows.solve(
        flows.L2SAM(rho),
        DATA,
        flows.balanced_init(alpha, DEPTH, MU.size),
        t1=T1,
        ts=TS,
        rescaled=True,
        backend="scipy",
        solver="LSODA",
    )
    return _reduce_numpy(traj.status, traj.t_end, traj.n_steps, np.asarray(traj.beta), TS)


def _reduce_numpy(status, t_end, n_steps, beta, ts):
    reached = ts <= t_end
    j = np.where(reached, np.argmax(np.abs(beta), axis=-1), -1)
    return {"status": int(status), "t_end": float(t_end), "n_steps": int(n_steps), "j_dagger": j}


def scipy_numpy_point(alpha, rho, collapse_tol=1e-6, escape_tol=1e6, rtol=1e-8, atol=1e-10):
    r"""Baseline B: hand-written NumPy field and exact Jacobian, the fastest scipy loop.

    For L = 2 with u = ∇m(θ) = Pθ, P = [[0, diag μ], [diag μ, 0]]:
    f(θ) = P(θ − ρ u/‖u‖) and J = P − ρ P (I/‖u‖ − u uᵀ/‖u‖³) P.
    Events and tolerances are those of flows.solve.
    """
    import scipy.integrate

    d = MU.size
    P = np.zeros((2 * d, 2 * d))
    P[:d, d:] = np.diag(MU)
    P[d:, :d] = np.diag(MU)
    eye = np.eye(2 * d)

    def f(t, y):
        u = P @ y
        return P @ (y - rho * u / np.linalg.norm(u))

    def jac(t, y):
        u = P @ y
        nu = np.linalg.norm(u)
        return P - rho * P @ (eye / nu - np.outer(u, u) / nu**3) @ P

    y0 = np.full(2 * d, float(alpha))
    n0 = np.linalg.norm(y0)

    def collapse(t, y):
        return np.linalg.norm(y) / n0 - collapse_tol

    def escape(t, y):
        return np.log(np.linalg.norm(y) / n0) - np.log(escape_tol)

    collapse.terminal, collapse.direction = True, -1
    escape.terminal, escape.direction = True, +1
    sol = scipy.integrate.solve_ivp(
        f,
        (0.0, T1),
        y0,
        method="LSODA",
        jac=jac,
        rtol=rtol,
        atol=atol,
        events=[collapse, escape],
        dense_output=True,
    )
    status = flows.Status.OK
    if sol.status == 1:
        status = flows.Status.COLLAPSED if len(sol.t_events[0]) else flows.Status.ESCAPED
    elif sol.status < 0:
        status = flows.Status.NONFINITE
    t_end = sol.t[-1]
    inside = TS <= t_end
    beta = np.full((TS.size, d), np.nan)
    y = sol.sol(TS[inside])
    beta[inside] = (y[:d] * y[d:]).T
    return _reduce_numpy(status, t_end, len(sol.t) - 1, beta, TS)


def compare_answers(sweep_out, baseline_out):
    """Agreement of status, t_end and j†(τ) between the sweep and a baseline at the same points."""
    same_status = np.mean(
        [s == b["status"] for s, b in zip(sweep_out["status"], baseline_out, strict=False)]
    )
    stopped = [
        i
        for i, b in enumerate(baseline_out)
        if b["status"] in (1, 2) and sweep_out["status"][i] == b["status"]
    ]
    t_err = [abs(sweep_out["t_end"][i] / baseline_out[i]["t_end"] - 1) for i in stopped]
    j_same = []
    for i, b in enumerate(baseline_out):
        both = (b["j_dagger"] >= 0) & (sweep_out["j_dagger"][i] >= 0)
        both[0] = False  # τ = 0: every |β_j| ties
        if both.any():  # a run that stopped before the first τ > 0 has nothing to compare
            j_same.append(np.mean(b["j_dagger"][both] == sweep_out["j_dagger"][i][both]))
    return {
        "status_agree": float(same_status),
        "t_end_rel_err_median": float(np.median(t_err)) if t_err else float("nan"),
        "t_end_rel_err_max": float(np.max(t_err)) if t_err else float("nan"),
        "j_dagger_agree": float(np.mean(j_same)),
    }
