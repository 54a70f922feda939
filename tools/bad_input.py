"""Systematic bad-input run against the public API and the command lines.

Every public function of ``flows`` and ``analysis`` (the sweep engine aside) is
called with each argument replaced, one at a time, by hostile values: wrong types,
ragged lists, wrong shapes, NaN, inf, zero, negative numbers, and magnitudes from
1e-300 to 1e300. Each outcome is one of

* ``named``: a ``ValueError``/``TypeError`` whose message names the argument;
* ``accepted``: a finite result (a trajectory: with a status that agrees with it, and
  for the scale-invariant rescaled flows the same status and scaled event time as
  its scale twin at magnitude 1; exact ℓ∞-SAM at large ρ/α against the closed-form
  collapse time; ``analysis.regime_path`` against its scale twin at magnitude 1);
* anything else, listed one per line: an error that names no argument or the wrong
  one, another exception type, a non-finite or inconsistent result, a wrong answer
  (scale twin disagrees), or a timeout.

The command lines are run as processes: a user error must give one stderr line, a
nonzero exit, and no traceback.

    python tools/bad_input.py            # prints the counts and the other outcomes

It is a harness, not a test file: hundreds of cases, each new configuration compiling first,
so pytest does not collect it (``tools/`` is outside ``testpaths``). The record of every case
goes to ``tools/results/bad_input.json`` (not in git).
"""

from __future__ import annotations

import collections
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import analysis
import flows

flows.configure()
TIMEOUT_S = 120  # a first solve of a new configuration compiles for up to ~40 s on 2 busy cores
MU3 = [1.0, 2.0, 3.0]
DATA = flows.single_example(MU3)
THETA = flows.balanced_init(0.5, 2, 3)
TWO = flows.Dataset([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], [1, -1])

WRONG_TYPES = [None, "abc", b"1", 1 + 2j, {"a": 1}, object(), [1.0, [2.0]]]
SPECIAL = [math.nan, math.inf, -math.inf]
SIGNS = [0.0, -1.0]
HUGE = [1e-300, 1e-150, 1e150, 1e300]
SCALARS = WRONG_TYPES + SPECIAL + SIGNS + [np.ones(2)]
ARRAYS = WRONG_TYPES + SPECIAL + [np.ones(0), np.ones((1, 2, 3)), np.full((2, 3), np.nan)]
INTS = [None, "2", 2.5, -5, 0, True]


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout


