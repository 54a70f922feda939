"""flows._config: float64, the persistent compilation cache on by default, checked errors kept,
XLA:CPU's classic emitters where known."""

import json
import os
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import _config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh process: import flows, solve once, and report the cache folder JAX uses and the
# persistent-cache hits and misses JAX's monitoring recorded.
CHILD = textwrap.dedent(
    """
    import json, os, sys
    import jax
    counts = {}
    jax.monitoring.register_event_listener(
        lambda name, **kw: counts.__setitem__(name, counts.get(name, 0) + 1))
    import flows
    data = flows.single_example([1.0, 2.0])
    traj = flows.solve(flows.L2SAM(0.1), data, flows.balanced_init(0.5, 2, 2), t1=2.0,
                       rescaled=True)
    print(json.dumps({"dir": jax.config.jax_compilation_cache_dir,
                      "hits": counts.get("/jax/compilation_cache/cache_hits", 0),
                      "status": traj.status_name,
                      "flags": os.environ.get("XLA_FLAGS", ""),
                      "beta": flows.beta(traj.theta_end).tolist()}))
    """
)


def child(env, code=CHILD, *args):
    """Run ``code`` in a fresh process with ``env`` added (a value of None removes the name)."""
    env = {k: v for k, v in os.environ.items() if k != "SAMFLOWS_COMPILATION_CACHE"} | env
    env = {k: v for k, v in env.items() if v is not None}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cache_entries(folder):
    return sorted(p for p in os.listdir(folder) if p.startswith("jit_solve_smooth"))


