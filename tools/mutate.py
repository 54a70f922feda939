"""Mutation harness: small faults in the engine, the rules, the events, the certificates, the
pass policy and the validators, each run against the tests that should catch it.

Each fault replaces one piece of source text (every occurrence) in a private copy of the
working tree, runs its tests there with pytest, and counts as

* ``killed``: a test failed (the fault was caught);
* ``SURVIVED``: every test passed (a gap in the tests);
* ``STALE``: the text to replace is no longer in the file (update the fault);
* ``ERROR``: pytest could not run the tests (collection error, no such test, timeout).

    python tools/mutate.py                 # every fault; prints one line each, then survivors
    python tools/mutate.py E1 R2 P1        # only these faults
    python tools/mutate.py --list          # the faults, not run

It is a developers' tool, not part of the test suite (``tools/`` is outside ``testpaths``):
a run takes about half an hour on two cores, as every fault of the numba engine or the rules
recompiles the engine (each such fault, in the engine or a module it compiles in, gets an empty
numba cache, so that the mutant's machine code never replaces the cached one). The working tree
itself is never modified.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 1200  # seconds per fault


class Fault(NamedTuple):
    name: str
    area: str
    path: str
    old: str
    new: str
    tests: tuple


RUL, EVT, OPT = "flows/_rules.py", "flows/_events.py", "flows/_options.py"
ENG = "flows/_engine/"
ENG_EVENTS, ENG_FIELD = ENG + "_events.py", ENG + "_vector_field.py"
ENG_CONTROL, ENG_TABLEAU = ENG + "_controller.py", ENG + "_tableau.py"
# the engine compiles in the code and constants of these modules too (flows._engine._jit.SOURCES)
COMPILED_IN = (RUL, EVT, OPT, "flows/_problem.py", "flows/_tracking.py", "flows/_dynamics.py")
CERT, POL = "analysis/_certify.py", "analysis/_regime.py"
T_ENGINE = "tests/test_engine.py::"
STEPS = (T_ENGINE + "test_step_budget_and_dopri5_match_diffrax",)
NUMPY_RULE = (T_ENGINE + "test_field_matches_an_independent_numpy_rule",)
CERTIFY = ("tests/test_certify.py",)
DECIDE = (
    "tests/test_regime_schedule.py::test_decide_reads_the_facts_of_a_failed_solves_last_state",
)
REFUSALS = "tests/test_named_refusals.py::"

FAULTS = [
    # --- the numba engine
    Fault("E1", "engine: event bisection 1e-13 -> 1e-10", ENG_EVENTS,
          "< span_atol + EVENT_RTOL * abs(t)", "< span_atol + 1e3 * EVENT_RTOL * abs(t)",
          (T_ENGINE + "test_event_is_located_to_the_bisections_tolerance",)),
    Fault("E2", "engine: the clock's rate 1e-6 off", ENG_FIELD,
          "out[Ld, w] = math.exp(min(log_rate, _LOG_RATE_MAX))",
          "out[Ld, w] = math.exp(min(log_rate, _LOG_RATE_MAX)) * (1.0 + 1e-6)",
          (T_ENGINE + "test_real_time_clock_in_closed_form",)),
    Fault("E3", "engine: controller safety 0.9 -> 0.85", ENG_CONTROL,
          "_SAFETY, _FACTORMIN, _FACTORMAX = float(_PID.safety),",
          "_SAFETY, _FACTORMIN, _FACTORMAX = 0.85,", STEPS),
    Fault("E4", "engine: controller factormax 10 -> 8", ENG_CONTROL,
          "float(_PID.factormax)", "8.0", STEPS),
    Fault("E5", "engine: a Tsit5 tableau coefficient 1e-6 off", ENG_TABLEAU,
          "_A = np.stack([_read_tableau(_tsit5_tableau)[0], _read_tableau(_dopri5_tableau)[0]])",
          "_A = np.stack([_read_tableau(_tsit5_tableau)[0], _read_tableau(_dopri5_tableau)[0]])\n"
          "_A[0, 3, 1] *= 1.0 + 1e-6", STEPS),
    Fault("E6", "engine: error-estimate weights x1.5", ENG_TABLEAU,
          "_E = np.stack([_read_tableau(_tsit5_tableau)[1], _read_tableau(_dopri5_tableau)[1]])",
          "_E = 1.5 * np.stack([_read_tableau(_tsit5_tableau)[1], "
          "_read_tableau(_dopri5_tableau)[1]])", STEPS),
    Fault("E7", "engine: first step 0.01 -> 0.02", ENG_CONTROL,
          "_FIRST_STEP = 0.01", "_FIRST_STEP = 0.02", STEPS),
    Fault("E8", "engine: PID proportional coefficient 0.4 -> 0.3", ENG_CONTROL,
          "_COEFF1 = (_PID.icoeff + _PID.pcoeff + _PID.dcoeff) / _ERROR_ORDER",
          "_COEFF1 = (_PID.icoeff + 0.3 + _PID.dcoeff) / _ERROR_ORDER", STEPS),
    Fault("E9", "engine: the event norm misses a layer", ENG_EVENTS,
          "_norm(y, w, L * d)", "_norm(y, w, (L - 1) * d)",
          (T_ENGINE + "test_gd_escape_time_in_closed_form",)),
    Fault("E10", "engine: the lane norm misses a layer", ENG_EVENTS,
          "_scaled_norms(y, 0, Ld, q, a, b)", "_scaled_norms(y, 0, Ld - d, q, a, b)",
          (T_ENGINE + "test_gd_escape_time_in_closed_form",)),
    Fault("E11", "engine: an escape reported as a collapse", ENG_EVENTS,
          "status = _ESCAPED if best == idx else status",
          "status = _COLLAPSED if best == idx else status",
          (T_ENGINE + "test_gd_escape_time_in_closed_form",)),
    # --- the perturbation rules (one code for the engine and JAX)
    Fault("R1", "rules: l2 perturbation sign", RUL,
          "        return rho * u\n", "        return -rho * u\n", NUMPY_RULE),
    Fault("R2", "rules: smoothed linf g*delta for g/delta", RUL,
          "rho * xp.tanh(g / delta)", "rho * xp.tanh(g * delta)", NUMPY_RULE),
    Fault("R3", "rules: LE-SAM cap min -> max", RUL,
          "xp.minimum(sigma / (grad_scale * norm + eps), rho_max)",
          "xp.maximum(sigma / (grad_scale * norm + eps), rho_max)", NUMPY_RULE),
    Fault("R4", "rules: LE-SAM forgets the loss factor", RUL,
          "sigma / (grad_scale * norm + eps)", "sigma / (norm + eps)",
          ("tests/test_solve_rescaled.py",)),
    # --- the events and solver options (diffrax, scipy)
    Fault("V1", "events: bisection 1e-13 -> 1e-10", EVT,
          "EVENT_RTOL = 1e-13", "EVENT_RTOL = 1e-10",
          (T_ENGINE + "test_event_is_located_to_the_bisections_tolerance",)),
    Fault("V2", "events: escape threshold 0.1 % high", EVT,
          "- jnp.log(escape), +1, Status.ESCAPED", "- jnp.log(1.001 * escape), +1, Status.ESCAPED",
          ("tests/test_solver_hostile.py::test_event_time_of_a_depth3_twin_is_located_relative_to_its_span",)),
    Fault("O1", "options: norm-clock escape rate 1e10 -> 1e14", OPT,
          "ESCAPE_RATE = 1e10", "ESCAPE_RATE = 1e14", ("tests/test_escape_depth.py",)),
    Fault("O2", "validator: rtol = NaN let through", OPT,
          "if number is None or not low < number < high:",
          "if number is None or number <= low or number >= high:",
          ("tests/test_solve_properties.py::test_solve_refuses_or_accepts_each_argument",)),
    Fault("M1", "methods: a schedule read at t = inf", "flows/_methods.py",
          "return jnp.minimum(jnp.asarray(t, dtype=jnp.float64), jnp.finfo(jnp.float64).max)",
          "return jnp.asarray(t, dtype=jnp.float64)",
          ("tests/test_regime_schedule.py::test_a_clock_past_its_cap_reads_the_schedules_limit",)),
    # --- the certificates
    Fault("C1", "certificate: escape at a_k > e/2", CERT,
          "escaped = jnp.any(a > bound)", "escaped = jnp.any(a > 0.5 * bound)", CERTIFY),
    Fault("C2", "certificate: no blow-up order at L >= 3", CERT,
          "later = mu[leader] * lower ** (depth - 2) >= mu * u ** (depth - 2)",
          "later = mu[leader] * lower ** (depth - 2) >= 0.0 * mu", CERTIFY),
    Fault("C3", "certificate: the leader's lead 10 % short", CERT,
          "ok = (lower >= u) & later", "ok = (lower >= 0.9 * u) & later", CERTIFY),
    Fault("C4", "certificate: trapped box 10 % wide", CERT,
          "return jnp.max(jnp.abs(theta), axis=0) < method.rho",
          "return jnp.max(jnp.abs(theta), axis=0) < 1.1 * method.rho", CERTIFY),
    # --- the pass policy
    Fault("P1", "decide: the shortcut before 'stalled'", POL,
          "    if need == \"escape\":\n        code = jnp.where(escaped, SEQUENTIAL, code)\n"
          "    elif need == \"direct\":\n"
          "        code = jnp.where(visited_other, SEQUENTIAL, code)\n"
          "    code = jnp.where(stalled, STALLED, code)\n",
          "    code = jnp.where(stalled, STALLED, code)\n"
          "    if need == \"escape\":\n        code = jnp.where(escaped, SEQUENTIAL, code)\n"
          "    elif need == \"direct\":\n"
          "        code = jnp.where(visited_other, SEQUENTIAL, code)\n",
          DECIDE),
    Fault("P2", "decide: a solver failure overrides the facts", POL,
          "(status == flows.Status.NONFINITE) & (code < 0)", "(status == flows.Status.NONFINITE)",
          DECIDE),
    Fault("P3", "decide: sigma_negative decided", POL,
          "code = jnp.where(status == flows.Status.SIGMA_NEGATIVE, UNDETERMINED, code)",
          "code = code", DECIDE),
    Fault("P4", "decide: the collapsed status ignored", POL,
          "(status == flows.Status.COLLAPSED) | trapped_all", "trapped_all", DECIDE),
    # --- the validators
    Fault("X1", "validator: devices not checked", "flows/_sweep/_executors.py",
          "bad = [d for d in devices if not isinstance(d, jax.Device)]", "bad = []",
          (REFUSALS + "test_sweep_devices_must_be_jax_devices",)),
    Fault("X2", "validator: workers uncapped", "flows/_many.py",
          'check_int("workers", workers, minimum=1, maximum=MAX_WORKERS)',
          'check_int("workers", workers, minimum=1)',
          (REFUSALS + "test_workers_beyond_the_cap_are_refused",)),
    Fault("X3", "validator: phase depth unlimited", "figures/_phase_cli.py",
          "    if top > limit:", "    if top > 10**9:",
          (REFUSALS + "test_phase_depth_beyond_float64_is_refused_at_once",
           REFUSALS + "test_phase_depth_limit_is_where_alpha_to_the_L_leaves_the_normal_range")),
    Fault("X4", "validator: TOML spellings not compared", "figures/_phase_cli.py",
          "        if twice:\n", "        if False:\n",
          (REFUSALS + "test_a_config_with_both_spellings_of_a_key_is_refused",)),
    Fault("X5", "validator: cache_dir type not checked", "flows/_sweep/_run.py",
          'check_type("cache_dir", cache_dir, (str, os.PathLike), accepted)', "del accepted",
          (REFUSALS + "test_cache_dir_that_is_not_a_path_is_named",)),
    Fault("X6", "validator: a sweep output of text not checked", "flows/_sweep/_chunk.py",
          "return _numeric_output(fn(**static_kw, **p, **extra))",
          "return fn(**static_kw, **p, **extra)",
          (REFUSALS + "test_sweep_of_a_function_returning_text_names_fn",)),
    Fault("X7", "validator: experiments out not checked", "experiments/_run.py",
          'out = check_folder("`out`", folder_path("`out`", out), create=True)',
          "out = Path(out)",
          (REFUSALS + "test_experiments_out_that_is_not_a_folder_is_named",)),
    Fault("X9", "report: the L = 2 cosine of l2-SAM printed as GD's", "experiments/_report.py",
          'f"{_txt(c1[gd])} (GD) and "', 'f"{_txt(c1[l2])} (GD) and "',
          ("tests/test_experiments.py::test_quick_command_end_to_end",)),
    Fault("X8", "validator: a non-finite scalar parameter let through", "flows/_validate.py",
          "    bad = ~xp.isfinite(value)\n", "    bad = xp.isnan(value) & False\n",
          ("tests/test_validate.py",)),
]


def _copy_tree(dest: Path) -> None:
    """The tracked and untracked (not ignored) files of the working tree, into ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run_fault(fault: Fault, tree: Path, numba_base: Path) -> tuple[str, float, str]:
    """Apply ``fault`` in ``tree``, run its tests, restore the file; (outcome, seconds, tail)."""
    path = tree / fault.path
    original = path.read_text()
    if fault.old not in original:
        return "STALE", 0.0, f"{fault.old!r} is not in {fault.path}"
    stat = path.stat()
    path.write_text(original.replace(fault.old, fault.new))
    fresh = fault.path.startswith(ENG) or fault.path in COMPILED_IN
    env = dict(os.environ, PYTHONPATH=str(tree), SAMFLOWS_MUTANT=fault.name)
    env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-") if fresh else str(numba_base)
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-x", "-p", "no:cacheprovider",
           "--no-header", *fault.tests]  # fmt: skip
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)  # fmt: skip
        code, tail = proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        code, tail = -1, [f"timed out after {TIMEOUT} s"]
    finally:
        path.write_text(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        if fresh:
            shutil.rmtree(env["NUMBA_CACHE_DIR"], ignore_errors=True)
    seconds = time.perf_counter() - start
    outcome = {0: "SURVIVED", 1: "killed"}.get(code, "ERROR")
    return outcome, seconds, " | ".join(tail)


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for f in FAULTS:
            print(f"{f.name:4s} {f.area}  [{f.path}]  -> {' '.join(f.tests)}")
        return 0
    by_name = {f.name: f for f in FAULTS}
    chosen = [by_name[n] for n in argv if n in by_name] if argv else FAULTS  # in argv's order
    unknown = set(argv) - {f.name for f in FAULTS}
    if unknown:
        print(f"unknown fault(s) {sorted(unknown)}; see --list", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="samflows-mutants-") as tmp:
        tree, numba_base = Path(tmp) / "tree", Path(tmp) / "numba"
        _copy_tree(tree)
        for fault in chosen:
            outcome, seconds, tail = run_fault(fault, tree, numba_base)
            results.append((fault, outcome))
            print(f"{fault.name:4s} {outcome:8s} {seconds:6.0f} s  {fault.area}", flush=True)
            if outcome in ("ERROR", "STALE"):
                print(f"     {tail}", flush=True)
    bad = [(f, o) for f, o in results if o != "killed"]
    print(f"\n{len(results)} faults: {len(results) - len(bad)} killed, {len(bad)} not")
    for f, o in bad:
        print(f"  {o}: {f.name} {f.area} ({f.path})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
