"""analysis._phase / analysis._run: phase diagrams as data, against independent integrations."""

import numpy as np
import pytest

import analysis
import flows
from analysis import _reference
from tests.helpers import annealed_switches, cosine_sigma

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


def test_phase_diagram_paths_match_the_reduced_flow_over_alpha_and_depth(tmp_path):
    import xarray as xr

    alphas = np.array([0.36, 0.5])
    ds = analysis.phase_diagram(
        flows.L2SAM(1.0), MU, alpha=alphas, rho=1.0, depth=[2, 3], progress=False
    )
    assert ds["code"].dims == ("depth", "alpha") and ds["times"].dims == (
        "depth",
        "alpha",
        "switch",
    )
    for depth in (2, 3):
        for alpha in alphas:
            seq, times = _reference.l2sam_switches(MU, alpha, 1.0, depth)
            point = ds.sel(depth=depth, alpha=alpha)
            assert int(point["first"]) == seq[0] and int(point["last"]) == seq[-1] == 4
            assert int(point["n_switches"]) == len(seq) - 1
            np.testing.assert_allclose(point["times"].values[: len(times)], times, rtol=1e-6)
            assert np.isnan(point["times"].values[len(times) :]).all()
            regime = "sequential" if len(seq) > 1 else "direct"
            assert analysis.REGIMES[int(point["code"])] == regime
    path = tmp_path / "phase.nc"
    ds.to_netcdf(path)
    back = xr.load_dataset(path)
    xr.testing.assert_identical(back, ds)
    assert back.attrs["method"] == "L2SAM(rho=1.0, per_layer=False)"


def test_phase_diagram_over_rho_follows_the_bounds_at_alpha_over_rho():
    # Scale invariance (docs/theory.md §6): the regime depends on α/ρ only; along ρ at fixed α the
    # sympy bounds at α/ρ decide collapse (α/ρ < 0.0953) and direct (α/ρ > 0.858).
    n = np.linalg.norm(MU)
    rhos = np.array([1 / (0.9 * 1 / (np.sqrt(2) * n)), 1 / (1.1 * 9 / (np.sqrt(2) * n))])
    ds = analysis.phase_diagram(flows.L2SAM(1.0), MU, alpha=1.0, rho=rhos, progress=False)
    assert [analysis.REGIMES[c] for c in ds["code"].values] == ["collapse", "direct"]
    # the swept radius is not the template's ρ = 1; the default atol is the one runs use
    assert ds.attrs["method"] == "L2SAM(rho=swept, per_layer=False)"
    assert ds.attrs["atol"] == "relative 1e-150 max|θ₀|"


def test_phase_diagram_of_the_scale_twins_is_the_same_cell_by_cell():
    # (α, ρ) → λ(α, ρ) at λ = 1e-100 (docs/theory.md §6): an absolute atol = 1e-30 sits far above
    # weights of 1e-100. Independent: the hand bounds at ρ = 1, μ = (1, 2, 3): all shrink below
    # 1/(√2‖μ‖) = 0.19 (collapse), all grow above 3/(√2‖μ‖) = 0.57, direct above
    # α_s = 5/(√2‖μ‖) = 0.94.
    mu = [1.0, 2.0, 3.0]
    alphas = np.array([0.1, 0.6, 2.0])
    ref = analysis.phase_diagram(flows.L2SAM(1.0), mu, alpha=alphas, progress=False)
    regimes = [analysis.REGIMES[c] for c in ref["code"].values]
    assert regimes == ["collapse", "sequential", "direct"]
    lam = 1e-100
    ds = analysis.phase_diagram(flows.L2SAM(lam), mu, alpha=lam * alphas, progress=False)
    ds_regimes = [analysis.REGIMES[c] for c in ds["code"].values]
    assert ds_regimes == regimes
    for key in ("code", "first", "last", "n_switches", "status", "passes"):
        np.testing.assert_array_equal(ds[key].values, ref[key].values, err_msg=key)
    for key in ("t_end", "times"):  # L = 2: τ is the same (λ^0)
        np.testing.assert_allclose(ds[key].values, ref[key].values, rtol=1e-9, err_msg=key)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        # not a parameter of ℓ2-SAM
        (
            dict(sigma=[0.1, 0.2]),
            r"`sigma` does not belong to `method` L2SAM \(its parameters: `rho`\)",
        ),
        (dict(alpha=[]), "alpha"),
        (dict(alpha=[0.1, -1.0]), "alpha"),
        (dict(depth=0), "depth"),
        (dict(mu=[1.0, -2.0]), "mu"),
        (dict(alpha=0.5, rho=1.0), "array"),  # no axis at all
    ],
)
def test_phase_diagram_bad_input(kwargs, name):
    args = dict(method=flows.L2SAM(1.0), mu=[1.0, 2.0], alpha=[0.5, 1.0], progress=False) | kwargs
    with pytest.raises(ValueError, match=name):
        analysis.phase_diagram(**args)


