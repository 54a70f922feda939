"""Shared pieces of the figures: the run context, the style, saving, and the figure-data store.

Every figure is computed by :mod:`flows` (``flows.solve``, ``flows.iterate``,
``flows.sweep``) and :mod:`analysis`; this package only arranges the results and
draws them. A figure's data (the arrays it draws) are saved beside the sweep
caches, so ``python -m figures --redraw`` draws again without solving anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure

import analysis
from flows._sweep._store import _READ_ERRORS, _read_npz, _save_json, _save_npz, _sha256

# Okabe & Ito (2008), the colour-blind-safe qualitative palette.
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
GREY = "#BBBBBB"
METHOD_COLORS = {
    "GD": OKABE_ITO["black"],
    "ℓ2-SAM": OKABE_ITO["blue"],
    "ℓ∞-SAM": OKABE_ITO["vermillion"],
}

# Regime classes drawn by the maps: the codes of analysis.REGIMES (one definition).
COLLAPSE, SEQUENTIAL, DIRECT, MINOR, STALLED, UNDETERMINED = (
    analysis.REGIMES.index(name)
    for name in ("collapse", "sequential", "direct", "minor", "stalled", "undetermined")
)
REGIME_NAMES = (
    "collapse (R1)",
    "sequential (R2)",
    "direct (R3)",
    "minor wins",
    "stalled",
    "undetermined",
)
REGIME_COLORS = (
    GREY,
    OKABE_ITO["orange"],
    OKABE_ITO["blue"],
    OKABE_ITO["purple"],
    OKABE_ITO["sky"],
    "#FFFFFF",
)

# Printed sizes (inches): a paper's text width and one column of it.
FULL_WIDTH = 5.5
COLUMN_WIDTH = 2.7

STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "figure.titlesize": 8.5,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.1,
    "lines.markersize": 3.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.major.size": 2.5,
    "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5,
    "ytick.minor.size": 1.5,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
    "image.cmap": "viridis",
}


def regime_cmap():
    """Discrete colour map and norm for the regime codes of analysis.REGIMES."""
    n = len(REGIME_COLORS)
    return ListedColormap(REGIME_COLORS), BoundaryNorm(np.arange(-0.5, n + 0.5), n)


def index_cmap(d: int):
    """Discrete colour map for j† in 0..d-1 (viridis: minor dark, major light).

    Values -2 (collapsed) and -1 (run stopped / not reached) get grey and white.
    """
    viridis = matplotlib.colormaps["viridis"]
    colors = [GREY, "#FFFFFF"] + [viridis(k / max(d - 1, 1)) for k in range(d)]
    return ListedColormap(colors), BoundaryNorm(np.arange(-2.5, d + 0.5), d + 2)


@dataclasses.dataclass
class Context:
    """Where a run writes and how big it is.

    Attributes:
        out: folder for the PDF and PNG files.
        cache: folder for sweep caches (``cache/sweeps``) and figure data (``cache/data``).
        quick: the smoke version (small grids, loose boundaries) for CI and tests.
        progress: progress bars over sweep chunks.
        executor: where the figures' sweeps run (:func:`flows.sweep`'s ``executor``:
            ``None`` for host threads, ``"dask"`` or a ``dask.distributed.Client``).
    """

    out: Path
    cache: Path
    quick: bool = False
    progress: bool = True
    executor: object = None

    @property
    def sweeps(self) -> Path:
        return self.cache / "sweeps"

    def pick(self, full, quick):
        """``quick`` in the smoke version, else ``full``."""
        return quick if self.quick else full

    def log(self, message: str) -> None:
        if self.progress:
            print(f"  {message}", flush=True)


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """One figure: ``compute(ctx) -> data`` (arrays and numbers), ``draw(data) -> Figure``."""

    name: str
    summary: str
    compute: Callable[[Context], dict]
    draw: Callable[[dict], Figure]


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib Figure (no pyplot, no GUI backend) at its printed size, in inches.

    Call it inside :func:`styled` (``make`` and the ``phase`` command draw every
    figure there), so that axes, titles and legends made later take the style too.
    """
    if width > FULL_WIDTH + 1e-9:
        raise ValueError(f"`width` must be at most the text width {FULL_WIDTH} in; got {width}.")
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def styled(draw: Callable[[dict], Figure], data: dict) -> Figure:
    """``draw(data)`` with the package style in force for every artist it makes."""
    with matplotlib.rc_context(STYLE):
        return draw(data)


