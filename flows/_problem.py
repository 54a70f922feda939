r"""The learning problem: data, diagonal network, losses and the objective.

.. math::
    \beta(\theta) = w^{(1)}\odot\cdots\odot w^{(L)},\qquad
    \mathcal L(\theta) = \frac1n\sum_{i=1}^n \ell\big(y_i\langle\beta(\theta), x_i\rangle\big),

with :math:`\theta\in\mathbb R^{L\times d}` (one row per layer) and
:math:`\ell(z)=\log(1+e^{-z})` (logistic) or :math:`e^{-z}` (exponential), labels
:math:`y_i=\pm1`; or, for regression (real targets :math:`y_i`), the squared loss
:math:`\mathcal L(\theta)=\frac1{2n}\sum_i(\langle\beta(\theta),x_i\rangle-y_i)^2`,
:math:`\ell(r)=r^2/2` of the residual (docs/theory.md §18).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import numpy as xp

from ._rules import _in_namespace
from ._validate import as_array, check_finite, check_int, check_scalar, check_type, is_traced

# --- losses ---------------------------------------------------------------------
# Each loss is written once, as ℓ(z) of its argument (loss_arguments): the margin
# y⟨β, x⟩ for a classification loss, the residual ⟨β, x⟩ - y for the squared loss;
# with its derivative ℓ'(z) and, for a classification loss, log(-ℓ'(z)). The code below
# is plain arithmetic on the namespace ``xp`` (as flows._rules.epsilon): JAX runs it with
# xp = jax.numpy (jax_loss_value, ...), and the numba engine compiles the functions
# themselves, with xp = numpy, on scalars (flows._engine._vector_field). No loss is written twice.

#: The losses by name, and their codes in the code below (the engine's ``loss``).
LOSSES = {"logistic": 0, "exponential": 1, "squared": 2}
#: The losses of regression (argument: the residual); the others classify (the margin).
REGRESSION_LOSSES = ("squared",)


def loss_value(code, z):
    r""":math:`\ell(z)` of the loss ``code``: :math:`\log(1+e^{-z})` (logistic, as
    logaddexp(0, -z), finite for every finite z), :math:`e^{-z}` (exponential),
    :math:`z^2/2` (squared, of the residual)."""
    if code == 0:
        return xp.logaddexp(0.0, -z)
    if code == 1:
        return xp.exp(-z)
    return 0.5 * (z * z)


def loss_slope(code, z):
    r""":math:`\ell'(z)`: :math:`-e^{-z-\log(1+e^{-z})}` (logistic; the tangent of
    jax.numpy.logaddexp's own derivative rule), :math:`-e^{-z}` (exponential), :math:`z`
    (squared)."""
    if code == 0:
        return -xp.exp(-z - xp.logaddexp(0.0, -z))
    if code == 1:
        return -xp.exp(-z)
    return z


def loss_log_speed(code, z):
    r""":math:`\log(-\ell'(z))` of a classification loss, finite where :math:`\ell'(z)`
    underflows (margins beyond ~745): :math:`-\log(1+e^{z})` (logistic), :math:`-z`
    (exponential). The rescaled flow's clock :math:`dt/d\tau=1/(-\ell'(\hat m))` needs it at
    any margin."""
    if code == 0:
        return -xp.logaddexp(0.0, z)
    return -z


jax_loss_value = _in_namespace(loss_value, jnp)
jax_loss_slope = _in_namespace(loss_slope, jnp)
jax_loss_log_speed = _in_namespace(loss_log_speed, jnp)


def check_loss(loss: str) -> str:
    """Return ``loss`` if it names a known loss, else raise ``ValueError``."""
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValueError(f"`loss` must be one of {sorted(LOSSES)}; got {loss!r}.")
    return loss


def check_classification_loss(loss: str, needed_by: str) -> str:
    """``loss`` if it is a classification loss (a function of the margin), else ``ValueError``
    naming ``loss`` and ``needed_by``, the feature that needs one."""
    if check_loss(loss) in REGRESSION_LOSSES:
        names = sorted(set(LOSSES) - set(REGRESSION_LOSSES))
        raise ValueError(f"`loss` must be one of {names} for {needed_by}; got {loss!r}.")
    return loss


def loss_fn(loss: str, z):
    r""":math:`\ell(z)` elementwise: of the margin :math:`z=y\langle\beta,x\rangle` for
    ``"logistic"`` and ``"exponential"``, of the residual :math:`z=\langle\beta,x\rangle-y`
    for ``"squared"`` (:math:`z^2/2`)."""
    return jax_loss_value(LOSSES[check_loss(loss)], as_array("z", z))


def loss_derivative(loss: str, z):
    r""":math:`\ell'(z)` elementwise (negative for the classification losses; the residual
    itself for the squared loss)."""
    return jax_loss_slope(LOSSES[check_loss(loss)], as_array("z", z))


def log_speed(loss: str, z):
    r""":math:`\log(-\ell'(z))` elementwise, finite for every finite ``z`` (classification
    losses only: :math:`-\ell'` of the squared loss changes sign)."""
    loss = check_classification_loss(loss, "log_speed (-ℓ' > 0)")
    return jax_loss_log_speed(LOSSES[loss], as_array("z", z))


# --- data -----------------------------------------------------------------------


class Dataset(eqx.Module):
    r"""Data :math:`\{(x_i, y_i)\}_{i=1}^n`, :math:`x_i\in\mathbb R^d`: labels
    :math:`y_i=\pm1`, or real targets :math:`y_i\in\mathbb R` with ``regression=True``.

    Arguments:
        X: features, shape ``(n, d)``, finite.
        y: shape ``(n,)``: labels, each exactly ``+1`` or ``-1``; with ``regression=True``
            real targets, finite.
        regression: the targets are real numbers, to be fitted with ``loss="squared"``
            (a classification loss refuses such data, naming ``loss``).

    Concrete inputs are validated eagerly (``ValueError`` naming ``X``, ``y`` or
    ``regression``); traced inputs (a sweep over data under ``vmap``) are only
    shape-checked.

    >>> import flows
    >>> flows.Dataset([[1.0, 2.0], [-1.0, 0.5]], [1, -1]).n
    2
    >>> flows.Dataset([[1.0, 2.0]], [0.3], regression=True).regression
    True
    """

    X: jax.Array  # (n, d)
    y: jax.Array  # (n,)
    regression: bool = eqx.field(static=True, default=False)

    def __init__(self, X, y, regression: bool = False):
        if not isinstance(regression, bool):
            raise ValueError(f"`regression` must be True or False; got {regression!r}.")
        what = "an (n,) array of " + ("real targets" if regression else "labels +1 and -1")
        X = as_array("X", X, "an (n, d) array of real numbers")
        y = as_array("y", y, what)
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"`X` must have shape (n, d) with n, d >= 1; got shape {X.shape}.")
        if y.shape != (X.shape[0],):
            raise ValueError(
                f"`y` must have shape (n,) = ({X.shape[0]},) to match `X`; got shape {y.shape}."
            )
        check_finite("X", X)
        if regression:
            check_finite("y", y)
        elif not is_traced(y) and not np.all(np.abs(np.asarray(y)) == 1.0):
            raise ValueError(
                f"`y` must contain only labels +1 and -1 (real targets need "
                f"regression=True and loss='squared'); got {np.asarray(y)!r}."
            )
        self.X = X
        self.y = y
        self.regression = regression

    @property
    def n(self) -> int:
        """Number of examples."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """Number of features."""
        return self.X.shape[1]


def single_example(mu) -> Dataset:
    r"""The single-example dataset :math:`\{(\mu, +1)\}` of the paper's main case.

    Arguments:
        mu: feature vector, shape ``(d,)``, finite. The paper takes
            :math:`0<\mu_1<\dots<\mu_d` (minor to major features) but any finite
            vector is accepted.

    >>> import flows
    >>> flows.single_example([1.0, 2.0, 3.0]).X.shape
    (1, 3)
    """
    mu = as_array("mu", mu, "a 1-D array of real numbers")
    if mu.ndim != 1 or mu.shape[0] < 1:
        raise ValueError(f"`mu` must be a 1-D array of length d >= 1; got shape {mu.shape}.")
    check_finite("mu", mu)
    return Dataset(mu[None, :] if is_traced(mu) else np.asarray(mu)[None, :], np.ones(1))


def balanced_init(alpha, depth: int, d: int | None = None) -> jax.Array:
    r"""Balanced initialisation :math:`w^{(l)}(0)=\alpha` for every layer :math:`l`.

    Arguments:
        alpha: positive scale, a scalar (then pass ``d``) or a vector of shape ``(d,)``.
        depth: number of layers :math:`L\ge1`.
        d: number of features; required when ``alpha`` is a scalar.

    Returns:
        :math:`\theta` of shape ``(depth, d)``, float64. Works under ``jax.vmap``
        over ``alpha``.

    >>> import flows
    >>> flows.balanced_init(0.5, depth=2, d=3).tolist()
    [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    """
    depth = check_int("depth", depth, minimum=1)
    if d is not None:
        d = check_int("d", d, minimum=1)
    alpha = as_array("alpha", alpha, "a scalar > 0 or a (d,) array of numbers > 0")
    if alpha.ndim == 0:
        if d is None:
            raise ValueError("`d` is required when `alpha` is a scalar.")
        alpha = check_scalar("alpha", alpha, positive=True)
    elif alpha.ndim == 1:
        if alpha.shape[0] == 0:
            raise ValueError("`alpha` must be a scalar > 0 or a (d,) array with d >= 1; got [].")
        if d is not None and d != alpha.shape[0]:
            raise ValueError(f"`d` = {d} does not match len(`alpha`) = {alpha.shape[0]}.")
        d = alpha.shape[0]
        if not is_traced(alpha) and not np.all(np.isfinite(alpha) & (np.asarray(alpha) > 0)):
            raise ValueError(f"`alpha` must be finite and > 0 elementwise; got {alpha!r}.")
    else:
        raise ValueError(f"`alpha` must be a scalar or shape (d,); got shape {alpha.shape}.")
    if is_traced(alpha):
        return jnp.broadcast_to(alpha, (depth, d))
    return jax.device_put(np.broadcast_to(np.asarray(alpha), (depth, d)).copy())


def product_init(*layers, d: int | None = None) -> jax.Array:
    r"""The start :math:`w^{(l)}(0)=` ``layers[l]`` of the product network
    :math:`\beta=w^{(1)}\odot\cdots\odot w^{(L)}`, one row per layer.

    ``product_init(alpha, 0.0, d=d)`` is the u⊙v start :math:`(u_0,v_0)=(\alpha\mathbf 1,0)`,
    :math:`\beta_0=0`, of the regression literature. A u⊙v network from
    :math:`(2\alpha\mathbf 1, 0)` follows the :math:`u^2-v^2` network from
    :math:`(\alpha\mathbf 1,\alpha\mathbf 1)` at half the speed (docs/theory.md §18).

    Arguments:
        layers: :math:`L\ge1` rows, each a finite scalar (then pass ``d``, or give another
            row as a vector) or a ``(d,)`` vector; zeros and signs are allowed.
        d: number of features, when every row is a scalar.

    Returns:
        :math:`\theta` of shape ``(L, d)``, float64.

    >>> import flows
    >>> flows.product_init(0.5, 0.0, d=3).tolist()
    [[0.5, 0.5, 0.5], [0.0, 0.0, 0.0]]
    """
    if not layers:
        raise ValueError("`layers` must hold at least one row (L >= 1); got none.")
    rows = [as_array(f"layers[{k}]", w, "a scalar or a (d,) array of real numbers")
            for k, w in enumerate(layers)]  # fmt: skip
    for k, w in enumerate(rows):
        if w.ndim > 1 or (w.ndim == 1 and w.shape[0] < 1):
            raise ValueError(
                f"`layers[{k}]` must be a scalar or a (d,) vector with d >= 1 (a product "
                f"network's row); got shape {w.shape}."
            )
        check_finite(f"layers[{k}]", w)
    lengths = {w.shape[0] for w in rows if w.ndim == 1}
    if d is not None:
        lengths.add(check_int("d", d, minimum=1))
    if len(lengths) > 1:
        raise ValueError(
            f"`layers` and `d` must agree on one length d; got lengths {sorted(lengths)}."
        )
    if not lengths:
        raise ValueError("`d` is required when every row of `layers` is a scalar.")
    (d,) = lengths
    return jnp.stack([jnp.broadcast_to(w, (d,)) for w in rows])


def check_data(data) -> "Dataset":
    """Return ``data`` if it is a :class:`Dataset`, else raise :class:`WrongTypeError`."""
    return check_type("data", data, Dataset, "a flows.Dataset, e.g. flows.single_example(mu)")


def theta_array(theta, data: Dataset, name: str = "theta") -> jax.Array:
    """``theta`` as a float64 array of shape ``(L, d)`` matching ``data`` (values unchecked).

    The shape is static, so this check also runs under ``jit``/``vmap``.
    """
    theta = as_array(name, theta, f"an (L, d) = (L, {data.d}) array of real numbers")
    if theta.ndim != 2 or theta.shape[0] < 1 or theta.shape[1] != data.d:
        raise ValueError(
            f"`{name}` must have shape (L, d) = (L, {data.d}) with depth L >= 1; "
            f"got shape {theta.shape}."
        )
    return theta


def check_theta(theta, data: Dataset, name: str = "theta0") -> jax.Array:
    """Validate a parameter array against ``data``: shape ``(L, d)``, finite, float64."""
    theta = theta_array(theta, check_data(data), name)
    check_finite(name, theta)
    return theta


# --- the model and the objective -----------------------------------------------


def beta(theta):
    r""":math:`\beta=\prod_l w^{(l)}`: shape ``(..., L, d) -> (..., d)``.

    Values are not checked (NaN in, NaN out: trajectories mark unreached times
    with NaN); the shape must have at least two axes, ``(L, d)``.
    """
    theta = as_array("theta", theta, "an array of shape (..., L, d) of real numbers")
    if theta.ndim < 2 or theta.shape[-2] < 1:
        raise ValueError(
            f"`theta` must have shape (..., L, d) with L >= 1; got shape {theta.shape}."
        )
    return jnp.prod(theta, axis=-2)


def predictions(theta, data: Dataset):
    r""":math:`\langle\beta(\theta),x_i\rangle`, shape ``(n,)``, for one ``theta`` ``(L, d)``."""
    theta = theta_array(theta, check_data(data))
    return data.X @ beta(theta)


def margins(theta, data: Dataset):
    r""":math:`y_i\langle\beta(\theta),x_i\rangle`, shape ``(n,)``, for one ``theta`` ``(L, d)``."""
    return check_data(data).y * predictions(theta, data)


def check_loss_data(loss: str, data: Dataset) -> str:
    """``loss`` if it names a loss that fits ``data``, else ``ValueError`` naming ``loss``: real
    targets (``Dataset(..., regression=True)``) are fitted by the squared loss only."""
    loss = check_loss(loss)
    if check_data(data).regression and loss not in REGRESSION_LOSSES:
        raise ValueError(
            f"`loss` must be one of {list(REGRESSION_LOSSES)} for a regression Dataset (real "
            f"targets); got {loss!r}."
        )
    return loss


def loss_arguments(preds, data: Dataset, loss: str):
    r"""The argument of :math:`\ell` for each example from the predictions
    :math:`p_i=\langle\beta,x_i\rangle` (shape ``(..., n)``): the margin :math:`y_ip_i` for a
    classification loss, the residual :math:`p_i-y_i` for the squared loss."""
    return preds - data.y if loss in REGRESSION_LOSSES else data.y * preds


def objective(theta, data: Dataset, loss: str = "logistic"):
    r""":math:`\mathcal L(\theta)=\frac1n\sum_i\ell(y_i\langle\beta(\theta),x_i\rangle)`, or
    :math:`\frac1{2n}\sum_i(\langle\beta(\theta),x_i\rangle-y_i)^2` for ``loss="squared"``."""
    loss = check_loss_data(loss, data)
    return jnp.mean(loss_fn(loss, loss_arguments(predictions(theta, data), data, loss)))