def test_phase_diagram_with_a_fixed_schedule_over_alpha():
    """LE-SAM with the annealed σ(t) held fixed, swept over α (and ρ_max fixed): the real clock
    is carried pass to pass. α = 0.08 collapses (below α_c ≈ 0.0910, tests/test_boundary.py);
    α = 0.1 is sequential with the switches of the hand-written flow
    (tests/helpers.annealed_switches)."""
    ds = analysis.phase_diagram(
        flows.LESAM(cosine_sigma, 0.3), [1.0, 2.0, 3.0], alpha=[0.08, 0.1], rho_max=0.3,
        progress=False,
    )  # fmt: skip
    regimes = ds.attrs["regimes"].split()
    assert [regimes[c] for c in ds["code"].values] == ["collapse", "sequential"]
    assert "<schedule cosine_sigma " in ds.attrs["method"]
    sequence, times, _ = annealed_switches([1.0, 2.0, 3.0], 0.1, 0.3, cosine_sigma, 2.0)
    point = ds.sel(alpha=0.1)
    assert [int(point["first"]), int(point["last"]), int(point["n_switches"])] == [
        sequence[0], sequence[-1], len(sequence) - 1,
    ]  # fmt: skip
    np.testing.assert_allclose(point["times"].values[: len(times)], times, rtol=1e-7)


def test_a_run_solves_its_passes_unchecked_and_checks_the_dense_size_once(monkeypatch):
    """analysis._run.run integrates each pass with flows.internal.integrate (its inputs were
    validated at analysis's edge), never through the checking flows.solve; the one check of
    solve that depends on the run's options, the dense output's size against the device's
    memory, is made once, when the run is traced: 2**40 steps of a tracked run need ~5e5 GB."""
    import jax

    from analysis._run import run

    def solve(*args, **kwargs):
        raise AssertionError("flows.solve was called")

    monkeypatch.setattr(flows, "solve", solve)
    monkeypatch.setattr(flows._solve, "solve", solve)
    data, theta0 = flows.single_example([1.0, 2.0, 3.0]), flows.balanced_init(0.5, 2, 3)

    def code(options):
        one = lambda th: run(flows.L2SAM(1.0), data, th, options=options)  # noqa: E731
        return jax.eval_shape(one, theta0)["code"]

    assert code(analysis.RunOptions()).shape == ()
    with pytest.raises(ValueError, match="`max_steps` = 1099511627776 with `dense=True`"):
        code(analysis.RunOptions(max_steps=2**40))


def test_a_diagrams_key_tells_schedules_apart_by_their_values():
    """A schedule σ(t) enters a diagram's cache key by its values at fixed times (its name
    alone would let two lambdas share a cache): equal values give the same description, a
    change of 1e-12 at t = 1e12 only a different one; the analysis's sources enter as their
    digest (an edit to any of them is a new key)."""
    from pathlib import Path

    from analysis._provenance import analysis_version, describe
    from flows.internal import source_digest

    f = lambda t: 0.3 / (1.0 + t)  # noqa: E731
    g = lambda t: 0.3 / (1.0 + t)  # noqa: E731
    h = lambda t: 0.3 / (1.0 + t) + 1e-12 * (t >= 1e12)  # noqa: E731
    one, same, other = (describe(flows.LESAM(s, 0.5)) for s in (f, g, h))
    assert one == same and one != other
    assert one.startswith("LESAM(sigma=<schedule <lambda> ") and "rho_max=0.5" in one
    assert analysis_version() == source_digest(Path(analysis.__file__).parent)
