"""Bad input to analysis/ gets an error naming the argument, before anything is solved (issue 15).

A wrong type is a ``TypeError`` (also a ``ValueError``); a bad value a ``ValueError``.
The max-margin directions are checked across magnitudes against hand-derived answers.
"""

import numpy as np
import pytest

import analysis
import flows

MU = [1.0, 2.0]
L2 = flows.L2SAM(1.0)


@pytest.fixture(scope="module")
def traj():
    """A small discrete trajectory (no dense output), only as a well-typed argument."""
    data = flows.single_example([1.0, 2.0, 3.0])
    return flows.iterate(flows.GD(), data, flows.balanced_init(0.5, 2, 3), lr=0.1, steps=2)


@pytest.fixture
def no_solving(monkeypatch):
    """Fail the test if anything is solved: each call below must fail in its checks."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a bad argument must be refused before any solve")

    monkeypatch.setattr(flows, "solve", forbidden)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: analysis.critical_alpha(L2, MU, atol=-1.0), ValueError, "`atol`"),
        (lambda: analysis.critical_alpha(L2, MU, atol="a"), TypeError, "`atol`"),
        (lambda: analysis.critical_alpha(L2, MU, solver_rtol=1e-8), ValueError, "'solver_rtol'"),
        (lambda: analysis.RunOptions(rtol=2.0), ValueError, "`rtol`"),
        (lambda: analysis.RunOptions(max_passes=0), ValueError, "`max_passes`"),
        (lambda: analysis.RunOptions(loss="hinge"), ValueError, "`loss`"),
        (lambda: analysis.regime_path(L2, MU, 0.5, options={}), ValueError, "`options`"),
        (lambda: analysis.regime_path(L2, MU, 0.5, max_restarts=3), ValueError, "'max_restarts'"),
        (lambda: analysis.phase_diagram(L2, MU, alpha=[1.0, 2.0], chunk=3), ValueError, "'chunk'"),
        (lambda: analysis.critical_alpha(L2, MU, bracket=(1, 2, 3)), ValueError, "`bracket`"),
        (lambda: analysis.critical_alpha(L2, MU, bracket=("a", "b")), ValueError, "`bracket`"),
        (lambda: analysis.critical_alpha(L2, MU, bracket=(0.1, np.inf)), ValueError, "`bracket`"),
        (lambda: analysis.critical_alpha(L2, MU, bracket=(-1.0, -10.0)), ValueError, "`bracket`"),
        (lambda: analysis.critical_alpha(L2, "abc"), TypeError, "`mu`"),
        (lambda: analysis.critical_alpha(L2, [1.0, None]), TypeError, "`mu`"),
        (lambda: analysis.critical_alpha("l2", MU), TypeError, "`method`"),
        (lambda: analysis.regime(L2, MU, "big"), TypeError, "`alpha`"),
        (lambda: analysis.regime(L2, MU, [[0.5, 0.5], [0.5, 0.5]]), ValueError, "`alpha`"),
        (lambda: analysis.regime_path(L2, MU, 0.5, t1="long"), TypeError, "`t1`"),
        (lambda: analysis.regime_path(L2, MU, 0.5, depth=2.0), TypeError, "`depth`"),
        (lambda: analysis.Problem(L2, (1, 2), np.ones((2, 2)), 1.0), TypeError, "`data`"),
        (
            lambda: analysis.Problem(L2, flows.single_example(MU), np.ones((2, 2)), -1.0),
            ValueError,
            "`t1`",
        ),
        (
            lambda: analysis.Problem(L2, flows.single_example(MU), np.ones((3, 3)), 1.0),
            ValueError,
            "`theta0`",
        ),
        (
            lambda: analysis.Problem(L2, flows.single_example(MU), np.ones((2, 2)), 1.0, "yes"),
            ValueError,
            "`rescaled`",
        ),
        (
            lambda: analysis.Problem(
                L2, flows.single_example(MU), np.ones((2, 2)), 1.0, options={"rtol": 1e-9}
            ),
            ValueError,
            "`options`",
        ),
        (
            lambda: analysis.Problem(None, flows.single_example(MU), np.ones((2, 2)), 1.0),
            TypeError,
            "`method`",
        ),
        (lambda: analysis.l2sam_thresholds("abc", 1.0), TypeError, "`mu`"),
        (lambda: analysis.l2sam_thresholds([1.0, 2.0], "abc"), TypeError, "`rho`"),
        (lambda: analysis.l2sam_thresholds([1.0, 2.0], 1 + 2j), TypeError, "`rho`"),
        (lambda: analysis.l2sam_thresholds([1.0, 2.0], 1.0, per_layer=1), TypeError, "`per_layer`"),
        # the depth L is theta's first dimension: an (L, d) array, L >= 1
        (lambda: analysis.certificate([1.0, 2.0], MU, 0.1), ValueError, "`theta`"),
        (lambda: analysis.certificate(np.ones((0, 2)), MU, 0.1), ValueError, "`theta`"),
    ],
)
def test_analysis_bad_input_names_the_argument(no_solving, call, error, name):
    with pytest.raises(error, match=name):
        call()


class Unbounded(flows.AbstractMethod):
    """A flows method (ε = 0) that is none of those the analysis decides: no perturbation
    bound is known for it, so no certificate."""

    def perturbation(self, theta, grad, t, grad_scale=1.0):
        return 0.0 * theta


@pytest.mark.parametrize(
    "call",
    [
        lambda m: analysis.regime(m, MU, 0.5),
        lambda m: analysis.critical_alpha(m, MU),
        lambda m: analysis.boundary(lambda p: (m, p), MU, bracket=(0.5, 2.0)),
        lambda m: analysis.phase_diagram(m, MU, alpha=[0.5, 1.0], progress=False),
        lambda m: analysis.limit_map(m, MU, ([0.5], [1.0]), progress=False),
        lambda m: analysis.limit_leader(m, MU, 0.5, 3),
        lambda m: analysis.perturbation_bound(m),
    ],
)
def test_a_method_the_analysis_does_not_decide_is_refused(no_solving, call):
    with pytest.raises(ValueError, match="`method` must be one of flows.GD, L2SAM, LinfSAM, LESAM"):
        call(Unbounded())


def test_a_problem_takes_any_flows_method():
    # Problem needs no perturbation bound: ε = 0 is GD's field, d log β_j / dτ = 2 μ_j at L = 2
    p = analysis.Problem(
        Unbounded(), flows.single_example(MU), flows.balanced_init(0.5, 2, 2), 1.0, rescaled=True
    )
    np.testing.assert_allclose(p.rates(p.theta0), [2.0, 4.0])


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        (dict(samples_per_step="a"), TypeError, "`samples_per_step`"),
        (dict(samples_per_step=2.7), TypeError, "`samples_per_step`"),
        (dict(samples_per_step=0), ValueError, "`samples_per_step`"),
        (dict(max_depth=-5), ValueError, "`max_depth`"),
        (dict(max_depth=1.5), TypeError, "`max_depth`"),
    ],
)
def test_switch_times_counts_are_integers(traj, kwargs, error, name):
    with pytest.raises(error, match=name):
        analysis.switch_times(traj, **kwargs)


def test_trajectory_functions_name_their_arguments(traj):
    with pytest.raises(TypeError, match="`traj`"):
        analysis.dominant_index("not a trajectory")
    with pytest.raises(TypeError, match="`direction`"):
        analysis.direction_cosine(traj, "abc")
    with pytest.raises(TypeError, match="`traj`"):
        analysis.loss_plateau(None)


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e-10, 1e10, 1e150, 1e200, 1e300])
def test_max_margin_at_every_magnitude(scale):
    """Scaling all x_i by s > 0 scales the max-margin w by 1/s: the direction is unchanged.

    Expected values by hand: z = (1, 2), (1, 0) gives (1, 0) for both p; one example
    (1, 1) gives (1, 1)/√2 for p = 2.
    """
    data = flows.Dataset(scale * np.array([[1.0, 2.0], [-1.0, 0.0]]), [1, -1])
    np.testing.assert_allclose(analysis.max_margin(data, 2), [1.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(analysis.max_margin(data, 1), [1.0, 0.0], atol=1e-12)
    single = flows.Dataset([[scale, scale]], [1])
    np.testing.assert_allclose(analysis.max_margin(single, 2), [2**-0.5, 2**-0.5], rtol=1e-9)


def test_max_margin_refuses_rows_beyond_float64_range():
    """Rows 1e400 apart cannot share one scale: a named error, not 'not separable'."""
    data = flows.Dataset([[1e200, 1.0], [-1e-200, 1e-200]], [1, 1])
    with pytest.raises(ValueError, match="magnitude"):
        analysis.max_margin(data, 2)
    with pytest.raises(ValueError, match="not linearly separable"):
        analysis.max_margin(flows.Dataset([[1e200, 0.0], [1e200, 0.0]], [1, -1]), 2)
