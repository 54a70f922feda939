"""The grid of a sweep: its static combinations, its dynamic points in cost order, its chunks.

The dynamic points are flattened (Cartesian product of the ``params`` axes, or
zipped), then sorted by the user's expected-cost key so that the lockstep
batches of a vmapped adaptive solver hold solves of similar cost. Chunks are
ranges ``lo:hi`` of the sorted points; :meth:`Grid.assemble` undoes the order and
reshapes the chunk outputs to the grid.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import numpy as np


def _as_axes(params: Mapping, name: str) -> dict[str, np.ndarray]:
    if not isinstance(params, Mapping) or not params:
        raise ValueError(f"`{name}` must be a non-empty mapping of name -> values; got {params!r}.")
    axes = {}
    for key, values in params.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"`{name}` keys must be parameter names; got {key!r}.")
        arr = np.asarray(values)
        if arr.ndim == 0 or arr.shape[0] < 1:
            raise ValueError(
                f"`{name}[{key!r}]` must be a non-empty sequence of values (leading axis = "
                f"grid axis); got shape {arr.shape}."
            )
        if arr.dtype.kind not in "biuf":  # strings, objects, complex, dates
            raise ValueError(
                f"`{name}[{key!r}]` must be numbers (booleans, integers or reals); got dtype "
                f"{arr.dtype}. Pass other Python values (strings, objects) as `static`."
            )
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        axes[key] = arr
    return axes


def _as_static(static: Mapping | None) -> dict[str, list]:
    if static is None:
        return {}
    if not isinstance(static, Mapping):
        raise ValueError(f"`static` must be a mapping of name -> list of values; got {static!r}.")
    out = {}
    for key, values in static.items():
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if not values:
            raise ValueError(f"`static[{key!r}]` must hold at least one value.")
        for v in values:
            try:
                hash(v)
            except TypeError:
                raise ValueError(f"`static[{key!r}]` values must be hashable; got {v!r}.") from None
        out[key] = values
    return out


def _label(fn) -> str:
    """``module.qualname`` of a function, or of a callable object's class (no address)."""
    named = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{getattr(named, '__module__', None)}.{getattr(named, '__qualname__', '?')}"


def fill_failed(out_like: dict, n: int) -> dict:
    """Outputs for ``n`` points with no value: NaN (float), False (bool) or -1 (int)."""

    def fill(x):
        x = np.asarray(x)
        shape = (n, *x.shape[1:])
        if x.dtype.kind == "f" or x.dtype.kind == "c":
            return np.full(shape, np.nan, dtype=x.dtype)
        if x.dtype.kind == "b":
            return np.zeros(shape, dtype=x.dtype)
        return np.full(shape, -1, dtype=x.dtype)

    return {k: fill(v) for k, v in out_like.items()}


def _pad_to_common_shape(arrays: list) -> list:
    """Pad arrays whose shapes differ between static values (depth L: θ is (L, d)).

    Padding is at the end of each axis, with NaN (float), -1 (int) or False (bool).
    """
    shape = tuple(np.max([a.shape for a in arrays], axis=0))
    out = []
    for a in arrays:
        if a.shape != shape:
            fill = fill_failed({"x": a.reshape(1, -1)}, 1)["x"].ravel()[0]
            padded = np.full(shape, fill, dtype=a.dtype)
            padded[tuple(slice(0, n) for n in a.shape)] = a
            a = padded
        out.append(a)
    return out


