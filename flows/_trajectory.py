"""The result type shared by every backend and by the discrete updates."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._dynamics import clock_of, theta_of
from ._problem import Dataset, beta, loss_arguments, loss_fn, predictions


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
    nonfinite 5    a non-finite state, or any other solver failure (e.g.
                   scipy's event root finder not converging)
    sliding_f 6    ``sliding_failed``: the Newton solve for a Filippov sliding
                   control (ℓ∞-SAM) left a residual
    sigma_neg 7    ``sigma_negative``: an LE-SAM schedule σ(t) fell below 0 at
                   the real time ``t_real_end`` (located by root finding, or
                   already at the start); the rule has no budget past it
    ========= ==== =====================================================
    """

    OK = 0
    COLLAPSED = 1
    ESCAPED = 2
    CONVERGED = 3
    MAX_STEPS = 4
    NONFINITE = 5
    SLIDING_FAILED = 6
    SIGMA_NEGATIVE = 7
    NAMES = (
        "ok", "collapsed", "escaped", "converged", "max_steps", "nonfinite", "sliding_failed",
        "sigma_negative",
    )  # fmt: skip

    @classmethod
    def name(cls, code) -> str | np.ndarray:
        """Readable name(s) for an integer code or an array of codes.

        Codes 0..7 are the statuses above; -1, the fill of :func:`flows.sweep` for a point whose
        evaluation raised (no status), reads ``"failed"``. Anything else is a ``ValueError``.
        """
        try:
            codes = np.asarray(None if isinstance(code, (str, bytes)) else code)
        except ValueError:  # ragged
            codes = np.asarray(None)
        if codes.dtype.kind not in "iu" or np.any(codes < -1) or np.any(codes >= len(cls.NAMES)):
            raise ValueError(
                f"`code` must be an integer status code 0..{len(cls.NAMES) - 1} (or -1, a failed "
                f"sweep point) or an array of them; got {code!r}."
            )
        names = np.asarray((*cls.NAMES, "failed"))[codes]  # -1: the last entry
        return str(names) if codes.ndim == 0 else names


class DenseOutput(eqx.Module):
    r"""The solver's dense output :math:`\theta(s)` on :math:`[0, s_{end}]`, step by step.

    Step :math:`i` covers :math:`[s_i, s_{i+1})` (``starts``) with the solver's local
    interpolant built on :math:`[s_i, e_i]` (``ends``; :math:`e_i>s_{i+1}` for the last
    step of a segment that an event cut short). One run of a smooth solver is one
    segment; a Filippov solve is several, joined at their events.
    ``evaluate`` is NaN outside :math:`[0, s_{end}]`, like diffrax's.
    """

    starts: jax.Array  # (N + 1,) padded with +inf
    ends: jax.Array  # (N,)
    infos: dict  # the local interpolants' data, leading axis N
    size: jax.Array  # the number of steps used
    s_end: jax.Array
    y0: object  # the state at 0 (returned where no step was taken)
    interpolation_cls: Callable = eqx.field(static=True)
    rescaled: bool = eqx.field(static=True, default=False)

    @classmethod
    def from_diffrax(cls, interpolation, s_end, y0, rescaled):
        """From one ``diffrax.DenseInterpolation`` (a run without segments)."""
        ts = interpolation.ts
        return cls(
            ts, ts[1:], interpolation.infos, interpolation.ts_size - 1, s_end, y0,
            interpolation.interpolation_cls, rescaled,
        )  # fmt: skip

    @property
    def ts(self):
        """The step boundaries (padded with +inf), like ``diffrax.DenseInterpolation.ts``."""
        return self.starts

    def state(self, s):
        """The integrated state at ``s`` (θ, or (θ, c) for the rescaled flow)."""
        s = jnp.asarray(s, dtype=jnp.float64)
        i = jnp.clip(jnp.searchsorted(self.starts, s, side="right") - 1, 0, self.size - 1)
        infos = jax.tree.map(lambda x: x[i], self.infos)
        y = self.interpolation_cls(t0=self.starts[i], t1=self.ends[i], **infos).evaluate(s)
        y = jax.tree.map(lambda a, b: jnp.where(self.size > 0, a, b), y, self.y0)
        inside = (s >= 0) & (s <= self.s_end)
        return jax.tree.map(lambda a: jnp.where(inside, a, jnp.nan), y)

    def evaluate(self, s):
        """θ(s), shape ``(L, d)``."""
        return theta_of(self.state(s))

    def derivative(self, s):
        """dθ/ds of the interpolant."""
        s = jnp.asarray(s, dtype=jnp.float64)
        return jax.jvp(self.evaluate, (s,), (jnp.ones_like(s),))[1]

    def t_real(self, s):
        """The real time at ``s`` (``s`` itself unless the flow is rescaled; see
        :attr:`Trajectory.t_real`)."""
        return clock_of(self.state(s), jnp.asarray(s, dtype=jnp.float64), self.rescaled)


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
        t_real: the real time t at each saving time, shape ``(T,)``: ``ts`` itself,
            except for the rescaled flow, where it is :math:`t(\tau)`, carried in the
            state (:math:`dt/d\tau=1/(-\ell'(m(\hat\theta)))`) when the rule reads the
            time or ``SolverOptions(real_time=True)``, and ``inf`` once
            :math:`dt/d\tau` passed :math:`e^{30}`; NaN where not carried.
        t_real_end: the real time at ``t_end``.
        ambiguous: True where the ℓ∞-SAM Filippov selection is not determined by the
            discrete iterates' limit (a coordinate whose layers died at different
            times, or more sign-dependent sliding coordinates than are enumerated;
            see ``flows._filippov``); ``solve`` warns then. False otherwise.
        interpolation: a :class:`DenseOutput` when solved with ``dense=True``
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
    t_real: jax.Array
    t_real_end: jax.Array
    ambiguous: jax.Array
    interpolation: DenseOutput | None = None

    def evaluate(self, t):
        """θ(t) from the dense output, for ``0 <= t <= t_end`` (needs ``dense=True``).

        ``t`` is on the trajectory's own clock (τ for a rescaled flow).
        """
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
    t_real=None,
    t_real_end=None,
    ambiguous=False,
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
    preds = jax.vmap(predictions, (0, None))(thetas, data)
    loss_values = jnp.mean(loss_fn(loss, loss_arguments(preds, data, loss)), axis=-1)
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
        t_real=jnp.where(reached, ts if t_real is None else t_real, jnp.nan),
        t_real_end=jnp.asarray(t_end if t_real_end is None else t_real_end, dtype=jnp.float64),
        ambiguous=jnp.asarray(ambiguous, dtype=bool),
        interpolation=interpolation,
    )
