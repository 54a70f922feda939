"""The sweep on a Dask cluster (issue 13): the same answers, key and cache as the thread
runner; a killed worker, a killed client; bad executors and unusable cache folders.

One 2-worker ``LocalCluster`` of spawned single-threaded processes serves the module.
"""

import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

# Not skipped when missing: dask[distributed] is in the `test` extra, so its absence is a failure.
import distributed
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flows
from tests.helpers import l2sam_limit
from tests.test_sweep import (
    ALPHAS,
    DATA,
    RHOS,
    TS,
    check_reserved_name_is_raised_before_any_chunk,
    point,
)

BAD = (0.2, 0.5)  # (alpha, rho) of the deliberately failing point


@pytest.fixture(scope="module")
def client():
    """A plain 2-worker cluster, as a user would start it (the sweep sets up XLA itself)."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=120)
        yield c
    cluster.close()


def fragile_point(alpha, rho):
    """``point``, except at BAD where an equinox check raises (a point failure)."""
    alpha = eqx.error_if(alpha, (alpha == BAD[0]) & (rho == BAD[1]), "deliberate failure")
    return point(alpha, rho)


def _sleep(x):
    time.sleep(0.4)
    return x


def slow_point(alpha, rho):
    """``point`` that takes ≥ 0.4 s per chunk, so a test can act while the sweep runs."""
    out = point(alpha, rho)
    spec = jax.ShapeDtypeStruct((), jnp.float64)
    out["t_end"] = jax.pure_callback(_sleep, spec, out["t_end"], vmap_method="expand_dims")
    return out


def assert_same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert np.array_equal(a[name], b[name], equal_nan=True), name


def _whoami():
    import psutil

    return " ".join(psutil.Process().cmdline()), os.environ.get("XLA_FLAGS", ""), flows.__file__


def test_workers_are_spawned_single_threaded_and_import_this_tree(client):
    flows.sweep(lambda x: {"y": x}, {"x": [1.0]}, executor=client, progress=False)
    info = client.run(_whoami)
    assert len(info) == 2
    for cmdline, flags, path in info.values():
        assert "spawn_main" in cmdline  # started by multiprocessing's spawn, not a fork
        assert "intra_op_parallelism_threads=1" in flags
        assert path == flows.__file__


def test_dask_equals_threads_bit_for_bit(client, tmp_path, capfd):
    grid = {"alpha": ALPHAS, "rho": RHOS}
    kw = dict(chunk_size=2, progress=False, compile_cache=False)
    threads = flows.sweep(fragile_point, grid, cache_dir=tmp_path / "t", **kw)
    capfd.readouterr()
    dask = flows.sweep(fragile_point, grid, cache_dir=tmp_path / "d", executor=client, **kw)
    assert_same(threads.out, dask.out)
    # the grid holds collapses, escapes and exactly the one failing point
    status = dask["status"]
    assert {int(flows.Status.COLLAPSED), int(flows.Status.ESCAPED)} <= set(status.ravel())
    failed = np.zeros((3, 2), bool)
    failed[1, 1] = True
    assert np.array_equal(dask["failed"], failed)
    assert np.isnan(dask["t_end"][1, 1]) and status[1, 1] == -1
    err = capfd.readouterr().err.strip().splitlines()
    line = "point #3 (alpha=0.2, rho=0.5) failed: _EquinoxRuntimeError: deliberate failure"
    assert err == [f"flows.sweep: {line}"]
    # independent values: direct solves at the points that did not fail
    for i, j in [(0, 0), (2, 1), (1, 0)]:
        traj = flows.solve(
            flows.L2SAM(RHOS[j]),
            DATA,
            flows.balanced_init(ALPHAS[i], 2, 3),
            t1=8.0,
            ts=TS,
            rescaled=True,
        )
        assert dask["status"][i, j] == traj.status
        np.testing.assert_allclose(dask["t_end"][i, j], traj.t_end, rtol=1e-12)
    # the same key and configuration; only the executor differs in the manifests
    mt, md = (json.loads((r.path / "manifest.json").read_text()) for r in (threads, dask))
    assert threads.path.name == dask.path.name == mt["key"] == md["key"]
    assert (mt["executor"]["kind"], md["executor"]["kind"]) == ("threads", "dask")
    assert md["executor"]["workers"] == 2
    for name in ("config", "seed", "code_version", "package_versions", "chunk_size"):
        assert mt[name] == md[name], name
    # the failure is recorded alike (its traceback's frames differ: thread or worker)
    [et], [ed] = mt["errors"], md["errors"]
    assert et.pop("detail").endswith(ed.pop("detail")[-300:]) and et == ed


def test_killed_worker_is_replaced_and_nothing_is_lost(client, tmp_path):
    grid = {"alpha": np.linspace(0.05, 1.0, 8), "rho": RHOS}
    reference = flows.sweep(point, grid, chunk_size=2, progress=False)
    pids = list(client.run(os.getpid).values())
    killed = {}

    def kill_one_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = list(tmp_path.glob("*/chunks/*.npz"))
            if done:
                killed["chunks_done"] = len(done)
                os.kill(pids[0], signal.SIGKILL)
                killed["pid"] = pids[0]
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    r = flows.sweep(
        slow_point,
        grid,
        chunk_size=2,
        cache_dir=tmp_path,
        executor=client,
        progress=False,
        compile_cache=False,
    )
    killer.join()
    assert killed["pid"] == pids[0] and killed["chunks_done"] < r.n_chunks == 8
    assert r.n_computed == 8 and not r["failed"].any()
    assert_same(reference.out, r.out)
    client.wait_for_workers(2, timeout=120)  # the nanny restarts the killed worker
    assert pids[0] not in client.run(os.getpid).values()


def test_started_on_threads_finished_on_the_cluster(client, tmp_path):
    grid = {"alpha": ALPHAS, "rho": RHOS}
    kw = dict(chunk_size=2, cache_dir=tmp_path, progress=False, compile_cache=False)
    full = flows.sweep(point, grid, **kw)
    # a thread run stopped after one chunk: its result and two chunk files never written
    (full.path / "result.npz").unlink()
    chunks = sorted((full.path / "chunks").glob("*.npz"))
    for path in chunks[1:]:
        path.unlink()
    rest = flows.sweep(point, grid, executor=client, **kw)
    assert rest.path == full.path  # the same key
    assert (rest.n_cached, rest.n_computed) == (1, 2)
    assert rest.manifest["executor"]["kind"] == "dask"
    assert_same(full.out, rest.out)


RESUMABLE = textwrap.dedent(
    """
    import json, sys, time
    import jax, jax.numpy as jnp, numpy as np
    import flows

    DATA = flows.single_example([1.0, 2.0])

    def slow(x):
        time.sleep(0.5)
        return x

    def point(alpha, rho):
        traj = flows.solve(flows.L2SAM(rho), DATA, flows.balanced_init(alpha, 2, 2), t1=3.0,
                           rescaled=True)
        t_end = jax.pure_callback(slow, jax.ShapeDtypeStruct((), jnp.float64), traj.t_end,
                                  vmap_method="expand_dims")
        return {"status": traj.status, "t_end": t_end}

    if __name__ == "__main__":  # spawned workers import this file: run the sweep once
        r = flows.sweep(point, {"alpha": np.linspace(0.05, 1.0, 8), "rho": [0.2, 0.6]},
                        chunk_size=2, cache_dir=sys.argv[1], progress=False, executor="dask",
                        workers=2)
        print(json.dumps({"computed": r.n_computed, "cached": r.n_cached, "chunks": r.n_chunks,
                          "t_end": r["t_end"].tolist(), "executor": r.manifest["executor"]}))
    """
)


def test_killed_client_resumes_from_the_cache(tmp_path):
    import psutil

    script = tmp_path / "run.py"
    script.write_text(RESUMABLE)
    cache = tmp_path / "cache"
    cmd = [sys.executable, str(script), str(cache)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(cache.glob("*/chunks/*.npz"))) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    for child in children:  # the killed client's worker processes
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    finished = len(list(cache.glob("*/chunks/*.npz")))
    assert 2 <= finished < 8

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report["executor"]["kind"] == "dask" and report["executor"]["workers"] == 2
    assert report["chunks"] == 8
    assert report["cached"] == finished  # every saved chunk was reused ...
    assert report["computed"] == 8 - finished  # ... and only the others were computed

    def plain(alpha, rho):
        traj = flows.solve(
            flows.L2SAM(rho),
            flows.single_example([1.0, 2.0]),
            flows.balanced_init(alpha, 2, 2),
            t1=3.0,
            rescaled=True,
        )
        return {"t_end": traj.t_end}

    full = flows.sweep(
        plain, {"alpha": np.linspace(0.05, 1.0, 8), "rho": [0.2, 0.6]}, chunk_size=2, progress=False
    )
    assert np.array_equal(np.asarray(report["t_end"]), full["t_end"])


@pytest.mark.parametrize("executor", ["Dask", "processes", 2, object()])
def test_bad_executor_is_a_named_error(executor):
    with pytest.raises(ValueError, match="`executor` must be one of None, 'threads', 'dask'"):
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, executor=executor, progress=False)


def test_client_without_workers_is_an_error_not_a_hang():
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None)
    try:
        with distributed.Client(cluster) as empty:
            t0 = time.monotonic()
            with pytest.raises(
                RuntimeError, match="`executor` is a dask.distributed Client with no workers"
            ):
                flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, executor=empty, progress=False)
            assert time.monotonic() - t0 < 10
    finally:
        cluster.close()


def _limit_file_size(limit):
    """On a worker: files it writes may hold at most ``limit`` bytes (a full quota)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed worker
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_cache_dir_the_workers_cannot_write_is_a_named_error(client, tmp_path):
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    client.run(_limit_file_size, 0)
    try:
        with pytest.raises(ValueError, match="`cache_dir` must be a folder that every Dask worker"):
            flows.sweep(
                point,
                {"alpha": ALPHAS, "rho": RHOS},
                cache_dir=tmp_path,
                executor=client,
                progress=False,
            )
    finally:
        client.run(_limit_file_size, soft)
    assert not list(tmp_path.glob("*/chunks/*.npz"))  # nothing was computed


