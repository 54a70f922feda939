"""flows._config: ``import flows`` changes no global setting but float64; ``flows.configure()``
turns on the persistent compilation cache, XLA:CPU's classic emitters where known, the solvers'
checks traced as NaN and the compilation counter; checked errors are kept."""

import json
import os
import platform
import re
import subprocess
import sys
import textwrap
import warnings
from importlib import metadata
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from flows import _config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh process: import and configure flows, solve once, and report the cache folder JAX uses
# and the persistent-cache hits and misses JAX's monitoring recorded.
CHILD = textwrap.dedent(
    """
    import json, os, sys
    import jax
    counts = {}
    jax.monitoring.register_event_listener(
        lambda name, **kw: counts.__setitem__(name, counts.get(name, 0) + 1))
    import flows
    flows.configure()
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
    """configure()'s default folder is $XDG_CACHE_HOME/samflows/jax; the solver's executable has no
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
    """flows.configure() adds the flags on the jaxlib releases that know them, XLA accepts them
    (an unknown flag aborts the process), and the answers are those of XLA's default emitters
    to rounding (a different program: the classic emitters lay out the loops differently)."""
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


# A fresh process: one sweep with a cache_dir (after flows.configure() unless argv[2] says
# "bare"), then the folder JAX's cache uses.
SWEEP_CHILD = textwrap.dedent(
    """
    import json, sys
    import jax
    import flows
    if sys.argv[2] != "bare":
        flows.configure()
    r = flows.sweep(lambda x: {"y": 2.0 * x}, {"x": [1.0, 2.0]}, cache_dir=sys.argv[1],
                    progress=False)
    print(json.dumps({"dir": jax.config.jax_compilation_cache_dir, "y": r["y"].tolist()}))
    """
)


@pytest.mark.parametrize("case", ["default", "off", "unwritable home", "not configured"])
def test_a_sweep_sets_the_cache_folder_only_where_none_is_chosen(tmp_path, case):
    """The folder ``flows.configure()`` chose wins over the sweep's ``cache_dir/jax-cache``; the
    switch's ``off`` keeps the cache off through a sweep; only where no folder was chosen (a
    cache home that is a file, not a folder, or flows not configured) does the sweep use its
    own."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    if case == "off":
        env["SAMFLOWS_COMPILATION_CACHE"] = "off"
    if case == "unwritable home":
        (tmp_path / "xdg").write_text("a file where the cache home should be")
    bare = "bare" if case == "not configured" else "configured"
    out = child(env, SWEEP_CHILD, str(tmp_path / "sweeps"), bare)
    assert out["y"] == [2.0, 4.0]
    own = str(tmp_path / "sweeps" / "jax-cache")
    expected = {
        "default": str(tmp_path / "xdg" / "samflows" / "jax"),
        "off": None,
        "unwritable home": own,
        "not configured": own,
    }[case]
    assert out["dir"] == expected
    assert (tmp_path / "sweeps" / "jax-cache").exists() == (expected == own)
    assert not (tmp_path / "xdg" / "samflows").exists() or case == "default"


# A mention of JAX's compilation-cache options or of its cache module, in any form: a
# config.update key, an attribute assignment, a key held in a variable, or the module's setter.
CACHE_SETTING = re.compile(
    r"\bjax_(enable_compilation_cache|compilation_cache\w*|persistent_cache\w*)\b"
    r"|\bcompilation_cache\.\w+|\bset_cache_dir\b"
)


@pytest.mark.parametrize(
    "source",
    [
        'jax.config.update("jax_compilation_cache_dir", d)',
        "jax.config.update('jax_enable_compilation_cache', True)",
        "jax.config.jax_compilation_cache_dir = d",
        'KEY = "jax_persistent_cache_min_compile_time_secs"\njax.config.update(KEY, 0)',
        "from jax.experimental import compilation_cache\ncompilation_cache.set_cache_dir(d)",
        "from jax.experimental.compilation_cache.compilation_cache import set_cache_dir",
    ],
)
def test_the_cache_setting_detector_sees_every_form(source):
    assert CACHE_SETTING.search(source)


def test_the_compilation_cache_is_configured_in_one_place():
    """No module of flows, analysis or figures but flows/_config.py sets JAX's compilation-cache
    options (`benchmarks/cold_start.py cache` measures the cache with its own); calling the one
    helper (``enable_compilation_cache``) is not a setting."""
    setters = sorted(
        os.path.relpath(path, ROOT)
        for package in ("flows", "analysis", "figures")
        for path in Path(ROOT, package).rglob("*.py")
        if CACHE_SETTING.search(path.read_text())
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


# A fresh process: every global setting flows could touch, before ``import flows``, after it
# (and after importing analysis and figures), after ``flows.configure()`` and after a second
# call. JAX's list of monitoring listeners is read from its internals: no public API lists it.
PURE_CHILD = textwrap.dedent(
    """
    import json, logging, os
    from equinox import _errors
    import jax
    from jax._src import monitoring

    def state():
        return {"environ": dict(os.environ),
                "cache_dir": jax.config.jax_compilation_cache_dir,
                "min_secs": jax.config.jax_persistent_cache_min_compile_time_secs,
                "cache_on": jax.config.jax_enable_compilation_cache,
                "x64": jax.config.jax_enable_x64,
                "eqx": _errors.EQX_ON_ERROR,
                "listeners": len(monitoring.get_event_duration_listeners()),
                "log_filters": len(logging.getLogger("jax._src.callback").filters)}

    states = [state()]
    import flows, analysis, figures
    from flows._jax_internals import backend_started
    states.append(state())
    started = backend_started()
    flows.configure()
    states.append(state())
    flows.configure()
    states.append(state())
    print(json.dumps({"states": states, "started": started,
                      "configuration": flows._config.configuration()}))
    """
)


def test_import_changes_only_x64_and_configure_sets_what_it_documents(tmp_path):
    sentinel = "--xla_backend_optimization_level=0"  # a real flag: XLA aborts on unknown ones
    env = {"XLA_FLAGS": sentinel, "XDG_CACHE_HOME": str(tmp_path), "EQX_ON_ERROR": None,
           "SAMFLOWS_XLA_FAST_COMPILE": None}  # fmt: skip
    out = child(env, PURE_CHILD)
    before, imported, configured, again = out["states"]
    assert before["environ"]["XLA_FLAGS"] == sentinel and not before["x64"]
    # import: x64 on, and nothing else changed; XLA not started (configure can still set flags)
    assert imported == {**before, "x64": True}
    assert out["started"] is False
    # configure(): as documented
    names = set(before["environ"]) | set(configured["environ"])
    assert {k for k in names if before["environ"].get(k) != configured["environ"].get(k)} <= {
        "XLA_FLAGS"
    }
    assert configured["environ"]["XLA_FLAGS"] == _config.fast_compile_flags(
        sentinel, metadata.version("jaxlib")
    )
    assert configured["cache_dir"] == str(tmp_path / "samflows" / "jax")
    assert configured["min_secs"] == 0.3 and configured["cache_on"]
    assert configured["listeners"] == before["listeners"] + 1  # the compilation counter
    assert configured["eqx"] == "raise"  # switched only while a solver is traced
    assert configured["log_filters"] == before["log_filters"]
    assert again == configured  # a second call changes nothing
    assert out["configuration"] == dict.fromkeys(_config._PARTS, True)


def test_configure_after_xla_started_warns_and_leaves_xla_flags(monkeypatch):
    """XLA has started in the test process: the flags could no longer take effect, so they are
    not set and a warning says so, once; the other settings are still applied."""
    monkeypatch.setattr(_config, "_APPLIED", {})  # as if flows.configure() had not been called
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    monkeypatch.setattr(_config, "fast_compile_flags", lambda flags, *_: f"{flags} --xla_new")
    jnp.zeros(1).block_until_ready()
    with pytest.warns(RuntimeWarning, match="XLA has already started.*xla_flags=False"):
        flows.configure(compilation_cache=False, release_when_crowded=False)
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=0"
    # recorded as not in effect: a sweep's workers then compute as this process does
    assert _config._APPLIED == {"xla_flags": False, "cacheable_checks": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flows.configure(compilation_cache=False, release_when_crowded=False)  # applied: silent


@pytest.mark.parametrize(
    "kwargs, name",
    [({"xla_flags": 1}, "xla_flags"), ({"compilation_cache": 3}, "compilation_cache"),
     ({"compilation_cache": ""}, "compilation_cache"),
     ({"release_when_crowded": None}, "release_when_crowded"),
     ({"cacheable_checks": "yes"}, "cacheable_checks")],
)  # fmt: skip
def test_configure_refuses_keywords_of_the_wrong_type(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}` must be"):
        flows.configure(**kwargs)


# A fresh process compiles three solver configurations, then asks for the release with a
# fraction below what it maps: the compiled code must be unmapped (the region count,
# read by the child itself from /proc, falls by hundreds per configuration), the solver
# must still give the same answer, and a trace in progress must never be cleared.
RELEASE_CHILD = textwrap.dedent(
    """
    import json, jax, flows
    from flows import _config
    flows.configure(compilation_cache=False)
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
