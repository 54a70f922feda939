"""The result type shared by every backend and by the discrete updates."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._problem import Dataset, beta, loss_fn, margins


class Status:
    """Integer status codes of a :class:`Trajectory` (integers survive ``vmap``).

    ========= ==== =====================================================
    name      code meaning
    ========= ==== =====================================================
    ok        0    reached the final time (or ran every discrete step)
    collapsed 1    ‖θ‖ fell to ``collapse_tol · ‖θ₀‖`` (collapse to the origin)
    escaped   2    ‖θ‖ rose to ``escape_tol · ‖θ₀‖`` (escape past a norm bound)
    converged 3    the loss fell to ``loss_tol``
    max_steps 4    the solver's step budget ran out
    nonfinite 5    a non-finite state, or any other solver failure
    ========= ==== =====================================================
    """

    OK = 0
    COLLAPSED = 1
    ESCAPED = 2
    CONVERGED = 3
    MAX_STEPS = 4
    NONFINITE = 5
    NAMES = ("ok", "collapsed", "escaped", "converged", "max_steps", "nonfinite")

    @classmethod
    def name(cls, code) -> str | np.ndarray:
        """Readable name(s) for an integer code or an array of codes."""
        codes = np.asarray(code)
        names = np.asarray(cls.NAMES)[codes]
        return str(names) if codes.ndim == 0 else names


class Trajectory(eqx.Module):
    r"""A solved trajectory :math:`\theta(t)` (a pytree: it can be vmapped and jitted).

    Attributes:
        ts: saving times, shape ``(T,)`` (for a rescaled flow, the clock τ;
            for discrete updates, ``k * lr``).
        thetas: parameters, shape ``(T, L, d)``. Entries at times after the run
            stopped (see ``status`` and ``t_end``) are NaN; ``reached`` masks them.
        beta: :math:`\beta=\prod_l w^{(l)}`, shape ``(T, d)``.
        loss: :math:`\mathcal L(\theta)`, shape ``(T,)``.
        status: integer code, see :class:`Status`; ``status_name`` reads it.
        t_end: the time at which the run stopped (event times are located by
            root-finding on the solver's dense output).
        theta_end: the state at ``t_end``, shape ``(L, d)``.
        n_steps: accepted + rejected solver steps (discrete: number of updates).
        n_rejected: rejected steps (``-1`` where the backend does not report it,
            i.e. scipy).
        n_switches: switching events of a nonsmooth (ℓ∞-SAM) flow; 0 otherwise.
        t_sliding: time spent sliding on switching surfaces (ℓ∞-SAM); 0 otherwise.
        interpolation: the solver's dense output when solved with ``dense=True``
            (diffrax), else None; see :meth:`evaluate`.
    """

    ts: jax.Array
    thetas: jax.Array
    beta: jax.Array
    loss: jax.Array
    status: jax.Array
    t_end: jax.Array
    theta_end: jax.Array
    n_steps: jax.Array
    n_rejected: jax.Array
    n_switches: jax.Array
    t_sliding: jax.Array
    interpolation: diffrax.DenseInterpolation | None = None

    def evaluate(self, t):
        """θ(t) from the dense output, for ``0 <= t <= t_end`` (needs ``dense=True``)."""
        if self.interpolation is None:
            raise ValueError("`evaluate` needs a trajectory solved with dense=True (diffrax).")
        return self.interpolation.evaluate(t)

    @property
    def status_name(self):
        """Readable status (a string, or an array of strings for a batch)."""
        return Status.name(self.status)

    @property
    def reached(self):
        """Mask of the saving times the run actually reached, shape ``(T,)``."""
        return self.ts <= jnp.expand_dims(self.t_end, -1)


def make_trajectory(
    ts,
    thetas,
    data: Dataset,
    loss: str,
    *,
    status,
    t_end,
    theta_end,
    n_steps,
    n_rejected,
    n_switches=0,
    t_sliding=0.0,
    interpolation=None,
) -> Trajectory:
    """Build a :class:`Trajectory`, computing β and the loss from the saved θ.

    Saved states at times after ``t_end`` are replaced by NaN so that no value is
    reported for a time the run never reached.
    """
    ts = jnp.asarray(ts, dtype=jnp.float64)
    reached = ts <= t_end
    thetas = jnp.where(reached[:, None, None], thetas, jnp.nan)
    b = beta(thetas)
    loss_values = jnp.mean(loss_fn(loss, jax.vmap(margins, (0, None))(thetas, data)), axis=-1)
    as_int = lambda x: jnp.asarray(x, dtype=jnp.int64)  # noqa: E731
    return Trajectory(
        ts=ts,
        thetas=thetas,
        beta=b,
        loss=loss_values,
        status=as_int(status),
        t_end=jnp.asarray(t_end, dtype=jnp.float64),
        theta_end=theta_end,
        n_steps=as_int(n_steps),
        n_rejected=as_int(n_rejected),
        n_switches=as_int(n_switches),
        t_sliding=jnp.asarray(t_sliding, dtype=jnp.float64),
        interpolation=interpolation,
    )