def test_reserved_output_name_is_raised_from_the_workers(client, tmp_path):
    check_reserved_name_is_raised_before_any_chunk(tmp_path, executor=client)


def test_documented_cluster_example_runs_as_written(tmp_path):
    page = (Path(__file__).resolve().parents[1] / "docs" / "cluster.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    (tmp_path / "cluster_sweep.py").write_text(code)
    root = str(Path(flows.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "cluster_sweep.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    kind, counts = run.stdout.strip().splitlines()[-1].split(" ", 1)
    assert kind == "dask"
    # the same counts from direct solves, one point at a time
    data = flows.single_example([1.0, 2.0, 3.0])
    statuses = [
        flows.solve(
            flows.L2SAM(rho), data, flows.balanced_init(alpha, 2, 3), t1=20.0, rescaled=True
        ).status_name
        for alpha in np.geomspace(1e-3, 1.0, 16)
        for rho in [0.1, 0.5]
    ]
    names, n = np.unique(statuses, return_counts=True)
    assert counts == str(dict(zip(names.tolist(), n.tolist(), strict=True)))
    assert len(names) >= 2  # the example shows more than one regime
    assert list((tmp_path / "sweeps").glob("*/result.npz"))


def _worker_gpu_env(x):
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "-1")
    prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE") == "false"
    return np.full(np.shape(x), float(visible) + (10.0 if prealloc else 0.0))


def gpu_env_point(x):
    """The CUDA_VISIBLE_DEVICES of the worker that computes x, +10 if preallocation is off."""
    spec = jax.ShapeDtypeStruct((), jnp.float64)
    return {"env": jax.pure_callback(_worker_gpu_env, spec, x, vmap_method="expand_dims")}


class _FakeGpu:
    platform = "gpu"


def within(seconds, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or a test failure after ``seconds`` instead of a hang."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a hang"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_dask_on_a_gpu_machine_starts_one_worker_per_device(monkeypatch):
    # The client sees two GPUs; executor="dask" must start one worker per device, each seeing
    # only its own, without preallocation. (Workers run on the CPU here: no GPU on CI.)
    monkeypatch.setattr(jax, "local_devices", lambda *a, **k: [_FakeGpu(), _FakeGpu()])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    r = within(
        240,
        flows.sweep,
        gpu_env_point,
        {"x": np.arange(16.0)},
        chunk_size=1,
        executor="dask",
        progress=False,
    )
    assert r.manifest["executor"]["workers"] == 2
    assert set(r["env"].tolist()) == {10.0, 11.0} and not r["failed"].any()  # both devices used
    # the cluster it started is closed: no worker or nanny process of it is left (only
    # multiprocessing's resource tracker, which a first spawn starts for the whole process)
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    gone, alive = psutil.wait_procs(
        [p for p in started if "resource_tracker" not in " ".join(p.cmdline())], timeout=30
    )
    assert not alive, [" ".join(p.cmdline()) for p in alive]


def test_workers_with_other_package_versions_are_refused(client, monkeypatch):
    from flows._sweep import _executors

    here = {**_executors.package_versions(), "jax": "0.0.0-other"}
    monkeypatch.setattr(_executors, "package_versions", lambda: here)
    with pytest.raises(RuntimeError, match=r"`executor`: 2 Dask worker\(s\) run other versions"):
        flows.sweep(point, {"alpha": ALPHAS, "rho": RHOS}, executor=client, progress=False)


_COMPILES = []  # in each worker: XLA backend compilations seen since _count_compiles


def _count_compiles():
    import jax.monitoring

    def listen(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            _COMPILES.append(seconds)

    _COMPILES.clear()
    if not getattr(_count_compiles, "registered", False):
        jax.monitoring.register_event_duration_secs_listener(listen)
        _count_compiles.registered = True


def _n_compiles():
    return len(_COMPILES)


def counted_point(alpha, rho):
    """``point`` under another name: a function no worker has compiled yet."""
    return point(alpha, rho)


def test_each_worker_compiles_the_chunk_function_once(client):
    client.run(_count_compiles)
    counts = []
    for start in (0.05, 0.06):  # two sweeps of the same function, 16 tasks each
        grid = {"alpha": np.linspace(start, 1.0, 16), "rho": RHOS}
        r = flows.sweep(counted_point, grid, chunk_size=2, executor=client, progress=False)
        assert r.n_computed == 16
        counts.append(client.run(_n_compiles))
    first, second = counts
    # 16 tasks on 2 workers, so one worker ran >= 8: compiling per task would show >= 8 there.
    # One process compiles this function with 4 backend compilations (the chunk function and
    # 3 small helper computations, measured with the thread runner), once.
    assert sum(first.values()) >= 1 and max(first.values()) <= 4, first
    assert second == first  # the second sweep compiled nothing


def test_analysis_sweeps_run_on_the_cluster(client):
    """``executor=`` reaches the sweeps of analysis.phase_diagram and analysis.limit_map
    (limit_map's one-thread default is not forced on a Dask executor). Expected values are
    independent: the phase diagram's regimes from the sympy bounds 0.19, 0.57, 0.94 of its
    docstring, the limit map's from the q-order and the reduced flow (tests.helpers.l2sam_limit:
    one point of each escape regime, direct, sequential and minor)."""
    import analysis

    ds = analysis.phase_diagram(
        flows.L2SAM(1.0),
        [1.0, 2.0, 3.0],
        alpha=[0.05, 0.6, 3.0],
        rho=1.0,
        executor=client,
        progress=False,
    )
    names = ds.attrs["regimes"].split()
    assert [names[c] for c in ds["code"].values] == ["collapse", "sequential", "direct"]
    mu, a1, a2 = [1.0, 2.0], [0.3, 0.5], [0.2, 0.3]
    out = analysis.limit_map(
        flows.L2SAM(0.1), mu, (a1, a2), depth=3, executor=client, progress=False
    )
    names = np.array(analysis.REGIMES)[out.code]
    got = [[(names[i, j], int(out.leader[i, j])) for j in range(2)] for i in range(2)]
    assert got == [[l2sam_limit(mu, [x, y], 0.1, 3) for y in a2] for x in a1]


def test_figures_sweeps_run_on_the_given_executor(client, tmp_path):
    import figures
    from figures import _common

    ctx = figures.Context(out=tmp_path, cache=tmp_path, executor=client)
    r = _common.sweep(ctx, lambda x: {"y": 3.0 * x}, {"x": [1.0, 2.0]}, chunk_size=1)
    assert r.manifest["executor"]["kind"] == "dask" and r["y"].tolist() == [3.0, 6.0]
    with pytest.raises(ValueError, match="`executor` must be one of"):
        figures.make(["regime_map"], out=tmp_path / "m", cache=tmp_path / "m", executor="slurm")
    assert not list((tmp_path / "m").rglob("*.npz"))  # refused before anything was computed


def test_engine_phase_diagram_on_the_cluster_is_bit_identical(client):
    """The numba driver's chunks (flows.sweep(batched=True)) on Dask workers give the local
    run's arrays bit for bit, at two depths and over a grid that spans every regime."""
    import analysis

    kw = dict(alpha=np.geomspace(0.05, 3.0, 12), rho=[0.5, 1.0], depth=[2, 3], progress=False)
    local = analysis.phase_diagram(flows.L2SAM(1.0), [1.0, 2.0, 3.0], chunk_size=5, **kw)
    remote = analysis.phase_diagram(
        flows.L2SAM(1.0), [1.0, 2.0, 3.0], chunk_size=5, executor=client, **kw
    )
    assert len(set(local["code"].values.ravel().tolist())) >= 3
    for name in local.data_vars:
        np.testing.assert_array_equal(local[name].values, remote[name].values, err_msg=name)