def panel_labels(axes, *, x: float = -0.02, y: float = 1.02) -> None:
    """Label panels (a), (b), ... in bold at the top left, outside the data."""
    for k, ax in enumerate(axes):
        ax.text(
            x, y, f"({chr(ord('a') + k)})", transform=ax.transAxes, ha="right", va="bottom",
            fontweight="bold", fontsize=STYLE["axes.titlesize"],
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


def save_figure(fig: Figure, out: Path, name: str) -> list[Path]:
    """Write ``out/name.pdf`` (vector) and ``out/name.png``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    with matplotlib.rc_context(STYLE):
        for path in paths:
            fig.savefig(path)
    return paths


def check_outputs(option: str, paths) -> None:
    """Each of ``paths`` (in a checked folder) can be written: not a folder, not read-only.

    Checked before anything is computed; a one-line ``ValueError`` naming ``option``.
    """
    for path in map(Path, paths):
        if path.is_dir():
            raise ValueError(f"{option}: the output {path} is a folder; move it or choose another.")
        if path.exists() and not os.access(path, os.W_OK):
            raise ValueError(f"{option}: the output {path} exists and is not writable.")


def folder_path(option: str, text) -> Path:
    """The folder named by an option's text; an empty one (``--out=``) is refused, not ``.``."""
    if not isinstance(text, (str, os.PathLike)) or not str(text).strip():
        raise ValueError(f"{option} must name a folder; got {text!r}.")
    return Path(text)


def check_folder(option: str, folder: Path, *, create: bool) -> Path:
    """``folder`` as a writable folder (made if ``create``), else a one-line ``ValueError``.

    ``option`` names the command-line option (``--out``, ``--cache``) in the message.
    """
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option} {folder} is a file, not a folder.")
    if not folder.exists():
        if not create:
            raise ValueError(f"{option} {folder}: no such folder.")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(
                f"{option} {folder}: cannot create the folder ({err.strerror or err})."
            ) from None
    if create and not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {folder}: the folder is not writable.")
    return folder


def data_paths(ctx: Context, name: str) -> tuple[Path, Path]:
    stem = f"{name}-quick" if ctx.quick else name
    folder = ctx.cache / "data"
    return folder / f"{stem}.npz", folder / f"{stem}.json"


def save_data(ctx: Context, name: str, data: dict, seconds: float) -> Path:
    """Save a figure's data (``cache/data/<name>[-quick].npz`` + ``.json``) for redrawing.

    Both files are written atomically; the JSON records the SHA-256 of the ``.npz``
    and its array names, which :func:`load_data` checks, as the sweep checks its chunks.
    """
    npz, meta = data_paths(ctx, name)
    npz.parent.mkdir(parents=True, exist_ok=True)
    arrays = {k: np.asarray(v) for k, v in data.items()}
    _save_npz(npz, arrays)
    _save_json(
        meta,
        {
            "figure": name,
            "quick": ctx.quick,
            "seconds": seconds,
            "saved": time.ctime(),
            "arrays": sorted(arrays),
            "sha256": _sha256(npz),
        },
    )
    return npz


def load_data(ctx: Context, name: str) -> dict:
    """The data saved by the last :func:`save_data` of this figure.

    Raises one ``ValueError`` naming the file if there is none, or if it is damaged:
    unreadable JSON, an ``.npz`` that does not match the SHA-256 recorded beside it
    (garbage, truncated, rewritten), fails a member's CRC or lacks a recorded array.
    """
    npz, meta = data_paths(ctx, name)
    if not npz.exists():
        raise ValueError(
            f"no saved data for figure {name!r} in {npz.parent}; run it once without --redraw."
        )
    try:
        record = json.loads(meta.read_text())
        if not isinstance(record, dict) or "sha256" not in record:
            raise ValueError(f"{meta.name} records no checksum")
        if _sha256(npz) != record["sha256"]:
            raise ValueError(f"{npz.name} does not match the checksum in {meta.name}")
        arrays = _read_npz(npz)
        missing = sorted(set(record.get("arrays", [])) - set(arrays))
        if missing:
            raise ValueError(f"{npz.name} lacks the arrays {missing}")
    except _READ_ERRORS as err:
        raise ValueError(
            f"--redraw: the saved data of figure {name!r} in {npz.parent} is damaged "
            f"({type(err).__name__}: {err}); run it again without --redraw."
        ) from None
    return arrays


def sweep(ctx: Context, fn, params, **kwargs):
    """:func:`flows.sweep` with this run's cache folder, progress setting and executor."""
    import flows

    return flows.sweep(
        fn, params, cache_dir=ctx.sweeps, progress=ctx.progress, executor=ctx.executor, **kwargs
    )