class Grid:
    """The static combinations and the cost-ordered dynamic points of a sweep.

    Attributes:
        axes: the dynamic axes, name -> array (leading axis = grid axis).
        statics: the static values, name -> list.
        combos: every combination of static values, in ``itertools.product`` order.
        grid_shape: one axis per parameter (``product=True``) or ``(N,)``.
        points: the flattened dynamic points sorted by cost, name -> (N, ...) array.
        perm: flat grid index of each sorted point, (N,) int64.
    """

    def __init__(self, params: Mapping, static: Mapping | None, product: bool, order: Callable):
        self.axes = _as_axes(params, "params")
        self.statics = _as_static(static)
        overlap = set(self.axes) & set(self.statics)
        if overlap:
            raise ValueError(f"names {sorted(overlap)} appear in both `params` and `static`.")
        self.product = bool(product)
        if self.product:
            self.grid_shape = tuple(a.shape[0] for a in self.axes.values())
        else:
            lengths = {k: a.shape[0] for k, a in self.axes.items()}
            if len(set(lengths.values())) != 1:
                raise ValueError(f"with product=False all `params` need one length; got {lengths}.")
            self.grid_shape = (next(iter(lengths.values())),)
        self.n_points = int(np.prod(self.grid_shape))
        self.combos = list(itertools.product(*self.statics.values()))
        if self.product:
            index = np.unravel_index(np.arange(self.n_points), self.grid_shape)
            points = {k: a[index[i]] for i, (k, a) in enumerate(self.axes.items())}
        else:
            points = dict(self.axes)
        if order is not None:
            cost = np.asarray(order({k: v.copy() for k, v in points.items()}), dtype=np.float64)
            if cost.shape != (self.n_points,):
                raise ValueError(f"`order` must return shape ({self.n_points},); got {cost.shape}.")
            self.perm = np.argsort(cost, kind="stable").astype(np.int64)
        else:
            self.perm = np.arange(self.n_points, dtype=np.int64)
        self.points = {k: v[self.perm] for k, v in points.items()}

    def static_kw(self, ci: int) -> dict:
        """The static keyword arguments of combination ``ci``."""
        return dict(zip(self.statics, self.combos[ci], strict=True))

    def label(self, ci: int, index: int) -> str:
        """The flat grid point ``index`` of static combination ``ci``, for a one-line report."""
        if self.product:
            where = np.unravel_index(index, self.grid_shape)
            values = {k: a[where[j]] for j, (k, a) in enumerate(self.axes.items())}
        else:
            values = {k: a[index] for k, a in self.axes.items()}
        parts = [f"{k}={v!r}" for k, v in self.static_kw(ci).items()]
        for k, v in values.items():
            v = np.asarray(v)
            parts.append(f"{k}={v.item()!r}" if v.ndim == 0 else f"{k}=<array {v.shape}>")
        return f"#{index} ({', '.join(parts)})"

    def describe(self, fn, order, config: dict) -> dict:
        """The configuration recorded in the manifest (JSON-able) and hashed into the key."""
        return {
            "fn": _label(fn),
            "params": {
                k: a.tolist() if a.size <= 4096 else f"{a.dtype}{a.shape}"
                for k, a in self.axes.items()
            },
            "static": {
                k: [repr(v) if not isinstance(v, (int, float, str, bool)) else v for v in vs]
                for k, vs in self.statics.items()
            },
            "product": self.product,
            "grid_shape": list(self.grid_shape),
            "order": None if order is None else _label(order),
            "config": config,
        }

    def bounds(self, chunk_size: int) -> list[tuple[int, int]]:
        """The ``(lo, hi)`` ranges of sorted points of each chunk."""
        return [
            (lo, min(lo + chunk_size, self.n_points)) for lo in range(0, self.n_points, chunk_size)
        ]

    def chunk(self, lo: int, hi: int) -> tuple[dict, np.ndarray]:
        """The sorted points ``lo:hi`` and their flat grid indices (unpadded)."""
        return {k: v[lo:hi] for k, v in self.points.items()}, self.perm[lo:hi]

    def assemble(self, results: dict, bounds: list) -> dict:
        """Stack chunk outputs ``results[ci, k]`` to ``(*static_shape, *grid_shape, ...)``."""
        names = {}
        for out in results.values():
            for name, v in out.items():
                names.setdefault(name, v)
        inverse = np.empty_like(self.perm)
        inverse[self.perm] = np.arange(self.n_points)
        stacked = {}
        for name, like in names.items():
            per_combo = []
            for ci in range(len(self.combos)):
                parts = []
                for k, (lo, hi) in enumerate(bounds):
                    part = results[ci, k].get(name)
                    if part is None:
                        part = fill_failed({name: like}, hi - lo)[name]
                    parts.append(part)
                flat = np.concatenate(parts)[inverse]
                per_combo.append(flat.reshape(*self.grid_shape, *flat.shape[1:]))
            arr = np.stack(_pad_to_common_shape(per_combo))
            stacked[name] = arr.reshape(*(len(v) for v in self.statics.values()), *arr.shape[1:])
        return stacked


def pad_chunk(points: dict, index: np.ndarray, size: int) -> tuple[dict, np.ndarray]:
    """Pad a chunk to ``size`` points by repeating its last point (one compiled shape)."""
    take = np.minimum(np.arange(size), index.shape[0] - 1)
    return {k: v[take] for k, v in points.items()}, index[take]