def outcome(name, call, check=None):
    """Run one case: 'named', 'accepted', or a string describing another outcome."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        result = call()
    except Timeout:
        return f"timeout after {TIMEOUT_S} s"
    except (TypeError, ValueError) as err:
        if f"`{name}`" in str(err):
            return "named"
        return f"{type(err).__name__} not naming `{name}`: {str(err)[:110]}"
    except Exception as err:  # noqa: BLE001 - every other exception is an outcome to report
        return f"{type(err).__name__}: {str(err)[:110]}"
    finally:
        signal.alarm(0)
    problem = check(result) if check else _finite_problem(result)
    return "accepted" if problem is None else problem


def _finite_problem(result):
    leaves = result if isinstance(result, tuple) else (result,)
    for leaf in leaves:
        try:
            arr = np.asarray(leaf, dtype=float)
        except (TypeError, ValueError):
            continue
        if not np.all(np.isfinite(arr)):
            return f"non-finite result {np.array2string(arr.ravel()[:4], precision=3)}"
    return None


def _trajectory_problem(traj):
    """A status that agrees with the trajectory: ok/escaped/... only with finite θ and β."""
    reached = np.asarray(traj.reached)
    finite = np.all(np.isfinite(np.asarray(traj.thetas)[reached])) and np.all(
        np.isfinite(np.asarray(traj.beta)[reached])
    )
    finite = finite and np.all(np.isfinite(np.asarray(flows.beta(traj.theta_end))))
    if not finite and traj.status_name != "nonfinite":
        return f"non-finite θ or β with status {traj.status_name}"
    return None


def _twin(status0, t0):
    """A rescaled ℓ2/GD solve against its twin at magnitude 1 (status ``status0`` at ``t0``)."""

    def check(traj):
        problem = _trajectory_problem(traj)
        if problem:
            return problem
        if traj.status_name != status0 or abs(float(traj.t_end) - t0) > 1e-6 * t0:
            return (
                f"scale twin disagrees: {traj.status_name} at tau={float(traj.t_end):.6g}, "
                f"twin {status0} at tau={t0:.6g}"
            )
        return None

    return check


def _collapse_at(tau):
    """An exact ℓ∞-SAM run that must collapse at ``tau`` (to 1e-3: the collapse event is at
    ‖θ‖ = 1e-6‖θ₀‖, just before the last weight dies)."""

    def check(traj):
        problem = _trajectory_problem(traj)
        if problem:
            return problem
        if traj.status_name != "collapsed" or abs(float(traj.t_end) - tau) > 1e-3 * tau:
            return (
                f"wrong answer: {traj.status_name} at tau={float(traj.t_end):.6g}, "
                f"closed form: collapsed at tau={tau:.6g}"
            )
        return None

    return check


def _nonfinite_or(twin, allowed):
    """Outside the stated range of the twins: the run must say ``nonfinite``, or (``allowed``:
    below the floor, where LSODA may still manage) agree with its twin, never a wrong number."""

    def check(traj):
        if traj.status_name == "nonfinite":
            return None
        return twin(traj) if allowed else f"{traj.status_name}, not nonfinite"

    return check


def _regime_twin(ref):
    """A regime_path scale twin of ``ref``: same regime, status and τ_end (L = 2)."""

    def check(r):
        if (r.regime, r.status) != (ref.regime, ref.status) or abs(r.t_end - ref.t_end) > (
            1e-6 * ref.t_end
        ):
            return (
                f"scale twin disagrees: {r.regime}/{r.status} at tau={r.t_end:.6g}, "
                f"twin {ref.regime}/{ref.status} at tau={ref.t_end:.6g}"
            )
        return None

    return check


def cases():
    """(function label, argument name, value label, call, check) for every case."""
    out = []

    def add(label, name, values, make, check=None):
        for v in values:
            out.append((label, name, repr(v)[:30], (lambda v=v: make(v)), check))

    # flows: data, initialisation, methods
    add(
        "Dataset",
        "X",
        ARRAYS + [[[1.0, 2.0], [3.0]], [[1.0, 2.0]] * 2],
        lambda v: flows.Dataset(v, [1]),
    )
    add("Dataset", "y", ARRAYS + [[0.5], [1, -1]], lambda v: flows.Dataset([[1.0, 2.0]], v))
    add("single_example", "mu", ARRAYS + [[[1.0]]], flows.single_example)
    add(
        "balanced_init",
        "alpha",
        SCALARS + [[0.5, -0.1, 1.0]],
        lambda v: flows.balanced_init(v, 2, 3),
    )
    add("balanced_init", "depth", INTS, lambda v: flows.balanced_init(0.5, v, 3))
    add("balanced_init", "d", INTS, lambda v: flows.balanced_init([0.5, 0.5], 2, d=v))
    add("L2SAM", "rho", SCALARS, flows.L2SAM)
    add("L2SAM", "per_layer", [None, "yes", 1, 0.0], lambda v: flows.L2SAM(0.1, per_layer=v))
    add("LinfSAM", "rho", SCALARS, flows.LinfSAM)
    add("LinfSAM", "delta", SCALARS, lambda v: flows.LinfSAM(0.1, delta=v))
    add("LESAM", "sigma", SCALARS, lambda v: flows.LESAM(v, 0.3))
    add("LESAM", "rho_max", SCALARS, lambda v: flows.LESAM(0.3, v))
    add("LESAM", "eps", SCALARS, lambda v: flows.LESAM(0.3, 0.3, eps=v))
    # flows: pure functions and fields
    add("beta", "theta", WRONG_TYPES + [np.ones(3)], flows.beta)
    add(
        "margins",
        "theta",
        ARRAYS[:-1] + [np.ones((2, 2)), np.ones(3)],
        lambda v: flows.margins(v, DATA),
    )
    add("margins", "data", WRONG_TYPES, lambda v: flows.margins(THETA, v))
    add(
        "objective",
        "loss",
        [None, "hinge", ["logistic"]],
        lambda v: flows.objective(THETA, DATA, v),
    )
    add("loss_fn", "z", WRONG_TYPES, lambda v: flows.loss_fn("logistic", v))
    add("loss_derivative", "loss", [None, "mse"], lambda v: flows.loss_derivative(v, 1.0))
    for fn in (flows.velocity, flows.rescaled_velocity):
        label = fn.__name__
        add(label, "method", WRONG_TYPES, lambda v, fn=fn: fn(v, DATA, "logistic", THETA))
        add(label, "data", WRONG_TYPES, lambda v, fn=fn: fn(flows.GD(), v, "logistic", THETA))
        add(label, "loss", [None, "mse"], lambda v, fn=fn: fn(flows.GD(), DATA, v, THETA))
        add(
            label,
            "theta",
            ARRAYS + [np.ones((2, 2)), np.ones(3)],
            lambda v, fn=fn: fn(flows.GD(), DATA, "logistic", v),
        )
        add(
            label,
            "t",
            SCALARS[:-3] + SPECIAL,
            lambda v, fn=fn: fn(flows.GD(), DATA, "logistic", THETA, v),
        )
    add(
        "rescaled_velocity",
        "data",
        [TWO],
        lambda v: flows.rescaled_velocity(flows.GD(), v, "logistic", np.ones((2, 3))),
    )
    # flows: discrete updates
    it = lambda **kw: flows.iterate(
        **({"method": flows.GD(), "data": DATA, "theta0": THETA, "lr": 0.1, "steps": 4} | kw)
    )  # noqa: E731
    add("iterate", "method", WRONG_TYPES, lambda v: it(method=v))
    add("iterate", "data", WRONG_TYPES, lambda v: it(data=v))
    add("iterate", "theta0", ARRAYS, lambda v: it(theta0=v))
    add("iterate", "lr", SCALARS + HUGE, lambda v: it(lr=v), _trajectory_problem)
    add("iterate", "steps", INTS, lambda v: it(steps=v))
    add("iterate", "every", INTS + [3], lambda v: it(every=v))
    add("iterate", "loss", [None, "mse"], lambda v: it(loss=v))
    # flows: solve
    sv = lambda **kw: flows.solve(
        **({"method": flows.L2SAM(0.3), "data": DATA, "theta0": THETA, "t1": 1.0} | kw)
    )  # noqa: E731
    add("solve", "method", WRONG_TYPES, lambda v: sv(method=v))
    add("solve", "data", WRONG_TYPES, lambda v: sv(data=v))
    add("solve", "theta0", ARRAYS, lambda v: sv(theta0=v))
    add("solve", "t1", SCALARS, lambda v: sv(t1=v))
    add("solve", "ts", ARRAYS + [[0.5, 0.2], [0.0, 2.0]], lambda v: sv(ts=v))
    for key in ("rtol", "atol", "collapse_tol", "escape_tol", "loss_tol"):
        add("solve", key, SCALARS + [2.0], lambda v, key=key: sv(**{key: v}))
    add("solve", "max_steps", INTS, lambda v: sv(max_steps=v))
    add("solve", "loss", [None, "hinge"], lambda v: sv(loss=v))
    add("solve", "backend", [None, "torch", np.ones(2)], lambda v: sv(backend=v))
    add("solve", "solver", [None, "euler", 3], lambda v: sv(solver=v))
    add("solve", "rescaled", [None, "yes", 1], lambda v: sv(rescaled=v))
    add("solve", "dense", [None, "yes", 1], lambda v: sv(dense=v))
    # the message blames the combination: "`rescaled=True` needs a single example"
    add(
        "solve", "rescaled=True", [TWO], lambda v: sv(data=v, theta0=np.ones((2, 3)), rescaled=True)
    )
    # flows: scale twins of the rescaled flows (GD, ℓ2-SAM), both backends
    for backend in ("diffrax", "scipy"):
        for label, method_of in (("GD", lambda s: flows.GD()), ("L2SAM", lambda s: flows.L2SAM(s))):

            def run(s, backend=backend, method_of=method_of):
                return flows.solve(
                    method_of(s),
                    DATA,
                    flows.balanced_init(0.6 * s, 2, 3),
                    t1=50.0,
                    rescaled=True,
                    backend=backend,
                )

            ref = run(1.0)
            # the stated range (flows.SolverOptions): |θ₀| above the floor 1e-298, and for a run
            # that escapes (E s ‖θ₀‖)^L < 1e308; outside it the documented answer is `nonfinite`
            reach = 1e6 * float(np.linalg.norm(flows.balanced_init(0.6, 2, 3)))
            for s in (1e-300, 1e-150, 1e-20, 1e-10, 1e10, 1e100, 1e150, 1e300):
                inside = s >= 1e-298 and reach * s < 1e154  # (E s ‖θ₀‖)^2 < 1e308
                out.append(
                    (
                        f"solve[{backend}, {label}, rescaled]",
                        "alpha",
                        f"scale {s:g}",
                        (lambda s=s, run=run: run(s)),
                        _twin(ref.status_name, float(ref.t_end))
                        if inside
                        else _nonfinite_or(_twin(ref.status_name, float(ref.t_end)), s < 1e-298),
                    )
                )
    # exact ℓ∞-SAM at large ρ/α (L = 2, balanced, rescaled): w_j = ρ + (α - ρ)e^{μ_j τ}
    # dies at τ_j = -log(1 - α/ρ)/μ_j; the run collapses when the last (μ = 1) dies
    for backend, rhos in (("diffrax", (1e5, 1e6, 1e8, 1e10, 1e20)), ("scipy", (1e6, 1e10))):
        for rho in rhos:
            out.append(
                (
                    f"solve[{backend}, LinfSAM, rescaled]",
                    "rho",
                    f"{rho:g}",
                    (
                        lambda rho=rho, backend=backend: flows.solve(
                            flows.LinfSAM(rho),
                            DATA,
                            THETA,
                            t1=10.0,
                            rescaled=True,
                            backend=backend,
                        )
                    ),  # fmt: skip
                    _collapse_at(-math.log1p(-0.5 / rho)),
                )
            )
    # regime_path scale twins: (ρ, α) = λ(1, 0.1) collapses at every λ
    ref = analysis.regime_path(flows.L2SAM(1.0), MU3, 0.1)
    for lam in (1e-150, 1e-100, 1e-30, 1e-25, 1e-20, 1e20, 1e100, 1e150):
        out.append(
            (
                "regime_path[L2SAM]",
                "alpha",
                f"scale {lam:g}",
                (lambda lam=lam: analysis.regime_path(flows.L2SAM(lam), MU3, 0.1 * lam)),
                _regime_twin(ref),
            )
        )
    # analysis
    traj = flows.solve(flows.GD(), DATA, THETA, t1=1.0, rescaled=True, dense=True)
    add("dominant_index", "traj", WRONG_TYPES, analysis.dominant_index)
    add(
        "dominant_index",
        "tie_rtol",
        SCALARS + [1.5],
        lambda v: analysis.dominant_index(traj, tie_rtol=v),
    )
    add("switch_times", "traj_or_problem", WRONG_TYPES, analysis.switch_times)
    add(
        "switch_times",
        "samples_per_step",
        INTS + ["a"],
        lambda v: analysis.switch_times(traj, samples_per_step=v),
    )
    add("switch_times", "max_depth", INTS, lambda v: analysis.switch_times(traj, max_depth=v))
    add(
        "direction_cosine",
        "direction",
        ARRAYS + [[0.0, 0.0, 0.0]],
        lambda v: analysis.direction_cosine(traj, v),
    )
    add("limit_direction", "traj", WRONG_TYPES, analysis.limit_direction)
    add(
        "convergence_rate",
        "model",
        [None, "linear"],
        lambda v: analysis.convergence_rate(traj, [0, 0, 1.0], model=v),
    )
    add(
        "convergence_rate",
        "tail",
        SCALARS + [2.0],
        lambda v: analysis.convergence_rate(traj, [0, 0, 1.0], tail=v),
    )
    add("loss_plateau", "band", SCALARS, lambda v: analysis.loss_plateau(traj, band=v))
    add("max_margin", "data", WRONG_TYPES, lambda v: analysis.max_margin(v, 2))
    add("max_margin", "p", [None, "2", 3, True, 2.5], lambda v: analysis.max_margin(DATA, v))
    for s in (1e-300, 1e-200, 1e200, 1e300):
        add(
            "max_margin",
            "data",
            [s],
            lambda v: analysis.max_margin(flows.Dataset([[v, v]], [1]), 2),
            lambda r: None if np.allclose(r, [2**-0.5, 2**-0.5]) else f"wrong direction {r}",
        )
    add(
        "l2sam_thresholds", "mu", ARRAYS + [[1.0, 1.0]], lambda v: analysis.l2sam_thresholds(v, 1.0)
    )
    add("l2sam_thresholds", "rho", SCALARS, lambda v: analysis.l2sam_thresholds([1.0, 2.0], v))
    rp = lambda **kw: analysis.regime_path(
        **({"method": flows.L2SAM(1.0), "mu": [1.0, 2.0, 3.0], "alpha": 0.5} | kw)
    )  # noqa: E731
    add("regime_path", "method", WRONG_TYPES, lambda v: rp(method=v))
    add("regime_path", "mu", ARRAYS + [[1.0, 3.0, 3.0]], lambda v: rp(mu=v))
    add("regime_path", "alpha", SCALARS, lambda v: rp(alpha=v))
    add("regime_path", "depth", INTS, lambda v: rp(depth=v))
    add("regime_path", "t1", SCALARS, lambda v: rp(t1=v))
    add("regime_path", "max_passes", INTS, lambda v: rp(max_passes=v))
    ca = lambda **kw: analysis.critical_alpha(
        **({"method": flows.L2SAM(1.0), "mu": [1.0, 2.0]} | kw)
    )  # noqa: E731
    add(
        "critical_alpha",
        "bracket",
        WRONG_TYPES + [(1, 2, 3), (2.0, 1.0), (0.1, math.inf)],
        lambda v: ca(bracket=v),
    )
    for key in ("bracket_rtol", "atol"):
        add("critical_alpha", key, SCALARS + [2.0], lambda v, key=key: ca(**{key: v}))
    for key in ("points", "scan", "max_steps", "max_passes"):
        add("critical_alpha", key, INTS, lambda v, key=key: ca(**{key: v}))
    add(
        "Problem",
        "data",
        WRONG_TYPES,
        lambda v: analysis.Problem(flows.GD(), v, THETA, 1.0),
    )
    add("Problem", "method", WRONG_TYPES, lambda v: analysis.Problem(v, DATA, THETA, 1.0))
    # the newest surface: sweep options and outputs, solve_many's workers, the escape at depth,
    # schedules that equal a constant
    add("SweepOptions", "devices", ["gpu", b"cpu", 3, ["cpu"], [None], object()],
        lambda v: flows.SweepOptions(devices=v))  # fmt: skip
    add("SweepOptions", "workers", INTS + [10**30, 4097],
        lambda v: flows.SweepOptions(workers=v))  # fmt: skip
    sq = lambda **kw: flows.sweep(lambda a: {"x": a * a}, {"a": [1.0, 2.0]}, progress=False, **kw)  # noqa: E731
    add("sweep", "cache_dir", [5, 2.5, b"x", object(), ["a"]], lambda v: sq(cache_dir=v))
    add("sweep", "fn", ["text", b"bytes", object(), {"x": "t"}],
        lambda v: flows.sweep(lambda a: v, {"a": [1.0, 2.0]}, progress=False))  # fmt: skip
    sm = lambda **kw: flows.solve_many(flows.GD(), DATA, np.full((2, 3), 0.5), t1=1.0, **kw)  # noqa: E731
    add("solve_many", "workers", INTS + [10**30, 4097], lambda v: sm(workers=v))
    import experiments

    add("experiments.run", "out", [5, None, 2.5, b"x", "", "/proc/samflows"],
        lambda v: experiments.run(v, quick=True))  # fmt: skip
    for depth in range(3, 9):  # a blow-up at τ* = 1/((L-2) 0.5^(L-2) 5) must end `escaped` there
        tau = 1.0 / ((depth - 2) * 0.5 ** (depth - 2) * 5.0)
        out.append((
            "solve_many[GD, blow-up]", "theta0", f"L = {depth}",
            (lambda depth=depth: flows.solve_many(
                flows.GD(), flows.single_example([1.0, 2.0, 3.0, 4.0, 5.0]),
                np.full((depth, 5), 0.5), t1=50.0, rescaled=True)),
            (lambda r, tau=tau: None if r.status_name == ["escaped"] and
             abs(float(r.t_end[0]) - tau) <= 1e-6 * tau else
             f"{r.status_name} at {r.t_end} (tau* = {tau:.9g})"),
        ))  # fmt: skip
    const = analysis.regime_path(flows.LESAM(0.5, 0.3), MU3, 0.2)
    for schedule in ((lambda t: 0.5 + 0 * t), (lambda t: 0.5 + 0 * jnp.exp(t / 2000))):
        out.append((
            "regime_path[LESAM schedule = 0.5]", "method", "sigma(t)",
            lambda schedule=schedule: analysis.regime_path(flows.LESAM(schedule, 0.3), MU3, 0.2),
            lambda r: None if (r.regime, r.sequence) == (const.regime, const.sequence) else
            f"{r.regime} {r.sequence}, the constant's {const.regime} {const.sequence}",
        ))  # fmt: skip
    return out


def cli_cases(tmp: Path):
    """(label, argv) of command-line user errors."""
    (tmp / "empty").mkdir()
    (tmp / "afile").write_text("x")
    phase = ["phase", "--method", "l2sam", "--rho", "0.5"]
    twice = tmp / "twice.toml"
    twice.write_text('method = "lesam"\nrho_max = 0.3\nrho-max = 0.4\nalpha = "0.1:1:3"\n')
    return [
        ("flows --bogus-flag", ["-m", "flows", "--bogus-flag"]),
        ("figures --bogus", ["-m", "figures", "--bogus"]),
        ("figures unknown figure", ["-m", "figures", "nofig"]),
        (
            "figures --redraw, empty cache",
            ["-m", "figures", "--redraw", "regime_map", "--cache", str(tmp / "empty")],
        ),
        ("figures --out file", ["-m", "figures", "--quick", "--out", str(tmp / "afile")]),
        (
            "figures --out uncreatable",
            ["-m", "figures", "--quick", "--out", str(tmp / "afile" / "x")],
        ),
        ("figures --cache file", ["-m", "figures", "--quick", "--cache", str(tmp / "afile")]),
        (
            "analysis check --json missing folder",
            ["-m", "analysis", "check", "--json", str(tmp / "no" / "x.json")],
        ),
        ("analysis check --json folder", ["-m", "analysis", "check", "--json", str(tmp)]),
        ("analysis --bogus", ["-m", "analysis", "check", "--bogus"]),
        ("analysis no command", ["-m", "analysis"]),
        ("experiments --out uncreatable", ["-m", "experiments", "--quick", "--out",
                                           "/proc/samflows"]),
        ("experiments --out under a file", ["-m", "experiments", "--quick", "--out",
                                            str(tmp / "afile" / "x")]),
        ("figures phase --depth 2:100000", ["-m", "figures", *phase, "--alpha", "0.1:1:4",
                                            "--depth", "2:100000", "--out", str(tmp / "ph")]),
        ("figures phase --depth 1025", ["-m", "figures", *phase, "--alpha", "1", "--rho",
                                        "0.5:2:4", "--depth", "1025", "--out", str(tmp / "ph")]),
        ("figures phase config rho_max + rho-max", ["-m", "figures", "phase", "--config",
                                                   str(twice), "--out", str(tmp / "ph")]),
    ]  # fmt: skip


def cli_outcome(argv) -> str:
    try:
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "timeout after 120 s (computing instead of refusing?)"
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr:
        return "named"
    return f"exit {proc.returncode}, {len(lines)} stderr lines: {(lines or [''])[-1][:100]}"


def main() -> int:
    t0 = time.perf_counter()
    results = []
    for label, name, value, call, check in cases():
        results.append((f"{label}({name}={value})", outcome(name, call, check)))
    with tempfile.TemporaryDirectory() as tmp:
        for label, argv in cli_cases(Path(tmp)):
            results.append((f"CLI: {label}", cli_outcome(argv)))
    counts = collections.Counter(o if o in ("named", "accepted") else "other" for _, o in results)
    print(
        f"{len(results)} cases in {time.perf_counter() - t0:.0f} s: "
        f"{counts['named']} named errors, {counts['accepted']} accepted with a finite, "
        f"consistent result, {counts['other']} other outcomes"
    )
    for case, o in results:
        if o not in ("named", "accepted"):
            print(f"  {case}: {o}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "bad_input.json").write_text(json.dumps({"counts": counts, "cases": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
