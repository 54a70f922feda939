"""The sweep engine: agreement with direct solves, static parameters, failed points,
the cache (hit, miss on any configuration change) and resume after a killed process.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import flows

MU = jnp.array([1.0, 2.0, 3.0])
DATA = flows.single_example(MU)
TS = jnp.linspace(0.0, 8.0, 9)


def point(alpha, rho):
    """Rescaled ℓ2-SAM flow at L = 2, reduced to a few small arrays."""
    traj = flows.solve(
        flows.L2SAM(rho), DATA, flows.balanced_init(alpha, 2, 3), t1=8.0, ts=TS, rescaled=True
    )
    return {"status": traj.status, "t_end": traj.t_end, "beta": traj.beta}


ALPHAS = np.array([0.02, 0.2, 1.0])
RHOS = np.array([0.1, 0.5])


@pytest.fixture(scope="module")
def small_sweep():
    return flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, chunk_size=4, progress=False)


def test_grid_shape_and_agreement_with_direct_solves(small_sweep):
    r = small_sweep
    assert r["status"].shape == (3, 2)
    assert r["beta"].shape == (3, 2, 9, 3)
    assert not r["failed"].any()
    assert r.n_chunks == 2  # 6 points in chunks of 4, the last one padded
    for i, j in [(0, 1), (2, 0), (1, 1)]:
        traj = flows.solve(
            flows.L2SAM(RHOS[j]),
            DATA,
            flows.balanced_init(ALPHAS[i], 2, 3),
            t1=8.0,
            ts=TS,
            rescaled=True,
        )
        assert r["status"][i, j] == traj.status
        np.testing.assert_allclose(r["t_end"][i, j], traj.t_end, rtol=1e-12)
        np.testing.assert_allclose(r["beta"][i, j], traj.beta, rtol=1e-10, equal_nan=True)
    # both regimes appear, so the spot checks cover collapse and escape
    assert {int(flows.Status.COLLAPSED), int(flows.Status.ESCAPED)} <= set(r["status"].ravel())


@pytest.mark.parametrize("workers", [1, 2])
def test_order_chunking_and_workers_do_not_change_results(small_sweep, workers):
    r = flows.sweep(
        point,
        {"alpha": ALPHAS, "rho": RHOS},
        chunk_size=2,
        order=lambda p: -p["alpha"] / p["rho"],
        workers=workers,
        progress=False,
    )
    assert r.n_computed == r.n_chunks > workers  # the threads share several chunks
    for name in ("status", "t_end", "beta"):
        np.testing.assert_array_equal(r[name], small_sweep[name])


def test_workers_validation():
    with pytest.raises(ValueError, match="`workers`"):
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, workers=0, progress=False)


def test_the_executor_is_checked_once_where_it_is_given(monkeypatch):
    """executor, workers and devices are checked by flows.SweepOptions (the edge), and the
    sweep makes its executor from the checked values without checking them again."""
    import importlib

    run = importlib.import_module("flows._sweep._run")
    calls = []
    check = run.check_executor
    monkeypatch.setattr(run, "check_executor", lambda *a: calls.append(a) or check(*a))
    r = flows.sweep(lambda a: {"y": 3.0 * a}, {"a": [1.0, 2.0]}, workers=1, progress=False)
    np.testing.assert_array_equal(r["y"], [3.0, 6.0])
    assert calls == [(None, 1, None)]
    with pytest.raises(ValueError, match="`executor` must be one of"):
        flows.SweepOptions(executor="processes")


def test_static_parameters_compile_separately():
    def depth_point(depth, alpha):
        theta = flows.balanced_init(alpha, depth, 3)
        return {"v": flows.rescaled_velocity(flows.L2SAM(0.1), DATA, "logistic", theta)}

    r = flows.sweep(depth_point, {"alpha": [0.3, 0.5]}, static={"depth": [1, 2, 3]}, progress=False)
    assert r["v"].shape == (3, 2, 3, 3)  # (depth, alpha, L padded to 3, d)
    for k, depth in enumerate([1, 2, 3]):
        for i, alpha in enumerate([0.3, 0.5]):  # every cell: a swapped axis is caught
            v = flows.rescaled_velocity(
                flows.L2SAM(0.1), DATA, "logistic", flows.balanced_init(alpha, depth, 3)
            )
            np.testing.assert_allclose(r["v"][k, i, :depth], v, rtol=1e-14)
            assert np.isnan(r["v"][k, i, depth:]).all()


def test_separate_sweeps_of_one_function_use_their_own_static_values():
    """A compiled chunk function is reused across sweeps only for the same static values."""

    def scaled(x, k):
        return {"y": x * k}

    x = np.array([1.0, 2.0])
    for k in (2, 3):
        r = flows.sweep(scaled, {"x": x}, static={"k": [k]}, progress=False)
        np.testing.assert_array_equal(r["y"][0], k * x)


def test_vector_parameters_and_zip_grids():
    def mu_point(mu, alpha):
        data = flows.Dataset(mu[None, :], jnp.ones(1))
        return {
            "grad": flows.velocity(flows.GD(), data, "logistic", flows.balanced_init(alpha, 2, 2))
        }

    mus = np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 1.0]])
    r = flows.sweep(mu_point, {"mu": mus, "alpha": [0.1, 0.2, 0.3]}, product=False, progress=False)
    assert r["grad"].shape == (3, 2, 2)
    # Zipped, row k pairs mus[k] with alphas[k]. GD at L = 2 from w = α: the margin is
    # m = α²Σμ and -∂L/∂w_j^{(l)} = σ(-m) μ_j α in both layers (σ the logistic sigmoid).
    for k, alpha in enumerate([0.1, 0.2, 0.3]):
        want = mus[k] * alpha / (1.0 + np.exp(alpha**2 * mus[k].sum()))
        np.testing.assert_allclose(r["grad"][k], [want, want], rtol=1e-14)


def test_one_failing_point_does_not_kill_the_sweep(capfd):
    def fragile(x):
        x = eqx.error_if(x, x == 3.0, "bad point")
        return {"y": 2.0 * x, "n": jnp.asarray(1)}

    r = flows.sweep(fragile, {"x": np.arange(8.0)}, chunk_size=4, progress=False)
    assert r["failed"].tolist() == [False, False, False, True, False, False, False, False]
    assert np.isnan(r["y"][3]) and r["n"][3] == -1
    np.testing.assert_array_equal(np.delete(r["y"], 3), 2.0 * np.delete(np.arange(8.0), 3))
    # One line on stderr for the failed point (issue 15: not a traceback per bisection
    # step); the full message, with its traceback, in the manifest.
    err = capfd.readouterr().err.strip().splitlines()
    assert err == ["flows.sweep: point #3 (x=3.0) failed: _EquinoxRuntimeError: bad point"]
    [entry] = r.manifest["errors"]
    assert (entry["index"], entry["static"]) == (3, 0)
    assert "bad point" in entry["error"] and "Traceback" in entry["detail"]


def test_cache_hit_miss_and_reload(tmp_path):
    kw = dict(chunk_size=4, cache_dir=tmp_path, progress=False, compile_cache=False)
    first = flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, **kw)
    assert (first.n_computed, first.n_cached) == (2, 0)
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["complete"] and manifest["seed"] == 0
    assert manifest["code_version"]["flows_source_sha256"]
    assert manifest["package_versions"]["jax"] and manifest["package_versions"]["diffrax"]
    assert manifest["config"]["params"]["alpha"] == ALPHAS.tolist()

    again = flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, **kw)  # hit
    assert again.n_computed == 0 and again.path == first.path
    np.testing.assert_array_equal(again["beta"], first["beta"])
    reloaded = flows.load_sweep(first.path)  # redraw without recomputing
    np.testing.assert_array_equal(reloaded["t_end"], first["t_end"])

    # Any change of configuration is a miss: grid values, seed, config, the function.
    misses = [
        flows.sweep(point, {"alpha": ALPHAS * 1.01, "rho": RHOS}, **kw),
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, seed=1, **kw),
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, config={"note": "x"}, **kw),
    ]
    scale = 3.0  # a closure constant, invisible in the grid

    def scaled(alpha, rho):
        return {"t_end": scale * alpha + rho}

    misses.append(flows.sweep(scaled, {"alpha": ALPHAS, "rho": RHOS}, **kw))
    scale = 2.0
    misses.append(flows.sweep(scaled, {"alpha": ALPHAS, "rho": RHOS}, **kw))
    paths = {first.path} | {m.path for m in misses}
    assert len(paths) == 1 + len(misses)
    assert all(m.n_computed == m.n_chunks and m.n_cached == 0 for m in misses)
    assert not np.allclose(misses[-1]["t_end"], misses[-2]["t_end"], equal_nan=True)


RESUMABLE = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import jax, jax.numpy as jnp, numpy as np
    import flows

    # Ctrl-C as in a terminal, whatever this process inherited from the test's worker (a
    # child inherits an ignored or blocked SIGINT, and then finished the sweep unhindered)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)

    DATA = flows.single_example([1.0, 2.0])
    CALLS, LOCK = [], threading.Lock()

    def slow(x):
        # The first two chunks finish; later ones wait (at most 60 s) for the file
        # argv[2], which the test writes after it interrupted the run: it cannot finish
        # first, however slowly the test polls (a rerun finds the file and waits not).
        with LOCK:
            CALLS.append(1)
            n = len(CALLS)
        deadline = time.monotonic() + 60
        while n > 2 and not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
            time.sleep(0.02)
        return x

    def point(alpha, rho):
        traj = flows.solve(flows.L2SAM(rho), DATA, flows.balanced_init(alpha, 2, 2), t1=3.0,
                           rescaled=True)
        t_end = jax.pure_callback(slow, jax.ShapeDtypeStruct((), jnp.float64), traj.t_end,
                                  vmap_method="expand_dims")
        return {"status": traj.status, "t_end": t_end}

    r = flows.sweep(point, {"alpha": np.linspace(0.05, 1.0, 6), "rho": [0.2, 0.6]},
                    chunk_size=2, cache_dir=sys.argv[1], progress=False,
                    key="slow point, the lock only paces it")  # the lock is not described
    print(json.dumps({"computed": r.n_computed, "cached": r.n_cached, "chunks": r.n_chunks,
                      "t_end": r["t_end"].tolist()}))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill", "ctrl-c"])
def test_interrupted_sweep_resumes_without_recomputing(tmp_path, sig):
    script = tmp_path / "run.py"
    script.write_text(RESUMABLE)
    cache = tmp_path / "cache"
    release = tmp_path / "release"
    cmd = [sys.executable, str(script), str(cache), str(release)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 90
    done = []
    while time.monotonic() < deadline and proc.poll() is None:
        done = list(cache.glob("*/chunks/*.npz"))
        if len(done) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
    proc.send_signal(sig)
    release.touch()  # Ctrl-C: the running chunks finish and are cached; the queued are not
    proc.communicate(timeout=60)
    inherited = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
    assert proc.returncode != 0, inherited
    finished = len(list(cache.glob("*/chunks/*.npz")))
    assert 2 <= finished < 6  # interrupted partway: some chunks cached, not all

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report["chunks"] == 6
    assert report["cached"] == finished  # every finished chunk was reused ...
    assert report["computed"] == 6 - finished  # ... and only the others were computed

    full = flows.sweep(
        lambda alpha, rho: {
            "t_end": flows.solve(
                flows.L2SAM(rho),
                flows.single_example([1.0, 2.0]),
                flows.balanced_init(alpha, 2, 2),
                t1=3.0,
                rescaled=True,
            ).t_end
        },
        {"alpha": np.linspace(0.05, 1.0, 6), "rho": [0.2, 0.6]},
        progress=False,
    )
    np.testing.assert_allclose(report["t_end"], full["t_end"], rtol=1e-12)


def _damage(path, how):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(b"not a zip file" * 10)
    elif how == "flipped":  # a valid zip layout whose data no longer match their CRC-32
        with zipfile.ZipFile(path) as zf:  # the largest member, one byte of its array data
            info = max(zf.infolist(), key=lambda m: m.file_size)
        at = info.header_offset  # local header: 30 bytes, then the name and the extra field
        start = at + 30 + int.from_bytes(data[at + 26 : at + 28], "little")
        start += int.from_bytes(data[at + 28 : at + 30], "little")
        if info.compress_type == zipfile.ZIP_STORED:  # skip the .npy magic, version, header
            wide = data[start + 6] >= 2  # .npy version 2+: a 4-byte header length
            size = 4 if wide else 2
            start += 8 + size + int.from_bytes(data[start + 8 : start + 8 + size], "little")
        path.write_bytes(data[:start] + bytes([data[start] ^ 0xFF]) + data[start + 1 :])
        with zipfile.ZipFile(path) as zf:  # the layout still reads; only that member's CRC fails
            assert zf.testzip() == info.filename


def test_damaged_chunk_files_are_reported_once_and_recomputed(tmp_path, capfd):
    kw = dict(chunk_size=1, cache_dir=tmp_path, progress=False, compile_cache=False)
    grid = {"alpha": ALPHAS, "rho": RHOS}
    first = flows.sweep(point, grid, **kw)
    (first.path / "result.npz").unlink()
    chunks = sorted((first.path / "chunks").glob("*.npz"))
    assert len(chunks) == 6
    kinds = ["truncated", "empty", "garbage", "flipped"]
    for path, how in zip(chunks, kinds, strict=False):
        _damage(path, how)
    capfd.readouterr()
    again = flows.sweep(point, grid, **kw)
    assert (again.n_computed, again.n_cached) == (4, 2)
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all("damaged chunk file" in line for line in lines)
    assert sorted(p.name for p in chunks[:4]) == sorted(
        next(p.name for p in chunks if p.name in line) for line in lines
    )
    for name in first.out:
        assert np.array_equal(again[name], first[name], equal_nan=True), name
    third = flows.sweep(point, grid, **kw)  # repaired: nothing reported, nothing computed
    assert third.n_computed == 0 and capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "how", ["truncated", "empty", "flipped", "no manifest", "manifest {}", "no result"]
)
def test_damaged_result_names_the_folder_and_is_recomputed(tmp_path, capfd, how):
    kw = dict(chunk_size=4, cache_dir=tmp_path, progress=False, compile_cache=False)
    grid = {"alpha": ALPHAS, "rho": RHOS}
    first = flows.sweep(point, grid, **kw)
    folder = first.path
    if how == "no manifest":
        (folder / "manifest.json").unlink()
    elif how == "manifest {}":
        (folder / "manifest.json").write_text("{}")
    elif how == "no result":
        (folder / "result.npz").unlink()
    else:
        _damage(folder / "result.npz", how)
    with pytest.raises(ValueError, match=f"`path` '{folder}' is not a finished, intact sweep"):
        flows.load_sweep(folder)
    capfd.readouterr()
    again = flows.sweep(point, grid, **kw)  # rebuilt from the intact chunk files
    assert (again.n_computed, again.n_cached) == (0, 2)
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == (0 if how == "no result" else 1)
    for name in first.out:
        assert np.array_equal(flows.load_sweep(folder)[name], first[name], equal_nan=True)


def clash(x):
    """A per-point function whose output name the sweep reserves."""
    return {"y": x, "failed": x > 1}


def check_reserved_name_is_raised_before_any_chunk(tmp_path, **kw):
    """A reserved output name is the user's error, raised before any chunk runs (issue 15)."""
    with pytest.raises(ValueError, match=r"`fn` must not return outputs named \['failed'\]"):
        flows.sweep(
            clash,
            {"x": np.arange(8.0)},
            chunk_size=2,
            cache_dir=tmp_path,
            progress=False,
            compile_cache=False,
            **kw,
        )
    assert not list(tmp_path.glob("*/chunks/*.npz"))  # no chunk ran


