"""The figures' visual language: one meaning per colour, line style and hatch, in every figure.

Every figure of this package (and the ``phase`` command) draws with these names; nothing here
computes anything about the flows.

* **Size.** A figure is made at its printed width, :data:`FULL_WIDTH` (5.5 in, a paper's text
  width) or :data:`COLUMN_WIDTH` (2.7 in), and saved at exactly that size: constrained layout
  keeps every label inside the page, and no tight bounding box widens it.
* **Text.** :data:`FONT_SIZE` (8 pt) for every label, tick, legend and panel title, and never
  below :data:`MIN_TEXT` (7 pt). Mathtext sets sub- and superscripts at 70 % of the text
  (:data:`SCRIPT_SCALE`): 5.6 pt at 8 pt, above :data:`MIN_SCRIPT` (5.5 pt). Plain text without
  scripts may use :data:`SMALL_SIZE` (7 pt).
* **j, the coordinate index** (drawn 1-based): :data:`J_CMAP`, viridis from minor (dark) to
  major (light), cut at 0.9 so that the major coordinate's line stays visible on white. Used for
  lines (:func:`j_color`) and maps (:func:`index_cmap`) alike, and for nothing else.
* **Methods**: :data:`METHOD_COLORS`, Okabe–Ito (GD black, ℓ2-SAM blue, ℓ∞-SAM vermillion,
  LE-SAM green), saturated and drawn as lines and markers, never as fills.
* **Line style has one meaning, in every figure**: a curve of data, and a boundary or tie line
  computed by :mod:`analysis`, is solid; a dashed line is α_direct (:data:`ALPHA_DIRECT_LINE`)
  and nothing else; a dotted line is a reference (:data:`REFERENCE`: a bound, a level, a fitted
  or guide line, a switch time :data:`SWITCH`) and nothing else. α_c is solid
  (:data:`ALPHA_C_LINE`, black unless it is a method's own boundary, then in its colour). Curves
  are told apart by colour (the method, or j) and, within one colour, by open markers along the
  line: the α of a run (:data:`ALPHA_MARKERS`), or a method's variant (:data:`VARIANT`). The
  lines of α_c, α_direct and the references carry their role as their ``gid`` ("alpha_c",
  "alpha_direct", "reference"), which tests/test_style.py reads.
* **Regimes**: :data:`REGIME_COLORS`, light fills (Paul Tol's "light" scheme) whose hues are
  not the methods'; collapse is grey, as "collapsed" in the j maps.
* **No answer** (a run that stopped in the blow-up, an undetermined cell): hatched
  (:func:`draw_classes`, :func:`hatch_handle`), never white, the colour of the page.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

# --- sizes and text ----------------------------------------------------------------------

#: Printed widths (inches): a paper's text width and one column of it. Nothing else.
FULL_WIDTH = 5.5
COLUMN_WIDTH = 2.7
WIDTHS = (FULL_WIDTH, COLUMN_WIDTH)
FONT_SIZE = 8.0
SMALL_SIZE = 7.0  # plain text only: a script at 70 % of it would print below MIN_SCRIPT
MIN_TEXT = 7.0
MIN_SCRIPT = 5.5
SCRIPT_SCALE = 0.7  # matplotlib's mathtext: one level of sub/superscript

STYLE = {
    "font.size": FONT_SIZE,
    "axes.titlesize": FONT_SIZE,
    "axes.labelsize": FONT_SIZE,
    "figure.titlesize": FONT_SIZE,
    "legend.fontsize": FONT_SIZE,
    "legend.title_fontsize": FONT_SIZE,
    "legend.frameon": False,
    "legend.handlelength": 1.6,
    "legend.handletextpad": 0.5,
    "legend.columnspacing": 1.0,
    "legend.labelspacing": 0.3,
    "legend.borderaxespad": 0.3,
    "xtick.labelsize": FONT_SIZE,
    "ytick.labelsize": FONT_SIZE,
    "axes.titlepad": 3.0,
    "axes.labelpad": 2.0,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.1,
    "lines.markersize": 3.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5,
    "ytick.minor.size": 1.5,
    "xtick.major.pad": 2.0,
    "ytick.major.pad": 2.0,
    "hatch.linewidth": 0.5,
    "figure.dpi": 100,
    "figure.constrained_layout.w_pad": 0.02,
    "figure.constrained_layout.h_pad": 0.02,
    "savefig.dpi": 200,
    "savefig.bbox": "standard",  # the page is the figure: never widened by a tight box
    "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
    "image.cmap": "viridis",
}

# --- colours -----------------------------------------------------------------------------

# Okabe & Ito (2008), the colour-blind-safe qualitative palette: the methods' colours.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
METHOD_COLORS = {
    "GD": OKABE_ITO["black"],
    "ℓ2-SAM": OKABE_ITO["blue"],
    "ℓ∞-SAM": OKABE_ITO["vermillion"],
    "LE-SAM": OKABE_ITO["green"],
}
#: The methods' names as drawn (mathtext).
METHOD_LABELS = {
    "GD": "GD",
    "ℓ2-SAM": r"$\ell_2$-SAM",
    "ℓ∞-SAM": r"$\ell_\infty$-SAM",
    "LE-SAM": "LE-SAM",
}

GREY = "#BBBBBB"  # collapse / collapsed, in the regime maps and the j maps alike
#: j, the coordinate index: viridis from the minor coordinate (dark) to the major (light).
J_CMAP = ListedColormap(matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, 256)), "j")

# Regime fills (Paul Tol's "light" scheme): light, and none of the methods' hues.
REGIME_FILLS = {
    "collapse": GREY,
    "sequential": "#EEDD88",  # light yellow: minor first, major last
    "excursion": "#CCDDAA",  # pale green (Tol's "pale"): major first, a minor excursion
    "direct": "#99DDFF",  # light cyan
    "minor": "#FFAABB",  # pink
    "stalled": "#C8B4E0",  # lavender: no j colour (viridis' light end is yellow-green) nor method
    "undetermined": None,  # hatched
}

# --- lines and hatching ------------------------------------------------------------------

ALPHA_C_LINE = dict(color="k", ls="-", lw=0.9, gid="alpha_c")
ALPHA_DIRECT_LINE = dict(color="k", ls="--", lw=0.9, gid="alpha_direct")
REFERENCE = dict(color="0.35", ls=":", lw=0.9, gid="reference")
#: A switch time of j† (a reference line, lighter than a bound: it stands behind the data).
SWITCH = {**REFERENCE, "color": "0.6", "lw": 0.6}
#: α of the runs drawn side by side (solid lines of one colour), in the order given.
ALPHA_MARKERS = ("o", "s", "^", "v")
#: Open markers along a solid line: a variant of a method drawn in its colour, or one α of
#: several (with :data:`ALPHA_MARKERS`); spaced in display space, so on log axes too.
VARIANT = dict(mfc="w", ms=3.2, mew=0.7, markevery=0.09)
HATCH = "/////"
HATCH_COLOR = "0.55"


def j_color(j: int, d: int):
    """The colour of coordinate ``j`` (0-based) of ``d``: minor dark, major light."""
    return J_CMAP(j / max(d - 1, 1))


def j_label(j: int) -> str:
    """Coordinate ``j`` (0-based), as drawn: 1-based."""
    return f"$j={j + 1}$"


def index_cmap(d: int):
    """Discrete colour map and norm for j† in 0..d-1 (:func:`j_color`), -2 collapsed (grey) and
    -1 "run stopped" (hatched by :func:`draw_classes`; its colour here is never seen)."""
    colors = [GREY, "#FFFFFF"] + [j_color(k, d) for k in range(d)]
    return ListedColormap(colors), BoundaryNorm(np.arange(-2.5, d + 0.5), d + 2)


def regime_colors(names) -> list:
    """The fill of each regime name of ``names`` (``None``: hatched)."""
    return [REGIME_FILLS[n] for n in names]


def class_cmap(fills):
    """Discrete colour map and norm for the codes 0..n-1 with ``fills`` (``None``: hatched)."""
    n = len(fills)
    colors = ["#FFFFFF" if c is None else c for c in fills]
    return ListedColormap(colors), BoundaryNorm(np.arange(-0.5, n + 0.5), n)


def draw_classes(ax, x_edges, y_edges, codes, cmap, norm, hatched=()):
    """``pcolormesh`` of integer ``codes`` with the cells whose code is in ``hatched`` left out,
    over a hatched axes background: they show hatched, never white."""
    codes = np.asarray(codes)
    masked = np.ma.masked_where(np.isin(codes, list(hatched)), codes)
    if np.ma.is_masked(masked):
        ax.patch.set_hatch(HATCH)
        ax.patch.set_edgecolor(HATCH_COLOR)
        ax.patch.set_linewidth(0.0)
    return ax.pcolormesh(
        x_edges, y_edges, masked, cmap=cmap, norm=norm, shading="flat", rasterized=True
    )


def fill_handle(color, label: str) -> Patch:
    """A legend entry for a filled class (``color`` ``None``: hatched)."""
    if color is None:
        return hatch_handle(label)
    return Patch(facecolor=color, edgecolor="0.3", lw=0.5, label=label)


def hatch_handle(label: str) -> Patch:
    """A legend entry for the hatched class (no answer: the run stopped, undetermined)."""
    return Patch(facecolor="#FFFFFF", edgecolor=HATCH_COLOR, hatch=HATCH, lw=0.5, label=label)


# --- figures -----------------------------------------------------------------------------


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib Figure (no pyplot, no GUI backend) at its printed size, in inches.

    ``width`` is :data:`FULL_WIDTH` or :data:`COLUMN_WIDTH`. Call it inside :func:`styled`
    (``make`` and the ``phase`` command draw every figure there), so that axes, titles and
    legends made later take the style too.
    """
    if not any(abs(width - w) < 1e-9 for w in WIDTHS):
        raise ValueError(
            f"`width` must be the text width {FULL_WIDTH} in or the column {COLUMN_WIDTH} in; "
            f"got {width}."
        )
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def styled(draw: Callable, *args, **kwargs) -> Figure:
    """``draw(*args, **kwargs)`` with the style in force for every artist it makes."""
    with matplotlib.rc_context(STYLE):
        return draw(*args, **kwargs)