def test_a_second_process_loads_the_solver_from_the_default_cache(tmp_path):
    """The default folder is $XDG_CACHE_HOME/samflows/jax; the solver's executable has no
    host callback (equinox's checks inside diffrax are traced as NaN), so JAX writes it,
    and a second process reads it instead of compiling."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    first = child(env)
    folder = tmp_path / "samflows" / "jax"
    assert {k: first[k] for k in ("dir", "hits", "status")} == {
        "dir": str(folder),
        "hits": 0,
        "status": "ok",
    }
    written = cache_entries(folder)
    assert len(written) == 1, os.listdir(folder)
    second = child(env)
    assert second["hits"] >= 1 and second["status"] == "ok"
    assert cache_entries(folder) == written  # read, not compiled and written again


FAST = "--xla_cpu_use_fusion_emitters=false --xla_cpu_max_isa=AVX"


@pytest.mark.parametrize(
    "flags, version, setting, machine, expected",
    [
        ("", "0.10.2", "", "x86_64", FAST),
        ("--xla_backend_optimization_level=0", "0.10.0", "on", "AMD64",
         f"--xla_backend_optimization_level=0 {FAST}"),
        ("--xla_cpu_use_fusion_emitters=true", "0.10.2", "", "x86_64",
         "--xla_cpu_use_fusion_emitters=true"),
        ("--xla_cpu_max_isa=AVX2", "0.10.2", "", "x86_64", "--xla_cpu_max_isa=AVX2"),
        ("", "0.10.2", "", "arm64", ""),  # an x86 instruction set cap means nothing there
        ("", "0.10.2", "", "aarch64", ""),
        ("", "0.11.0", "", "x86_64", ""),  # not checked: XLA aborts on a flag it does not know
        ("", "0.9.9", "", "x86_64", ""),
        ("", None, "", "x86_64", ""),
        ("", "0.10.dev", "", "x86_64", FAST),
        ("", "dev", "", "x86_64", ""),
        ("--a", "0.10.2", " OFF ", "x86_64", "--a"),
        ("", "0.10.2", "0", "x86_64", ""),
    ],
)  # fmt: skip
def test_fast_compile_flags_only_where_known_and_wanted(flags, version, setting, machine, expected):
    assert _config.fast_compile_flags(flags, version, setting, machine) == expected


def test_a_fresh_process_compiles_with_the_classic_emitters_and_the_same_answers(tmp_path):
    """Importing flows adds the flags on the jaxlib releases that know them, XLA accepts them
    (an unknown flag aborts the process), and the answers are those of XLA's default emitters
    to rounding (a different program: the classic emitters lay out the loops differently)."""
    from importlib import metadata

    release = tuple(int(x) for x in metadata.version("jaxlib").split(".")[:2])
    base = {"XLA_FLAGS": None, "SAMFLOWS_COMPILATION_CACHE": "off"}
    fast = child({**base, "SAMFLOWS_XLA_FAST_COMPILE": None})
    plain = child({**base, "SAMFLOWS_XLA_FAST_COMPILE": "off"})
    known = release in _config._FAST_COMPILE_JAXLIB and platform.machine() in ("x86_64", "AMD64")
    assert fast["flags"] == (FAST if known else "")
    assert plain["flags"] == "" and fast["status"] == plain["status"] == "ok"
    np.testing.assert_allclose(fast["beta"], plain["beta"], rtol=1e-13)


def test_the_switch_turns_the_cache_off(tmp_path):
    out = child({"SAMFLOWS_COMPILATION_CACHE": "off", "XDG_CACHE_HOME": str(tmp_path)})
    assert out["dir"] is None and not (tmp_path / "samflows").exists()


@pytest.mark.parametrize("value", ["off", "0", "False", "no", " NONE "])
def test_every_spelling_of_off_is_off(monkeypatch, tmp_path, value):
    monkeypatch.setenv("SAMFLOWS_COMPILATION_CACHE", value)
    assert _config.default_cache_dir() is None
    monkeypatch.setenv("SAMFLOWS_COMPILATION_CACHE", str(tmp_path / "on"))
    assert _config.default_cache_dir() == tmp_path / "on"


def test_the_switch_names_a_folder(tmp_path):
    out = child({"SAMFLOWS_COMPILATION_CACHE": str(tmp_path / "here")})
    assert out["dir"] == str(tmp_path / "here") and cache_entries(tmp_path / "here")


# A fresh process: one sweep with a cache_dir, then the folder JAX's cache uses.
SWEEP_CHILD = textwrap.dedent(
    """
    import json, sys
    import jax
    import flows
    r = flows.sweep(lambda x: {"y": 2.0 * x}, {"x": [1.0, 2.0]}, cache_dir=sys.argv[1],
                    progress=False)
    print(json.dumps({"dir": jax.config.jax_compilation_cache_dir, "y": r["y"].tolist()}))
    """
)


@pytest.mark.parametrize("case", ["default", "off", "unwritable home"])
def test_a_sweep_sets_the_cache_folder_only_where_none_is_chosen(tmp_path, case):
    """The folder ``import flows`` chose wins over the sweep's ``cache_dir/jax-cache``; the
    switch's ``off`` keeps the cache off through a sweep; only where flows could not set its
    folder (a cache home that is a file, not a folder) does the sweep use its own."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    if case == "off":
        env["SAMFLOWS_COMPILATION_CACHE"] = "off"
    if case == "unwritable home":
        (tmp_path / "xdg").write_text("a file where the cache home should be")
    out = child(env, SWEEP_CHILD, str(tmp_path / "sweeps"))
    assert out["y"] == [2.0, 4.0]
    expected = {
        "default": str(tmp_path / "xdg" / "samflows" / "jax"),
        "off": None,
        "unwritable home": str(tmp_path / "sweeps" / "jax-cache"),
    }[case]
    assert out["dir"] == expected
    assert (tmp_path / "sweeps" / "jax-cache").exists() == (case == "unwritable home")


def test_the_compilation_cache_is_configured_in_one_place():
    """Issue 13: no module of flows, analysis or figures but flows/_config.py sets JAX's
    compilation-cache options (benchmarks/compile.py measures the cache with its own)."""
    setters = sorted(
        os.path.relpath(path, ROOT)
        for package in ("flows", "analysis", "figures")
        for path in Path(ROOT, package).rglob("*.py")
        if re.search(
            r"config\.update\(\s*[\"']jax_(compilation_cache_dir|persistent_cache)",
            path.read_text(),
        )
    )
    assert setters == [os.path.join("flows", "_config.py")]


