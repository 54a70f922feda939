r"""Discrete updates :math:`\theta_{k+1}=\theta_k-\eta\nabla\mathcal L(\theta_k+\varepsilon_k)`."""

import equinox as eqx
import jax.numpy as jnp
from jax import lax

from ._config import release_compiled_when_crowded
from ._dynamics import euler_step, is_representable
from ._methods import AbstractMethod, check_method
from ._problem import Dataset, check_data, check_loss_data, check_theta
from ._trajectory import Status, Trajectory, make_trajectory
from ._validate import check_int, check_scalar


def iterate(
    method: AbstractMethod,
    data: Dataset,
    theta0,
    *,
    lr,
    steps: int,
    every: int = 1,
    loss: str = "logistic",
) -> Trajectory:
    r"""Discrete updates :math:`\theta_{k+1}=\theta_k-\eta\,\nabla\mathcal L(\hat\theta_k)`.

    Here :math:`\hat\theta_k=\theta_k+\varepsilon(\theta_k,\nabla\mathcal L(\theta_k))`.

    This is explicit Euler on the flow of :func:`flows.solve` with
    :math:`\Delta t=\eta`, so the iterates approach the flow at order 1 as
    :math:`\eta\to0` at matched time :math:`t=k\eta`. The loop is jit-compiled
    with ``lax.scan`` and works under ``jax.vmap`` over ``lr``, ``theta0`` and the
    method's parameters. LE-SAM's ``sigma`` may be a schedule of ``t = k * lr``.

    Exact ℓ∞-SAM takes :math:`\mathrm{sign}(0)=+1` (:meth:`flows.LinfSAM.control`): an
    iterate that rounding lands exactly on a weight :math:`w_{lj}=0` steps off it and
    chatters on, as its neighbours do, instead of being frozen at 0 with
    :math:`\hat w=0` (``sign(0) = 0``), which would drop the coordinate's share of the
    perturbed margin that the Filippov flow keeps; the order-1 approach to the flow then
    does not depend on where rounding puts the iterates (docs/theory.md §3).

    Arguments:
        method, data, theta0, loss: as in :func:`flows.solve`.
        lr: learning rate :math:`\eta>0`.
        steps: number of updates (a multiple of ``every``).
        every: save every ``every``-th iterate (the initial one is always saved).

    Returns:
        A :class:`Trajectory` with ``ts = k * lr`` for ``k = 0, every, ..., steps``;
        ``status`` is ``ok``, or ``nonfinite`` if any iterate (saved or not) had a
        non-finite :math:`\theta` or :math:`\beta(\theta)`: β can overflow while every
        weight is finite (a huge ``lr``), and the margins, the loss and the
        gradient are then no longer the true ones; or ``sigma_negative`` where a
        schedule has :math:`\sigma(k\eta)<0`: the updates stop before step :math:`k`
        (``t_end`` = :math:`k\eta`, ``n_steps`` = k, later saved iterates NaN).

    >>> import flows
    >>> data = flows.single_example([1.0, 2.0])
    >>> theta0 = flows.balanced_init(0.5, depth=2, d=2)
    >>> flows.iterate(flows.GD(), data, theta0, lr=0.1, steps=10, every=5).ts.tolist()
    [0.0, 0.5, 1.0]
    """
    release_compiled_when_crowded()
    check_method(method)
    check_data(data)
    theta0 = check_theta(theta0, data)
    loss = check_loss_data(loss, data)
    lr = check_scalar("lr", lr, positive=True)
    steps = check_int("steps", steps, minimum=1)
    every = check_int("every", every, minimum=1)
    if steps % every:
        raise ValueError(f"`steps` ({steps}) must be a multiple of `every` ({every}).")
    return _iterate(method, data, theta0, lr, steps=steps, every=every, loss=loss)


@eqx.filter_jit
def _iterate(method, data, theta0, lr, *, steps, every, loss):
    scheduled = method.time_dependent
    never = steps + 1  # `stop` while no step met σ(k·lr) < 0

    def chunk(carry, _):
        theta, k, ok, stop = carry

        def step(i, state):
            theta, ok, stop = state
            if scheduled:  # the update at k·lr reads σ(k·lr): none where it is negative
                negative = method.schedule_margin((k + i) * lr) <= 0
                stop = jnp.where((stop == never) & negative, k + i, stop)
            new = euler_step(method, data, loss, theta, lr, k + i)
            theta = jnp.where(stop == never, new, theta)
            return theta, ok & is_representable(theta), stop

        theta, ok, stop = lax.fori_loop(0, every, step, (theta, ok, stop))
        return (theta, k + every, ok, stop), theta

    ok0 = is_representable(theta0)
    carry0 = (theta0, 0, ok0, jnp.asarray(never))
    (theta_end, _, ok, stop), saved = lax.scan(chunk, carry0, None, length=steps // every)
    thetas = jnp.concatenate([theta0[None], saved])
    ts = jnp.arange(steps // every + 1) * (every * lr)
    stopped = stop < never
    status = jnp.where(stopped, Status.SIGMA_NEGATIVE, jnp.where(ok, Status.OK, Status.NONFINITE))
    return make_trajectory(
        ts,
        thetas,
        data,
        loss,
        status=status,
        t_end=jnp.where(stopped, stop * lr, ts[-1]),
        theta_end=theta_end,
        n_steps=jnp.minimum(stop, steps),
        n_rejected=0,
    )
