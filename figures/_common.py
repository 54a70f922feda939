"""Shared pieces of the figures: the run context, the regime classes, and the figure-data store.

Every figure is computed by :mod:`flows` (``flows.solve``, ``flows.iterate``,
``flows.sweep``) and :mod:`analysis`; this package only arranges the results and
draws them, in the visual language of :mod:`figures._style`. A figure's data (the arrays it
draws) are saved beside the sweep caches, so ``python -m figures --redraw`` draws again
without solving anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import analysis
from flows.internal import READ_ERRORS, file_sha256, read_npz, save_json, save_npz

from ._style import class_cmap, draw_classes, fill_handle, regime_colors

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Regime classes drawn by the maps: the codes of analysis.REGIMES (one definition); their
# fills are figures._style.REGIME_FILLS.
COLLAPSE, SEQUENTIAL, DIRECT, MINOR, STALLED, UNDETERMINED, EXCURSION = (
    analysis.REGIMES.index(name)
    for name in (
        "collapse", "sequential", "direct", "minor", "stalled", "undetermined", "excursion"
    )
)  # fmt: skip
REGIME_NAMES = (
    "collapse (R1)",
    "sequential (R2)",
    "direct (R3)",
    "minor wins",
    "stalled",
    "undetermined",
    "major first, minor excursion",
)
#: The legend's order of the regimes: by the scale at which they occur along α at fixed ρ.
LEGEND_ORDER = (COLLAPSE, EXCURSION, SEQUENTIAL, DIRECT, MINOR, STALLED, UNDETERMINED)
REGIME_COLORS = regime_colors(analysis.REGIMES)


def regime_cmap():
    """Discrete colour map and norm for the regime codes of analysis.REGIMES."""
    return class_cmap(REGIME_COLORS)


def regime_handles(present):
    """Legend entries of the regime codes in ``present``, in :data:`LEGEND_ORDER`."""
    return [fill_handle(REGIME_COLORS[k], REGIME_NAMES[k]) for k in LEGEND_ORDER if k in present]


def draw_regimes(ax, x_edges, y_edges, codes):
    """The regime codes as filled cells, undetermined ones hatched."""
    cmap, norm = regime_cmap()
    return draw_classes(ax, x_edges, y_edges, codes, cmap, norm, hatched=(UNDETERMINED,))


def sequence_text(sequence) -> str:
    """A j† sequence (0-based indices) as the figures draw it, 1-based: '2→1→2→3→4→5'."""
    return r"$\to$".join(str(int(j) + 1) for j in sequence)


@dataclasses.dataclass
class Context:
    """Where a run writes and how big it is.

    Attributes:
        out: folder for the PDF and PNG files.
        cache: folder for sweep caches (``cache/sweeps``) and figure data (``cache/data``).
        quick: the smoke version (small grids, loose boundaries) for CI and tests.
        progress: progress lines, and bars over sweep chunks (if ``bars``).
        bars: progress bars (off where processes make figures side by side: their lines
            name their figure instead).
        figure: the figure being made (named by the progress lines when ``bars`` is off).
        executor: where the figures' sweeps run (:func:`flows.sweep`'s ``executor``:
            ``None`` for host threads, ``"dask"`` or a ``dask.distributed.Client``).
    """

    out: Path
    cache: Path
    quick: bool = False
    progress: bool = True
    executor: object = None
    bars: bool = True
    figure: str = ""

    @property
    def sweep_bars(self) -> bool:
        """Progress bars over sweep chunks: with ``progress``, unless ``bars`` is off."""
        return self.progress and self.bars

    @property
    def sweeps(self) -> Path:
        return self.cache / "sweeps"

    def pick(self, full, quick):
        """``quick`` in the smoke version, else ``full``."""
        return quick if self.quick else full

    def log(self, message: str) -> None:
        if self.progress:
            print(f"  {message}" if self.bars else f"[{self.figure}]   {message}", flush=True)


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """One figure: ``compute(ctx) -> data`` (arrays and numbers), ``draw(data) -> Figure``."""

    name: str
    summary: str
    compute: Callable[[Context], dict]
    draw: Callable[[dict], Figure]


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
    save_npz(npz, arrays)
    save_json(
        meta,
        {
            "figure": name,
            "quick": ctx.quick,
            "seconds": seconds,
            "saved": time.ctime(),
            "arrays": sorted(arrays),
            "sha256": file_sha256(npz),
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
        if file_sha256(npz) != record["sha256"]:
            raise ValueError(f"{npz.name} does not match the checksum in {meta.name}")
        arrays = read_npz(npz)
        missing = sorted(set(record.get("arrays", [])) - set(arrays))
        if missing:
            raise ValueError(f"{npz.name} lacks the arrays {missing}")
    except READ_ERRORS as err:
        raise ValueError(
            f"--redraw: the saved data of figure {name!r} in {npz.parent} is damaged "
            f"({type(err).__name__}: {err}); run it again without --redraw."
        ) from None
    return arrays


def sweep(ctx: Context, fn, params, **kwargs):
    """:func:`flows.sweep` with this run's cache folder, progress setting and executor.

    The figures' points are fixed, checked inputs, so the runtime checks traced into ``fn``
    (:func:`equinox.error_if`) are traced as NaN, not as host callbacks
    (:func:`flows.internal.cacheable_checks`, once :func:`flows.configure` applied it): JAX's
    persistent cache then keeps the compiled chunk for the next run (for the chunks traced in
    this process; a Dask worker traces as :func:`flows.sweep` does). A check that failed would
    give NaN to its chunk (a ``nonfinite`` status, which the figures refuse to draw), where a
    raising check would have been isolated to its point."""
    import flows
    from flows.internal import cacheable_checks

    with cacheable_checks():
        return flows.sweep(
            fn,
            params,
            cache_dir=ctx.sweeps,
            progress=ctx.sweep_bars,
            executor=ctx.executor,
            **kwargs,
        )