def test_checked_errors_still_raise_under_jit():
    """A traced radius < 0 and traced saving times out of order are refused at run time
    (equinox's raising checks, outside the solver), and equinox's mode is restored after a
    solve: a user's own check still raises."""
    data = flows.single_example([1.0, 2.0])
    theta0 = flows.balanced_init(0.5, 2, 2)

    @jax.jit
    def run(rho, ts):
        return flows.solve(flows.L2SAM(rho), data, theta0, t1=2.0, ts=ts, rescaled=True).t_end

    good = jnp.linspace(0.0, 2.0, 5)
    assert float(run(0.1, good)) > 0.0
    with pytest.raises(Exception, match="`rho` must be"):
        run(-0.1, good).block_until_ready()
    with pytest.raises(Exception, match="`ts` must be finite, non-decreasing"):
        run(0.1, good[::-1]).block_until_ready()
    with pytest.raises(Exception, match="`ts` must be finite, non-decreasing"):
        run(0.1, good + 1.0).block_until_ready()  # beyond t1

    from equinox import _errors

    assert _errors.EQX_ON_ERROR == "raise"
    with pytest.raises(Exception, match="user check"):
        jax.jit(lambda x: eqx.error_if(x, x > 0, "user check"))(1.0).block_until_ready()


def test_x64_is_on():
    assert flows.balanced_init(0.5, 2, 2).dtype == jnp.float64


# A fresh process compiles three solver configurations, then asks for the release with a
# fraction below what it maps: the compiled code must be unmapped (the region count,
# read by the child itself from /proc, falls by hundreds per configuration), the solver
# must still give the same answer, and a trace in progress must never be cleared.
RELEASE_CHILD = textwrap.dedent(
    """
    import json, jax, flows
    from flows import _config
    def regions():
        return sum(1 for _ in open("/proc/self/maps", "rb"))
    data = flows.single_example([1.0, 2.0, 3.0])
    def run(L):
        return flows.solve(flows.L2SAM(0.3), data, flows.balanced_init(0.2, L, 3), t1=5.0,
                           rescaled=True).thetas[-1]
    start = regions()
    first = run(2)
    for L in (3, 4):
        run(L)
    full = regions()
    jax.jit(lambda x: x + _config.release_compiled_when_crowded(0.0, 0))(1.0)  # traced: no
    untouched = regions()
    kept = _config.release_compiled_when_crowded(1.0, 0)  # under the fraction: no
    cleared = _config.release_compiled_when_crowded(0.0, 0)
    after = regions()
    again = run(2)
    print(json.dumps({"start": start, "full": full, "untouched": untouched, "after": after,
                      "kept": kept,
                      "cleared": cleared, "same": bool((again == first).all())}))
    """
)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_release_unmaps_compiled_code_and_keeps_answers(tmp_path):
    env = dict(os.environ, SAMFLOWS_COMPILATION_CACHE="off")
    out = child(env, RELEASE_CHILD)
    assert out["cleared"] and not out["kept"] and out["same"]
    assert out["untouched"] >= out["full"] - 5  # nothing released inside the trace
    # three configurations were mapped (about 170 regions each with XLA:CPU's classic
    # emitters, 430 with its fusion emitters); at least 80 % of what they mapped goes
    mapped = out["full"] - out["start"]
    assert mapped > 300 and out["after"] - out["start"] < 0.2 * mapped, out


def test_release_counts_compilations_before_reading_the_region_count(monkeypatch):
    reads = []
    monkeypatch.setattr(_config, "_map_counts", lambda: reads.append(1) or (10, 100))
    monkeypatch.setitem(_config._COMPILES, "since_check", 0)
    assert not _config.release_compiled_when_crowded(0.5, every=3)  # no compilation yet
    jax.jit(lambda x: x * 3.25 + 1.0)(jnp.arange(7.0))  # a new executable: one count
    assert _config._COMPILES["since_check"] >= 1 and not reads
    monkeypatch.setitem(_config._COMPILES, "since_check", 3)
    assert not _config.release_compiled_when_crowded(0.5, every=3)  # 10 of 100: kept
    assert reads == [1] and _config._COMPILES["since_check"] == 0
