"""The cache key of a sweep: a SHA-256 of its configuration, the code and package versions.

The key decides which cached chunks a sweep may reuse, so it covers everything a
result depends on (the grid, the static values, the order, the seed, ``fn`` by
value: its code, closure, defaults, the globals it reads, a bound method's object
and a callable object's attributes; the extra ``config``, every source file of
:mod:`flows` and the numerical packages' versions) and nothing it does not: not
the chunk size (chunk files are named by their point ranges), not the executor
(a sweep started on threads can be finished on a Dask cluster). State that
cannot be described by value (see :class:`_Hasher`) raises :class:`Unhashable`:
the sweep then refuses a cache unless the user names that state with ``key=``.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import platform
import re
import subprocess
import sys
import sysconfig
import types
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import jax
import numpy as np

_PACKAGES = ("jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "numpy", "scipy")
_FORMAT = 2  # bump when the on-disk layout changes (2: chunk errors and checksums)


# --- versions and hashing ----------------------------------------------------------


def source_digest(folder) -> str:
    """SHA-256 (hex) of a package's Python sources: every ``folder/**/*.py``, in sorted order,
    each as its path relative to ``folder`` and then its bytes.

    An edit to any source file, a file added, removed or renamed changes it; nothing else
    does (not the bytecode caches, not the files' times).
    """
    root = Path(folder).resolve()
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def code_version() -> dict:
    """The code version: SHA-256 of every ``flows/**/*.py`` source, plus the git commit.

    Only the source hash enters cache keys (a commit elsewhere in the repository
    does not invalidate results); the git commit and dirty flag are recorded in
    the manifest for provenance.
    """
    root = Path(__file__).resolve().parent.parent  # flows/, with this package inside
    version = {"flows_source_sha256": source_digest(root)}
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


class Unhashable(Exception):
    """Something ``fn`` depends on that the key cannot describe by value; names what and where."""


# Modules whose code is covered by the Python version and the package versions in the
# key: their functions and classes are described by name, never by source.
_LIBRARIES = frozenset(
    {"flows", "jax", "jaxlib", "diffrax", "equinox", "optimistix", "lineax", "numpy", "scipy"}
)
_MAX_DEPTH = 64
# Class attributes that are interpreter or dataclass machinery, not behaviour.
_CLASS_MACHINERY = frozenset(
    {
        "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
        "__annotations__", "__abstractmethods__", "_abc_impl", "__dataclass_params__",
        "__dataclass_fields__", "__match_args__", "__parameters__", "__orig_bases__",
        "__static_attributes__", "__firstlineno__", "__abstractvars__",
        "__abstractclassvars__", "__hash__",
    }
)  # fmt: skip
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@functools.cache
def _installed(top: str) -> str | None:
    """``name==version`` of the installed distribution of top-level module ``top``, or None.

    None for a module that is not installed in site-packages (a user's script or
    package, the project's own ``analysis`` and ``figures``): its source is hashed.
    """
    module = sys.modules.get(top)
    origin = getattr(module, "__file__", None)
    if origin is None:
        return None
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    if not any(Path(origin).resolve().is_relative_to(Path(r).resolve()) for r in roots):
        return None
    dists = metadata.packages_distributions().get(top, [])
    versions = []
    for dist in sorted(dists):
        try:
            versions.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(dist)
    return ",".join(versions) or top


def _library(module_name) -> str | None:
    """How the key covers the code of a library module, or None for user code.

    The versioned packages and the standard library are covered by the package
    and Python versions in the key; another installed package by its own version.
    """
    if not isinstance(module_name, str) or not module_name:
        return None
    top = module_name.split(".")[0]
    if top in _LIBRARIES or top in sys.stdlib_module_names:
        return top
    return _installed(top)


def _is_library(module_name) -> bool:
    """True for a module of an installed package or of the standard library."""
    return _library(module_name) is not None


def _type_name(cls) -> str:
    return f"{getattr(cls, '__module__', None)}.{getattr(cls, '__qualname__', cls.__name__)}"


def _names(code) -> set:
    """Names (globals and attributes) read by ``code`` and by the code nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names(const)
    return names


def _state(obj) -> dict | None:
    """An object's attributes (``__dict__`` and slots), or None if it has neither."""
    state, has = {}, False
    if isinstance(getattr(obj, "__dict__", None), dict):
        state.update(vars(obj))
        has = True
    for klass in type(obj).__mro__:
        slots = getattr(klass, "__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            has = True
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    return state if has else None


class _Hasher:
    """Feeds a stable and complete description of a value to a SHA-256.

    Values are described by value: arrays by dtype, shape and bytes; containers
    item by item; a user function by its source, bytecode, constants, defaults,
    closure, the globals it reads and, for a user module among them, the module's
    attributes it names; a bound method with its object; an object by its class
    (with the class's own methods) and its attributes; a pytree by its node data
    and children. Functions, classes and modules of the standard library and of
    installed packages are described by name and version. Anything else (an
    object with neither attributes nor a pytree structure, a user module reached
    other than through a name a function reads, a structure nested deeper than 64
    levels) raises :class:`Unhashable`, unless ``lenient``: then it is described
    by its type alone.
    """

    def __init__(self, lenient: bool = False, seen: dict | None = None):
        self.h = hashlib.sha256()
        self.lenient = lenient
        self.seen = dict(seen or {})  # id -> order of first visit (cycles, shared objects)
        self.keep = []  # the visited objects, alive so that their ids stay theirs
        self.path = []  # where the hasher is, for the message of Unhashable

    def hexdigest(self) -> str:
        return self.h.hexdigest()

    def put(self, *parts) -> None:
        for part in parts:
            self.h.update(part if isinstance(part, bytes) else str(part).encode())
            self.h.update(b"\x00")

    def refuse(self, obj, why: str) -> None:
        if not self.lenient:
            where = f" (via {' -> '.join(self.path)})" if self.path else ""
            raise Unhashable(f"{_type_name(type(obj))}{where}, {why}")
        self.put("opaque", _type_name(type(obj)))

    def visited(self, obj) -> bool:
        """True (and a back-reference hashed) if ``obj`` was described before."""
        if id(obj) in self.seen:
            self.put("seen", self.seen[id(obj)])
            return True
        self.seen[id(obj)] = len(self.seen)
        self.keep.append(obj)
        return False

    def named(self, label: str, obj, depth: int, names=()) -> None:
        """Describe ``obj`` reached through ``label``; a user module by the ``names`` read."""
        self.put(label)
        self.path.append(label)
        if isinstance(obj, types.ModuleType) and not _is_library(obj.__name__):
            if not self.visited(obj):
                self.put("module", obj.__name__)
                for name in sorted(names):
                    if name in vars(obj):
                        self.named(f"{obj.__name__}.{name}", vars(obj)[name], depth + 1, names)
        else:
            self.value(obj, depth)
        self.path.pop()

    def value(self, obj, depth: int = 0) -> None:  # noqa: C901 - one case per kind of value
        if depth > _MAX_DEPTH:
            return self.refuse(obj, f"nested deeper than {_MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(obj, jax.Array) and jax.dtypes.issubdtype(obj.dtype, jax.dtypes.prng_key):
            self.put("key", obj.dtype)
            return self.value(jax.random.key_data(obj), d)
        if isinstance(obj, (np.ndarray, jax.Array, np.generic)):
            arr = np.asarray(obj)
            self.put("array", arr.dtype.str, arr.shape)
            if arr.dtype.kind != "O":
                return self.put(np.ascontiguousarray(arr).tobytes())
            for item in arr.flat:
                self.value(item, d)
            return None
        if (
            obj is None
            or obj is Ellipsis
            or isinstance(
                obj, (bool, int, float, complex, str, bytes, range, slice, np.dtype, enum.Enum)
            )
        ):
            return self.put(_type_name(type(obj)), repr(obj))
        if type(obj) in (dict, types.MappingProxyType) or (
            isinstance(obj, Mapping) and _is_library(type(obj).__module__)
        ):
            self.put(_type_name(type(obj)), len(obj))
            for k in sorted(obj, key=repr):
                self.value(k, d)
                self.value(obj[k], d)
            return None
        if type(obj) in (list, tuple) or (isinstance(obj, tuple) and hasattr(obj, "_fields")):
            self.put(_type_name(type(obj)), len(obj))
            for item in obj:
                self.value(item, d)
            return None
        if type(obj) in (set, frozenset):
            parts = []
            for item in obj:
                sub = _Hasher(self.lenient, self.seen)
                sub.path = [*self.path, "a set item"]
                sub.value(item, d)
                parts.append(sub.hexdigest())
            return self.put(type(obj).__name__, *sorted(parts))
        if isinstance(obj, functools.partial):
            self.put("partial")
            return self.value((obj.func, obj.args, obj.keywords), d)
        if isinstance(obj, types.ModuleType):
            if (library := _library(obj.__name__)) is not None:
                return self.put("module", obj.__name__, library)
            return self.refuse(obj, "a module held other than by a global name")
        if isinstance(obj, type):
            return self.cls(obj, d)
        if isinstance(obj, types.MethodType):  # a bound method: its function and its object
            self.put("method")
            self.value(obj.__func__, d)
            return self.named("the object of a bound method", obj.__self__, d)
        if isinstance(obj, types.FunctionType):
            return self.function(obj, d)
        if isinstance(obj, (types.BuiltinFunctionType, np.ufunc)):
            owner = getattr(obj, "__self__", None)
            self.put("builtin", getattr(obj, "__module__", None), obj.__name__)
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.named("the object of a method", owner, d)  # a method of an object: rng.normal
            return None
        if isinstance(obj, types.CodeType):
            return self.code(obj, d)
        if self.visited(obj):
            return None
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None and callable(obj) and _is_library(type(obj).__module__):
            self.put("wrapper", _type_name(type(obj)))  # jax.jit(f), an equinox bound method
            return self.value(wrapped, d)
        self.cls(type(obj), d)
        children, treedef = jax.tree_util.tree_flatten(obj, is_leaf=lambda x: x is not obj)
        if not (len(children) == 1 and children[0] is obj):  # a pytree node
            node = treedef.node_data()
            self.put("pytree", len(children))
            if node is not None:
                self.value(node[1], d)
            for i, child in enumerate(children):
                self.named(f"pytree child {i}", child, d)
            return None
        state = _state(obj)
        if state is not None:
            self.put("object", len(state))
            for name in sorted(state):
                self.named(f"attribute `{name}`", state[name], d)
            return None
        if _is_library(type(obj).__module__) and not _ADDRESS.search(repr(obj)):
            return self.put("library value", repr(obj))  # a sentinel such as equinox's MISSING
        return self.refuse(obj, "an object with no attributes to describe it by value")

    def code(self, code, depth: int) -> None:
        self.put("code", code.co_code, code.co_names, code.co_varnames, code.co_freevars)
        self.put(code.co_argcount, code.co_kwonlyargcount, code.co_flags)
        for const in code.co_consts:
            self.value(const, depth + 1)

    def function(self, func, depth: int) -> None:
        if self.visited(func):
            return
        self.put("function", func.__module__, func.__qualname__)
        if (library := _library(func.__module__)) is not None:
            return self.put(library)  # covered by the package's version
        try:
            self.put(inspect.getsource(func))
        except (OSError, TypeError):  # made by exec or lambdify: the code alone
            pass
        self.code(func.__code__, depth + 1)
        self.value((func.__defaults__, func.__kwdefaults__), depth + 1)
        names = _names(func.__code__)
        for var, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=True):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                self.put("empty", var)
                continue
            self.named(f"closure `{var}` of {func.__qualname__}", contents, depth + 1, names)
        # Module-level values the function reads (T1 = 50.0, DATA = ..., cfg.S) are not in
        # its closure but change its result just as much.
        for name in sorted(names):
            if name in func.__globals__:
                label = f"global `{name}` of {func.__qualname__}"
                self.named(label, func.__globals__[name], depth + 1, names)

    def cls(self, klass, depth: int) -> None:
        if self.visited(klass):
            return
        self.put("class", _type_name(klass))
        if (library := _library(klass.__module__)) is not None:
            return self.put(library)
        for base in klass.__bases__:
            self.cls(base, depth + 1)
        for name, attr in sorted(vars(klass).items()):
            if name in _CLASS_MACHINERY:
                continue
            self.put(name)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if isinstance(attr, property):
                attr = (attr.fget, attr.fset, attr.fdel)
            if isinstance(attr, (types.FunctionType, tuple)):
                self.named(f"method `{name}` of {klass.__qualname__}", attr, depth + 1)
            else:  # class-level data or framework machinery: by value where possible
                sub = _Hasher(lenient=True, seen=self.seen)
                sub.value(attr, depth + 1)
                self.put(sub.hexdigest())


def digest(obj, lenient: bool = False) -> str:
    """SHA-256 (hex) of the complete description of ``obj`` (see :class:`_Hasher`).

    Raises :class:`Unhashable` if part of ``obj`` cannot be described by value,
    unless ``lenient`` (that part then counts by its type alone).
    """
    hasher = _Hasher(lenient)
    hasher.value(obj)
    return hasher.hexdigest()


def _part(label: str, obj, lenient: bool) -> str:
    try:
        return digest(obj, lenient)
    except Unhashable as err:
        raise Unhashable(f"`{label}` depends on {err}") from None


def sweep_key(grid, fn, order, seed: int, config: dict, key: str | None = None):
    """The cache key of a sweep (20 hex digits) and the versions it was computed from.

    ``grid`` is the sweep's :class:`~flows._sweep._grid.Grid`; ``config`` the
    user's extra JSON-able configuration; ``key`` the user's name for the state of
    ``fn`` that cannot be described by value (then that state counts by its type
    alone and ``key`` in its place). Raises :class:`Unhashable` when ``key`` is
    None and ``fn``, ``order`` or a static value holds such state.
    """
    lenient = key is not None
    versions = {"code": code_version(), "packages": package_versions()}
    source = {
        "format": _FORMAT,
        "config": grid.describe(fn, order, config),
        "grid": dict(grid.axes),
        "static_values": _part("static", dict(grid.statics), lenient),
        "fn": _part("fn", fn, lenient),
        "order": _part("order", order, lenient),
        "key": key,
        "perm": grid.perm,
        "seed": int(seed),
        "code": versions["code"]["flows_source_sha256"],
        "packages": versions["packages"],
    }
    return digest(source)[:20], versions


def function_key(fn, key: str | None, *extra) -> str | None:
    """The identity of ``fn`` and its state for reusing compiled chunk functions in a process.

    None when ``fn`` holds state that cannot be described by value and no ``key``
    names it: such a function is compiled afresh for every sweep.
    """
    try:
        return digest((fn, key, extra), lenient=key is not None)
    except Unhashable:
        return None
