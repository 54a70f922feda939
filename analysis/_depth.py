r"""The depth study: regime boundaries and :math:`j^\dagger` paths of one method at L = 2…8.

``python -m analysis depth`` prints, for ℓ2-SAM (ρ = 1) on μ = (1,…,5) by default, one row per
depth: :math:`k_c=\alpha_c/\rho` (:func:`analysis.critical_alpha`; none at odd :math:`L`, where
the weights never decrease), :math:`k_{direct}=\alpha_{direct}/\rho`
(:func:`analysis.direct_alpha`), and the :math:`j^\dagger` sequences (1-based, as in the
figures) of :func:`analysis.regime_path` just above :math:`\alpha_c` and at :math:`2\alpha_c`
(at odd :math:`L`: at :math:`\alpha=0.01\rho` and :math:`0.5\,\alpha_{direct}`).
"""

import math
import sys

import flows

from ._boundary import critical_alpha, direct_alpha
from ._path import regime_path


def _path(method, mu, alpha, depth) -> str:
    p = regime_path(method, mu, alpha, depth)
    return f"{' → '.join(str(j + 1) for j in p.sequence)} ({p.regime})"


def depth_table(
    mu=(1.0, 2.0, 3.0, 4.0, 5.0), depths=range(2, 9), rho: float = 1.0, progress: bool = False
) -> list:
    r"""One dict per depth: ``depth``, ``k_c``, ``k_direct``, ``near``, ``far`` (see module);
    ``progress``: one line on stderr per depth as it starts."""
    method = flows.L2SAM(rho)
    rows = []
    for depth in depths:
        if progress:
            print(f"L = {depth} ...", file=sys.stderr, flush=True)
        a_c = critical_alpha(method, mu, depth, bracket_rtol=1e-8)
        a_d = direct_alpha(method, mu, depth, bracket_rtol=1e-8)
        if math.isnan(a_c):
            near, far = 0.01 * rho, 0.5 * a_d
            labels = ("0.01ρ", "α_direct/2")
        else:
            near, far = a_c * (1 + 1e-3), 2 * a_c
            labels = ("1.001 α_c", "2 α_c")
        rows.append(
            dict(
                depth=depth,
                k_c=a_c / rho,
                k_direct=a_d / rho,
                near=f"{labels[0]}: {_path(method, mu, near, depth)}",
                far=f"{labels[1]}: {_path(method, mu, far, depth)}",
            )
        )
    return rows


def format_markdown(rows) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| L | k_c = α_c/ρ | k_direct | j† just above α_c | j† further up |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        k_c = "none (no collapse)" if math.isnan(r["k_c"]) else f"{r['k_c']:.8f}"
        lines.append(f"| {r['depth']} | {k_c} | {r['k_direct']:.8f} | {r['near']} | {r['far']} |")
    return "\n".join(lines)