def save_figure(fig: Figure, out: Path, name: str) -> list[Path]:
    """Write ``out/name.pdf`` (vector) and ``out/name.png`` at the figure's size; the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    with matplotlib.rc_context(STYLE):
        for path in paths:
            fig.savefig(path, bbox_inches=None)
    return paths


def panel_labels(axes, *, x: float = -0.02, y: float = 1.02) -> None:
    """Label panels (a), (b), ... in bold at the top left, outside the data."""
    for k, ax in enumerate(axes):
        ax.text(
            x, y, f"({chr(ord('a') + k)})", transform=ax.transAxes, ha="right", va="bottom",
            fontweight="bold", fontsize=FONT_SIZE,
        )  # fmt: skip


def plain_log_ticks(ax, axis: str = "both") -> None:
    """Log-axis tick labels as plain decimals (0.2, 1, 10) instead of 2×10⁻¹.

    Keeps powers of ten above 10⁴ or below 10⁻³, where plain decimals get long.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def fmt(v, _pos):
        if v <= 0 or not (1e-3 <= v < 1e4):
            e = np.log10(v) if v > 0 else 0.0
            return f"$10^{{{int(round(e))}}}$" if v > 0 and abs(e - round(e)) < 1e-9 else ""
        return f"{v:g}"

    for name in ("x", "y") if axis == "both" else (axis,):
        a = getattr(ax, f"{name}axis")
        a.set_major_formatter(FuncFormatter(fmt))
        a.set_minor_formatter(NullFormatter())


def cell_edges(x, log: bool = True) -> np.ndarray:
    """Cell edges around grid values ``x`` for ``pcolormesh``: midpoints (geometric on a log axis).

    >>> np.round(cell_edges([1.0, 4.0, 16.0]), 12).tolist()
    [0.5, 2.0, 8.0, 32.0]
    """
    t = np.log(x) if log else np.asarray(x, dtype=float)
    if t.ndim != 1 or t.size < 2:
        raise ValueError(f"`x` must be a 1-D array of at least 2 values; got shape {np.shape(x)}.")
    mid = (t[1:] + t[:-1]) / 2
    e = np.concatenate([[2 * t[0] - mid[0]], mid, [2 * t[-1] - mid[-1]]])
    return np.exp(e) if log else e