def test_reserved_output_names_are_the_users_error_before_any_chunk(tmp_path):
    check_reserved_name_is_raised_before_any_chunk(tmp_path)


@pytest.mark.parametrize("budget", [-1, 0, 1.5, True, "1GB"])
def test_memory_budget_validation(budget):
    with pytest.raises(ValueError, match="`memory_budget` must be an integer >= 1 or None"):
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, memory_budget=budget, progress=False)


def test_code_version_covers_every_file_of_the_sweep_package(tmp_path):
    import shutil

    shutil.copytree(
        os.path.dirname(flows.__file__), tmp_path / "flows", ignore=shutil.ignore_patterns("*.pyc")
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    # One child process edits every source file of its copy of flows in turn (the sweep
    # package and beside it) and reads the version after each edit.
    script = textwrap.dedent(
        """
        import json, pathlib
        from flows._sweep._key import code_version as v
        root = pathlib.Path("flows")
        seen = [v()["flows_source_sha256"]]
        for path in sorted(root.rglob("*.py")):
            with open(path, "a") as fh:
                fh.write("\\n# an edit\\n")
            v.cache_clear()  # read once per process otherwise
            seen.append(v()["flows_source_sha256"])
        print(json.dumps(seen))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    n_files = len(list((tmp_path / "flows").rglob("*.py")))
    assert n_files >= 20 and len(seen) == n_files + 1
    assert len(set(seen)) == len(seen)  # every edit changes it


def test_cache_dir_that_cannot_be_a_folder_is_a_named_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="`cache_dir` must be a folder this process can write"):
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, cache_dir=blocker, progress=False)


def test_sweep_internals_are_not_in_the_flows_namespace():
    """Issue 13: the sweep's chunk-sizing helpers are internal (flows._sweep), not flows.*."""
    for name in ("usable_cores", "default_chunk", "chunk_efficiency", "default_memory_budget"):
        assert not hasattr(flows, name), name
    assert {"sweep", "load_sweep", "SweepResult"} <= set(dir(flows))
