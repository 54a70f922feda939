"""The cache key of a sweep: a SHA-256 of its configuration, the code and package versions.

The key decides which cached chunks a sweep may reuse, so it covers everything a
result depends on (the grid, the static values, the order, the seed, the source,
closure and globals of ``fn``, the extra ``config``, every source file of
:mod:`flows` and the numerical packages' versions) and nothing it does not: not
the chunk size (chunk files are named by their point ranges), not the executor
(a sweep started on threads can be finished on a Dask cluster).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import platform
import re
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import jax
import numpy as np

_PACKAGES = ("jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "numpy", "scipy")
_FORMAT = 2  # bump when the on-disk layout changes (2: chunk errors and checksums, issue 15)


# --- versions and hashing ----------------------------------------------------------


@functools.cache
def code_version() -> dict:
    """The code version: SHA-256 of every ``flows/**/*.py`` source, plus the git commit.

    Only the source hash enters cache keys (a commit elsewhere in the repository
    does not invalidate results); the git commit and dirty flag are recorded in
    the manifest for provenance.
    """
    root = Path(__file__).resolve().parent.parent  # flows/, with this package inside
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    version = {"flows_source_sha256": h.hexdigest()}
    try:
        version["samflows"] = metadata.version("samflows")
    except metadata.PackageNotFoundError:
        version["samflows"] = None
    try:
        git = ["git", "-C", str(root)]
        commit = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=10
        )
        if commit.returncode == 0:
            version["git_commit"] = commit.stdout.strip()
            version["git_dirty"] = bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return version


@functools.cache
def package_versions() -> dict:
    """Versions of Python and of the numerical packages results depend on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _global_names(code) -> set:
    """Global names read by ``code`` and by the functions nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _fingerprint(obj, h, depth=0, seen=None) -> None:
    """Feed a stable description of ``obj`` (arrays by value, functions by source) to ``h``."""
    seen = set() if seen is None else seen
    if depth > 12:
        h.update(b"<deep>")
        return
    if isinstance(obj, (np.ndarray, jax.Array, np.generic)):
        arr = np.asarray(obj)
        h.update(f"array{arr.dtype}{arr.shape}".encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(repr(obj).encode())
    elif isinstance(obj, Mapping):
        h.update(b"{")
        for k in sorted(obj, key=repr):
            _fingerprint(k, h, depth + 1, seen)
            _fingerprint(obj[k], h, depth + 1, seen)
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(type(obj).__name__.encode())
        for item in obj:
            _fingerprint(item, h, depth + 1, seen)
    elif isinstance(obj, functools.partial):
        _fingerprint((obj.func, obj.args, obj.keywords), h, depth + 1, seen)
    elif getattr(obj, "__wrapped__", None) is not None and callable(obj):  # jax.jit(f), ...
        h.update(type(obj).__name__.encode())
        _fingerprint(obj.__wrapped__, h, depth + 1, seen)
    elif inspect.isfunction(obj) or inspect.ismethod(obj):
        func = getattr(obj, "__func__", obj)
        h.update(f"{func.__module__}.{func.__qualname__}".encode())
        if func.__module__ in ("flows", "jax", "numpy") or func.__module__.startswith(
            ("flows.", "jax.", "jax._src", "numpy.", "diffrax", "equinox")
        ):
            return  # library code: covered by the code and package versions
        try:
            h.update(inspect.getsource(func).encode())
        except (OSError, TypeError):
            h.update(func.__code__.co_code)
        if id(func) in seen:
            return
        seen.add(id(func))
        for cell in func.__closure__ or ():
            try:
                _fingerprint(cell.cell_contents, h, depth + 1, seen)
            except ValueError:  # empty cell
                h.update(b"<empty>")
        if func.__defaults__:
            _fingerprint(func.__defaults__, h, depth + 1, seen)
        # Module-level values the function reads (T1 = 50.0, DATA = ...) are not in
        # its closure but change its result just as much.
        for name in sorted(_global_names(func.__code__)):
            value = func.__globals__.get(name, None)
            if value is not None and not inspect.ismodule(value) and not isinstance(value, type):
                h.update(name.encode())
                _fingerprint(value, h, depth + 1, seen)
    else:
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        if len(leaves) == 1 and leaves[0] is obj:  # an opaque object
            text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))  # no memory addresses
            h.update(f"{type(obj).__module__}.{type(obj).__qualname__}:{text}".encode())
        else:  # a pytree (an equinox Module, a flows method or Dataset)
            h.update(str(treedef).encode())
            for leaf in leaves:
                _fingerprint(leaf, h, depth + 1, seen)


def digest(obj) -> str:
    """SHA-256 (hex) of the stable description of ``obj`` (see :func:`_fingerprint`)."""
    h = hashlib.sha256()
    _fingerprint(obj, h)
    return h.hexdigest()


def sweep_key(grid, fn, order, seed: int, config: dict) -> tuple[str, dict]:
    """The cache key of a sweep (20 hex digits) and the versions it was computed from.

    ``grid`` is the sweep's :class:`~flows._sweep._grid.Grid`; ``config`` the
    user's extra JSON-able configuration.
    """
    versions = {"code": code_version(), "packages": package_versions()}
    source = {
        "format": _FORMAT,
        "config": grid.describe(fn, order, config),
        "grid": dict(grid.axes),
        "static_values": dict(grid.statics),
        "fn": fn,
        "order": order,
        "perm": grid.perm,
        "seed": int(seed),
        "code": versions["code"]["flows_source_sha256"],
        "packages": versions["packages"],
    }
    return digest(source)[:20], versions
