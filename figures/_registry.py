"""The figures, in the order of :mod:`figures._catalog`, and the function that makes them."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import flows
from flows.internal import check_jobs, default_jobs, enable_compilation_cache, side_by_side

from ._catalog import SUMMARIES
from ._common import (
    Context,
    FigureSpec,
    check_folder,
    check_outputs,
    data_paths,
    folder_path,
    load_data,
    save_data,
)
from ._lesam import FLATNESS, LESAM, TIME
from ._maps import DEPTH
from ._maps import FIGURES as _MAPS
from ._mechanism import MAX_MARGIN, MECHANISM
from ._paths import DISCRETE, LINF_LIMITS, STEPS, TRAJECTORIES
from ._regression import SPARSITY_FIGURE
from ._style import save_figure, styled

_SPECS = {
    f.name: f
    for f in (
        *_MAPS,
        TRAJECTORIES,
        LINF_LIMITS,
        DISCRETE,
        STEPS,
        DEPTH,
        LESAM,
        FLATNESS,
        TIME,
        MECHANISM,
        MAX_MARGIN,
        SPARSITY_FIGURE,
    )
}
assert set(_SPECS) == set(SUMMARIES), "figures/_catalog.py names every figure, and no other"
#: name -> FigureSpec, in the order of :data:`figures._catalog.SUMMARIES`.
FIGURES: dict[str, FigureSpec] = {name: _SPECS[name] for name in SUMMARIES}
#: Figures that share computed state in memory (figures._maps' memo of the boundary searches,
#: and the sweeps they read first): with ``jobs > 1`` each group is made in one process, so
#: that what they share is computed once. Every other figure is a group of its own.
SHARED = (("regime_map", "minor_first", "depth"),)


def make(
    names=None,
    *,
    out="results/figures",
    cache="results/cache",
    quick: bool = False,
    redraw: bool = False,
    progress: bool = True,
    executor=None,
    jobs: int | None = None,
) -> dict[str, list[Path]]:
    """Compute (or, with ``redraw``, reload) and draw figures; return name -> written files.

    Arguments:
        names: figure names (default: all, in order; see ``FIGURES``).
        out: folder for ``<name>.pdf`` and ``<name>.png``, and for a copy of the data they
            were drawn from (``data/<name>[-quick].npz`` and ``.json``).
        cache: folder for sweep caches and saved figure data.
        quick: the small smoke version (CI, tests); saved apart from the full data.
        redraw: draw from the data saved by the last run in ``cache``, solving nothing.
        progress: print progress and show progress bars (with ``jobs > 1``: progress lines,
            each naming its figure, and no bars).
        executor: where the figures' sweeps run, as :func:`flows.sweep`'s ``executor``
            (``None`` or ``"threads"``: host threads; ``"dask"``; a
            ``dask.distributed.Client``). Boundary searches and single trajectories run in
            the figure's process either way.
        jobs: processes that make figures side by side, an integer >= 1, or ``None``: one per
            core, at most one per group of :data:`SHARED` figures (a figure alone is a group),
            and 1 with ``redraw`` or a Dask ``executor`` (whose sweeps already spread over
            its workers). Each figure's numbers are the same whatever ``jobs`` is.

    Raises:
        ValueError: before anything is computed, as :func:`check_paths`, or for a bad
            ``jobs``.
    """
    ctx, names = check_paths(names, out=out, cache=cache, quick=quick, redraw=redraw)
    jobs = check_jobs(jobs)
    ctx.progress = progress
    flows.SweepOptions(executor=executor)  # a bad executor is refused before any work
    ctx.executor = executor
    groups = _groups(names)
    if jobs is None:
        local = executor is None or (isinstance(executor, str) and executor == "threads")
        jobs = default_jobs(len(groups)) if local and not redraw else 1
    if jobs > 1 and len(groups) > 1:
        return _make_side_by_side(ctx, groups, jobs)
    return _make(ctx, names, redraw)


def _groups(names) -> list[list[str]]:
    """``names`` in groups that one process makes (:data:`SHARED`), the larger groups first,
    each in the catalogue's order."""
    groups = [[n for n in group if n in names] for group in SHARED]
    groups = [g for g in groups if g]
    shared = {n for g in groups for n in g}
    return sorted(groups, key=len, reverse=True) + [[n] for n in names if n not in shared]


