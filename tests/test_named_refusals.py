"""Bad arguments are refused with an error that names the argument (or the command-line
option) and says what is accepted; the expected value is the name itself."""

import jax
import numpy as np
import pytest

import analysis
import experiments
import figures
import flows
from experiments.__main__ import main as experiments_main
from figures import _phase_cli
from tests.test_cli import one_line_error
from tests.test_cli_refusals import PHASE, no_computing  # noqa: F401 (a fixture)


@pytest.mark.parametrize("devices", ["gpu", b"cpu", 3, ["cpu"]])
def test_sweep_devices_must_be_jax_devices(devices):
    with pytest.raises(ValueError, match="`devices` must be None or a list of JAX devices"):
        flows.SweepOptions(devices=devices)


def test_sweep_devices_accepts_jax_devices():
    assert flows.SweepOptions(devices=tuple(jax.devices()[:1])).devices == jax.devices()[:1]


def test_cache_dir_that_is_not_a_path_is_named():
    with pytest.raises(TypeError, match="`cache_dir` must be None or a folder path"):
        flows.sweep(lambda a: {"x": a}, {"a": [1.0, 2.0]}, cache_dir=5, progress=False)
    with pytest.raises(TypeError, match="`cache_dir`"):
        analysis.phase_diagram(
            flows.L2SAM(1.0), [1.0, 2.0], alpha=[0.1, 0.2], rho=[1.0, 2.0], cache_dir=5
        )


def test_experiments_out_that_is_not_a_folder_is_named(tmp_path):
    with pytest.raises(ValueError, match="`out` must name a folder; got 5"):
        experiments.run(quick=True, out=5)
    with pytest.raises(ValueError, match="`docs` must name a folder"):
        experiments.run(quick=True, out=tmp_path, docs=7)


def test_experiments_out_that_cannot_be_made_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in ("/proc/samflows", str(blocker / "sub")):
        line = one_line_error(capsys, lambda o=out: experiments_main(["--quick", "--out", o]))
        assert line.startswith("python -m experiments: error: --out ")
        assert "cannot create the folder" in line


@pytest.mark.parametrize(
    "fn, where",
    [(lambda a: {"x": "text"}, "output['x'] is str"), (lambda a: "text", "output is str")],
)
def test_sweep_of_a_function_returning_text_names_fn(fn, where):
    with pytest.raises(ValueError, match="`fn` must return numbers or arrays") as info:
        flows.sweep(fn, {"a": [1.0, 2.0]}, progress=False)
    assert where in str(info.value)


def test_workers_beyond_the_cap_are_refused():
    data, theta0 = flows.single_example([1.0, 2.0]), np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match=r"`workers` must be an integer in \[1, 4096\]"):
        flows.solve_many(flows.GD(), data, theta0, t1=1.0, workers=10**30)
    with pytest.raises(ValueError, match=r"`workers` must be None or an integer in \[1, 4096\]"):
        flows.SweepOptions(workers=4097)
    ok = flows.solve_many(flows.GD(), data, theta0, t1=1.0, workers=4096)
    assert ok.status_name == ["ok"]


def test_phase_depth_beyond_float64_is_refused_at_once(capsys, no_computing, tmp_path):  # noqa: F811
    out = ["--out", str(tmp_path / "o")]
    cmd = ["phase", "--method", "l2sam", "--rho", "0.5", "--alpha", "0.1:1:4"]
    line = one_line_error(capsys, lambda: figures.main([*cmd, "--depth", "2:100000", *out]),
                          "--depth", "L <= 307")  # fmt: skip
    assert "100000" in line
    at_one = ["phase", "--method", "l2sam", "--rho", "0.5:2:4", "--alpha", "1"]
    one_line_error(capsys, lambda: figures.main([*at_one, "--depth", "1025", *out]), "L <= 1024")
    assert not (tmp_path / "o").exists()


def test_phase_depth_limit_is_where_alpha_to_the_L_leaves_the_normal_range():
    tiny = np.finfo(np.float64).tiny  # 0.1^L is normal up to L = 307, subnormal at 308
    assert 0.1**307 >= tiny > 0.1**308
    _phase_cli._check_depth(np.arange(2, 308), np.array([0.1, 1.0]))
    with pytest.raises(ValueError, match="--depth"):
        _phase_cli._check_depth(np.arange(2, 309), np.array([0.1, 1.0]))
    assert 10.0**307 < np.finfo(np.float64).max  # and 10^L overflows past 308
    _phase_cli._check_depth(np.array([307]), np.array([10.0]))
    with pytest.raises(ValueError, match="--depth"):
        _phase_cli._check_depth(np.array([308]), np.array([10.0]))


@pytest.mark.parametrize("a, b", [("rho_max", "rho-max"), ("collapse-tol", "collapse_tol")])
def test_a_config_with_both_spellings_of_a_key_is_refused(capsys, no_computing, tmp_path, a, b):  # noqa: F811
    path = tmp_path / "c.toml"
    path.write_text(f'method = "lesam"\n{a} = 0.3\n{b} = 0.4\n')
    call = lambda: figures.main([*PHASE, "--config", str(path), "--out", str(tmp_path / "o")])  # noqa: E731
    one_line_error(capsys, call, "--config", a, b, "given twice")
