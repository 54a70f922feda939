"""Measurements and predictions built on :mod:`flows`: dominant index, switch times, regimes and
their boundaries, max-margin limits, and the theorem-check report (``python -m analysis check``).

The public names below are imported on first use, so that ``python -m analysis --help``
(and a bad flag) answers without loading JAX; using any of them imports :mod:`flows`, which
enables float64.
"""

from ._lazy import lazy_exports

_EXPORTS = {
    "Boundary": "_boundary",
    "boundary": "_boundary",
    "critical_alpha": "_boundary",
    "direct_alpha": "_boundary",
    "L2SAMThresholds": "_bounds",
    "l2sam_thresholds": "_bounds",
    "certificate": "_certify",
    "limit_leader": "_predict",
    "linf_tie": "_predict",
    "perturbation_bound": "_certify",
    "Clock": "_clock",
    "clock_grid": "_clock",
    "norm_clock": "_clock",
    "Switches": "_dominant",
    "dominant_at": "_dominant",
    "dominant_index": "_dominant",
    "fastest_growing_index": "_dominant",
    "log_abs_beta": "_dominant",
    "switch_times": "_dominant",
    "LimitMap": "_limits",
    "limit_map": "_limits",
    "Rate": "_margin",
    "convergence_order": "_margin",
    "convergence_rate": "_margin",
    "direction_cosine": "_margin",
    "limit_class": "_margin",
    "limit_direction": "_margin",
    "LogLaw": "_margin",
    "log_law": "_margin",
    "max_margin": "_margin",
    "phase_diagram": "_phase",
    "PHASE_AXES": "_phase",
    "METHOD_PARAMETERS": "_inputs",
    "Plateau": "_plateau",
    "loss_plateau": "_plateau",
    "Problem": "_problem",
    "RunOptions": "_options",
    "REGIMES": "_regime",
    "RegimePath": "_path",
    "regime": "_path",
    "regime_code": "_regime",
    "regime_path": "_path",
    "kernel_rich_limit": "_regression",
    "Radius": "_sharpness",
    "Sharpness": "_sharpness",
    "margin_gradient_norm": "_sharpness",
    "at_loss": "_sharpness",
    "lesam_radius": "_sharpness",
    "sharpness": "_sharpness",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