def _make(ctx: Context, names, redraw: bool) -> dict[str, list[Path]]:
    """Make ``names`` one after the other in this process."""
    if not redraw:
        # Reuse compiled solvers across runs (most of a quick run is compilation), in
        # cache/jax-cache unless flows' own cache folder (or the user's) is configured.
        enable_compilation_cache(ctx.cache / "jax-cache")
    written = {}
    for name in names:
        spec, ctx.figure = FIGURES[name], name
        t0 = time.perf_counter()
        if redraw:
            data = load_data(ctx, name)
        else:
            if ctx.progress:
                print(f"[{name}] computing ({'quick' if ctx.quick else 'full'})", flush=True)
            data = spec.compute(ctx)
            save_data(ctx, name, data, time.perf_counter() - t0)
        written[name] = save_figure(styled(spec.draw, data), ctx.out, name)
        _copy_data(ctx, name)
        if ctx.progress:
            print(f"[{name}] {time.perf_counter() - t0:.1f} s -> {written[name][1]}", flush=True)
    return written


def _make_side_by_side(ctx: Context, groups, jobs: int) -> dict[str, list[Path]]:
    """Make the groups in ``jobs`` processes (:func:`flows.internal.side_by_side`), each group
    in one; the written files in the catalogue's order."""
    written = {}
    for done in side_by_side([(_make_in_worker, (ctx, group)) for group in groups], jobs):
        written.update(done)
    return {name: written[name] for name in FIGURES if name in written}


def _make_in_worker(ctx: Context, names) -> dict[str, list[Path]]:
    """:func:`_make` in a worker process of :func:`_make_side_by_side`: progress lines named by
    figure, no bars."""
    ctx.bars = False
    return _make(ctx, names, redraw=False)


def _copy_data(ctx, name: str) -> None:
    """Put the figure's data beside it (``out/data/``), so that a published figure carries
    the numbers it was drawn from (the gallery's caption tests read them there)."""
    folder = ctx.out / "data"
    folder.mkdir(exist_ok=True)
    for path in data_paths(ctx, name):
        if path.resolve() != (folder / path.name).resolve():
            shutil.copyfile(path, folder / path.name)


def check_paths(names, *, out, cache, quick: bool = False, redraw: bool = False):
    """Check the figure names and the folders of a run before anything is computed.

    ``out`` must be a folder or creatable as one (it is created); ``cache`` too, and
    with ``redraw`` it must already hold the saved data of every figure in ``names``,
    intact (:func:`load_data`).
    Returns ``(Context, names)``; raises ``ValueError`` with a one-line message that
    names the option (``--out``, ``--cache``) otherwise.
    """
    names = list(FIGURES) if not names else list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; choose from {list(FIGURES)}.")
    ctx = Context(out=folder_path("--out", out), cache=folder_path("--cache", cache), quick=quick)
    check_folder("--cache", ctx.cache, create=not redraw)
    if redraw:
        missing = [n for n in names if not data_paths(ctx, n)[0].is_file()]
        if missing:
            raise ValueError(
                f"--redraw: no saved {'quick ' if quick else ''}data for figure(s) "
                f"{', '.join(missing)} in {ctx.cache / 'data'}; run them once without --redraw."
            )
        for n in names:  # damaged data is refused before anything is drawn
            load_data(ctx, n)
    check_folder("--out", ctx.out, create=True)
    check_outputs("--out", [ctx.out / f"{n}.{ext}" for n in names for ext in ("pdf", "png")])
    if (ctx.out / "data").exists() and not (ctx.out / "data").is_dir():
        raise ValueError(f"--out: {ctx.out / 'data'} is a file; the figures' data go there.")
    check_outputs("--out", [ctx.out / "data" / p.name for n in names for p in data_paths(ctx, n)])
    return ctx, names
