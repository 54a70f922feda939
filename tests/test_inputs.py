"""analysis._inputs: each input check accepts what its contract states, returns the checked value,
and refuses the rest with a ValueError naming the argument."""

import numpy as np
import pytest

import flows
from analysis._inputs import (
    check_alpha,
    check_axis,
    check_depth,
    check_kind,
    check_method,
    check_mu,
    check_parameters,
    check_positive,
)


def test_mu_accepted_and_returned_as_float64():
    got = check_mu([1, 2, 3])
    assert got.dtype == np.float64 and got.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("mu", "needle"),
    [
        ([[1.0, 2.0]], "1-D"),
        ([], "1-D"),
        ([1.0, -2.0], "> 0"),
        ([1.0, np.nan], "finite"),
        ([1.0, 1e-310], "normal"),  # subnormal
        ([2.0, 1.0, 2.0], "unique largest"),
        ("abc", "mu"),
    ],
)
def test_mu_refused(mu, needle):
    with pytest.raises(ValueError, match="`mu`") as err:
        check_mu(mu)
    assert needle in str(err.value)


def test_alpha_a_scalar_or_one_per_coordinate():
    assert check_alpha(0.5, 3).shape == ()
    assert check_alpha([0.1, 0.2, 0.3], 3).tolist() == [0.1, 0.2, 0.3]
    for bad in ([0.1, 0.2], 0.0, -1.0, np.inf, [[0.1, 0.2, 0.3]]):
        with pytest.raises(ValueError, match="`alpha`"):
            check_alpha(bad, 3)


def test_an_axis_is_a_number_or_a_nonempty_1d_array_of_positive_numbers():
    assert check_axis("rho", 0.5).shape == ()
    assert check_axis("rho", [0.5, 1.0]).tolist() == [0.5, 1.0]
    for bad in ([], [[0.5]], [0.5, 0.0], [0.5, np.inf], -1.0, "x"):
        with pytest.raises(ValueError, match="`rho`"):
            check_axis("rho", bad)


def test_positive_bounds():
    assert check_positive("rtol", 1e-8, upper=1.0) == 1e-8
    assert check_positive("rtol", np.float32(0.5), upper=1.0) == 0.5
    # a positive lower bound is inclusive, the upper bound exclusive
    assert check_positive("rtol", 2.0**-52, upper=0.1, lower=2.0**-52) == 2.0**-52
    for bad in (0.0, 1.0, -1e-3, np.nan, True, None, "1e-8", [1e-8]):
        with pytest.raises(ValueError, match="`rtol`"):
            check_positive("rtol", bad, upper=1.0)
    with pytest.raises(ValueError, match=r"\[2\.22045e-16, 0\.1\)"):
        check_positive("rtol", 1e-17, upper=0.1, lower=2.0**-52)


def test_depth_and_kind():
    assert check_depth(3) == 3
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="`depth`"):
            check_depth(bad)
    check_kind("settled", np.array([True, False]), "b")
    with pytest.raises(ValueError, match="`settled`"):
        check_kind("settled", np.array([1, 0]), "b")
    with pytest.raises(ValueError, match="`index`"):
        check_kind("index", 1.5, "iu")


def test_the_methods_the_analysis_decides():
    for method in (flows.GD(), flows.L2SAM(1.0), flows.LinfSAM(0.1), flows.LESAM(1.0, 0.5)):
        assert check_method(method) is method
    with pytest.raises(ValueError, match="`method`"):
        check_method(flows.USAM(0.1))  # no perturbation bound is known for it


def test_a_parameter_that_does_not_belong_to_the_method():
    check_parameters(flows.LinfSAM, {"rho": 1.0, "delta": 1e-3, "sigma": None}, method_name="x")
    expected = r"^`sigma` does not belong to l2sam \(its parameters: `rho`\)"
    with pytest.raises(ValueError, match=expected):
        check_parameters(flows.L2SAM, {"sigma": 1.0}, method_name="l2sam")
    with pytest.raises(ValueError, match=r"^--rho does not belong to gd \(its parameters: none\)"):
        check_parameters(flows.GD, {"rho": 1.0}, method_name="gd", spell=lambda n: f"--{n}")
