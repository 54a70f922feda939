"""The store of a sweep on disk: chunk files, ``result.npz`` and ``manifest.json``.

Layout (``<folder> = cache_dir/<key>``)::

    <folder>/manifest.json             configuration, versions, executor, errors, timings,
                                       and the SHA-256 of result.npz once the sweep is done
    <folder>/result.npz                the assembled outputs (``out/<name>``, ``param/<name>``)
    <folder>/chunks/<ci>-<lo>-<hi>.npz one chunk: outputs of sorted points lo:hi of static
                                       combination ci, the key, and its failed points' errors

Every file is written atomically (a temporary file, then ``os.replace``), so a
killed writer leaves either the old file or the new one. A file damaged anyway
(truncated, empty, overwritten by another program, a disk error) is detected when
read: chunk files by the CRC-32 of every zip member and a full read, ``result.npz``
by the checksum in the manifest. A damaged file is reported once and recomputed;
:func:`load_sweep` of a damaged sweep raises one ``ValueError`` naming the folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .._validate import check_type

_KEY = "__key__"
_ERRORS = "__errors__"
_READ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)


def report(message: str) -> None:
    """One line on stderr (failed points, damaged files): the detail goes to the manifest."""
    print(f"flows.sweep: {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class SweepResult:
    """Outputs of :func:`sweep`, stacked with the grid's shape.

    Attributes:
        out: name -> array of shape ``(*static_shape, *grid_shape, *leaf_shape)``,
            where ``static_shape`` has one axis per ``static`` entry (in order) and
            ``grid_shape`` is one axis per parameter (``product=True``) or ``(N,)``.
            Outputs whose shape differs between static values (θ at different
            depths) are padded at the end with NaN / -1 / False.
            ``out["failed"]`` marks points whose evaluation raised.
        params: the dynamic grid axes, name -> array.
        static: the static values, name -> list.
        manifest: configuration, versions, seed, key, executor and timings (also in JSON).
        path: the result folder (``None`` without ``cache_dir``).
        n_chunks, n_computed, n_cached: chunks in total, computed in this call,
            and read from the cache.
    """

    out: dict
    params: dict
    static: dict
    manifest: dict
    path: Path | None = None
    n_chunks: int = 0
    n_computed: int = 0
    n_cached: int = 0

    def __getitem__(self, name):
        return self.out[name]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_npz(path: Path) -> dict:
    """Every array of an ``.npz`` file, after checking the CRC-32 of every member."""
    with zipfile.ZipFile(path) as zf:
        bad = zf.testzip()
        if bad is not None:
            raise ValueError(f"member {bad} fails its CRC check")
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def load_sweep(path) -> SweepResult:
    """Reload a finished sweep (``result.npz`` + ``manifest.json`` in ``path``) without recomputing.

    The result is checked against the SHA-256 recorded in the manifest; a missing,
    partial or damaged sweep raises one ``ValueError`` that names the folder.

    >>> import flows, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> r = flows.sweep(lambda a: {"sq": a * a}, {"a": [1.0, 2.0]}, cache_dir=folder,
    ...                 progress=False, compile_cache=False)
    >>> flows.load_sweep(r.path)["sq"].tolist()
    [1.0, 4.0]
    """
    path = Path(check_type("path", path, (str, os.PathLike), "a folder path (str or os.PathLike)"))
    try:
        manifest = json.loads((path / "manifest.json").read_text())
        if not manifest.get("complete") or "result_sha256" not in manifest:
            raise ValueError("the manifest does not describe a finished sweep")
        if _sha256(path / "result.npz") != manifest["result_sha256"]:
            raise ValueError("result.npz does not match the checksum in manifest.json")
        arrays = _read_npz(path / "result.npz")
        result = SweepResult(
            out={k[4:]: v for k, v in arrays.items() if k.startswith("out/")},
            params={k[6:]: v for k, v in arrays.items() if k.startswith("param/")},
            static=manifest["config"]["static"],
            manifest=manifest,
            path=path,
            n_chunks=manifest["n_chunks"],
        )
    except (*_READ_ERRORS, TypeError) as err:
        raise ValueError(
            f"`path` {str(path)!r} is not a finished, intact sweep folder (manifest.json and "
            f"result.npz): {type(err).__name__}: {err}"
        ) from None
    if "failed" not in result.out:
        raise ValueError(f"`path` {str(path)!r} holds no sweep result (no 'failed' output).")
    return result


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _save_npz(path: Path, arrays: dict) -> None:
    def write(tmp):
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    _atomic_write(path, write)


def _save_json(path: Path, obj: dict) -> None:
    def write(tmp):
        Path(tmp).write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))

    _atomic_write(path, write)


def save_chunk(path: str | Path, key: str, out: dict, errors: list) -> None:
    """Write one chunk's outputs, its key and its failed points' errors, atomically."""
    payload = {**out, _KEY: np.asarray(key), _ERRORS: np.asarray(json.dumps(errors))}
    _save_npz(Path(path), payload)


def writable(folder: Path) -> str | None:
    """``None`` if this process can create and write files in ``folder``, else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder) as fh:
            fh.write(b"x")
            fh.flush()
    except OSError as err:
        return f"cannot write {folder}: {err}"
    return None


class Store:
    """The folder ``cache_dir/<key>`` of one sweep."""

    def __init__(self, cache_dir, key: str):
        self.folder = Path(cache_dir).absolute() / key  # workers may run in another folder
        self.key = key
        why = writable(self.folder / "chunks")
        if why is not None:
            raise ValueError(f"`cache_dir` must be a folder this process can write; {why}.")

    def chunk_path(self, ci: int, lo: int, hi: int) -> Path:
        """The file of sorted points ``lo:hi`` of static combination ``ci``."""
        return self.folder / "chunks" / f"{ci:03d}-{lo:08d}-{hi:08d}.npz"

    def load_chunk(self, path: Path) -> tuple[dict, list] | None:
        """A cached chunk's (outputs, errors), or ``None`` if absent, stale or damaged."""
        if not path.exists():
            return None
        try:
            arrays = _read_npz(path)
            if str(arrays.pop(_KEY)) != self.key:
                return None
            errors = json.loads(str(arrays.pop(_ERRORS)))
        except _READ_ERRORS as err:
            report(f"damaged chunk file {path} ({type(err).__name__}: {err}); recomputing it")
            return None
        return arrays, errors

    def load_result(self) -> SweepResult | None:
        """The finished sweep in this folder, or ``None`` (a damaged one is reported)."""
        if not (self.folder / "result.npz").exists():
            return None
        try:
            return load_sweep(self.folder)
        except ValueError as err:
            report(f"{err}; recomputing it from the chunk files")
            return None

    def save_manifest(self, manifest: dict) -> None:
        _save_json(self.folder / "manifest.json", manifest)

    def save_result(self, result: SweepResult) -> None:
        """Write ``result.npz``, then the manifest with its checksum (a reader checks both)."""
        arrays = {f"out/{k}": v for k, v in result.out.items()}
        arrays.update({f"param/{k}": v for k, v in result.params.items()})
        _save_npz(self.folder / "result.npz", arrays)
        result.manifest["result_sha256"] = _sha256(self.folder / "result.npz")
        self.save_manifest(result.manifest)
