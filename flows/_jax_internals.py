"""The only two questions samflows asks of JAX's private modules (``jax._src``).

JAX has no public way to ask either, so both are read here, each behind a fallback
that answers safely when a JAX release moves or renames the internal.
"""

from __future__ import annotations


def backend_started() -> bool | None:
    """Whether JAX has started its XLA backends in this process (None: cannot tell).

    XLA reads ``XLA_FLAGS`` when the first backend starts; a flag set later has no effect.
    """
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # pragma: no cover - a future JAX
        return None


def trace_clean() -> bool:
    """Whether no JAX trace (jit, vmap, grad, ...) is in progress; False when it cannot tell."""
    try:
        from jax._src.core import trace_state_clean
    except ImportError:  # pragma: no cover - a future JAX
        return False
    return trace_state_clean()
