"""The sweep's cache key and compiled-function key cover the state a function reads.

Every expected value is the closed form ``a * s`` of the function swept, never a
previous sweep's output: a sweep that reused a result computed for another state
would return ``a * s_old``.
"""

import threading
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flows

A = np.array([1.0, 2.0])
_cfg = types.ModuleType("sweep_key_test_cfg")  # a user module read as `_cfg.S`
_cfg.S = 2.0
_LOCK = threading.Lock()


class Model:
    def __init__(self, s):
        self.s = s

    def point(self, a):
        return {"y": a * self.s}


class Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, a):
        return {"y": a * self.s}


def _reads_module(a):
    return {"y": a * _cfg.S}


def _holds_lock(a):
    with _LOCK:
        pass
    return {"y": a * 5.0}


def _run(fn, cache_dir=None, **kw):
    return flows.sweep(fn, {"a": A}, cache_dir=cache_dir, progress=False, **kw)


@pytest.mark.parametrize("cached", [False, True])
def test_bound_object_callable_attributes_and_module_globals_are_in_the_key(tmp_path, cached):
    d = tmp_path if cached else None
    for make in (lambda s: Model(s).point, Scaler):
        for s in (2.0, 3.0):
            r = _run(make(s), d)
            np.testing.assert_array_equal(r["y"], A * s)
            assert r.n_cached == 0
    for s in (2.0, 3.0, 2.0):
        _cfg.S = s
        np.testing.assert_array_equal(_run(_reads_module, d)["y"], A * s)
    again = _run(Model(3.0).point, d)  # the same state again: a hit when cached
    np.testing.assert_array_equal(again["y"], A * 3.0)
    assert again.n_cached == (again.n_chunks if cached else 0)


def test_state_it_cannot_describe_refuses_the_cache_unless_key_is_given(tmp_path):
    with pytest.raises(ValueError, match=r"`fn` depends on _thread.lock .*global `_LOCK`.*`key=`"):
        _run(_holds_lock, tmp_path)
    np.testing.assert_array_equal(_run(_holds_lock)["y"], A * 5.0)  # no cache: computed
    first = _run(_holds_lock, tmp_path, key="lock v1")
    np.testing.assert_array_equal(first["y"], A * 5.0)
    assert _run(_holds_lock, tmp_path, key="lock v1").n_cached == first.n_chunks
    assert _run(_holds_lock, tmp_path, key="lock v2").n_cached == 0
    for bad in ("", "  ", 3, b"k"):
        with pytest.raises(ValueError, match="`key` must be None or a non-empty string"):
            _run(_holds_lock, key=bad)


def test_one_function_over_float_then_integer_values():
    def double(a):
        return {"y": a * 2}

    np.testing.assert_array_equal(_run(double)["y"], [2.0, 4.0])
    r = flows.sweep(double, {"a": np.array([1, 2])}, progress=False)
    assert not r["failed"].any()
    np.testing.assert_array_equal(r["y"], [2, 4])


def test_functions_without_a_module_or_source():
    """``exec`` (and sympy's lambdify) make functions whose ``__module__`` is None."""
    made = []
    for k in (2.0, 3.0):
        ns = {"__name__": None}
        exec(f"def f(a):\n    return {{'y': a * {k}}}", ns)  # noqa: S102 - the case tested
        assert ns["f"].__module__ is None
        made.append(ns["f"])
    for k, f in zip((2.0, 3.0), made, strict=True):
        np.testing.assert_array_equal(_run(f)["y"], A * k)
    twins = (lambda a: {"y": a * 2.0}), (lambda a: {"y": a * 7.0})  # one line, one source
    for k, f in zip((2.0, 7.0), twins, strict=True):
        np.testing.assert_array_equal(_run(f)["y"], A * k)


_STATES = st.lists(
    st.tuples(
        st.sampled_from(["method", "callable", "closure", "module"]),
        st.sampled_from([1.0, 2.0, -0.5]),
    ),
    min_size=2,
    max_size=4,
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(states=_STATES, cached=st.booleans())
def test_a_sweep_never_returns_a_result_of_another_function_or_state(
    tmp_path_factory, states, cached
):
    d = tmp_path_factory.mktemp("sweeps") if cached else None
    scale = None

    def closure(a):
        return {"y": a * scale}

    for kind, s in states:
        if kind == "method":
            fn = Model(s).point
        elif kind == "callable":
            fn = Scaler(s)
        elif kind == "closure":
            scale, fn = s, closure
        else:
            _cfg.S, fn = s, _reads_module
        np.testing.assert_array_equal(_run(fn, d)["y"], A * s)


def test_one_function_over_other_parameter_names():
    """A second sweep of a function with a parameter the first left at its default."""

    def scaled(a, b=1.0):
        return {"y": a * b}

    np.testing.assert_array_equal(_run(scaled)["y"], A)
    r = flows.sweep(scaled, {"a": A, "b": [3.0]}, progress=False)
    np.testing.assert_array_equal(r["y"][:, 0], A * 3.0)


def test_source_digest_covers_each_source_file_by_path_and_bytes(tmp_path):
    """The digest of a package's sources (a sweep's code version, an analysis diagram's key):
    the SHA-256 of each ``*.py`` file's relative path and bytes, in sorted order, written here
    with hashlib; it changes with an edit, a new file or a rename, and not with a ``.pyc``."""
    import hashlib

    from flows.internal import source_digest

    (tmp_path / "sub").mkdir()
    files = {"b.py": b"x = 1\n", "a.py": b"y = 2\n", "sub/c.py": b"z = 3\n"}
    for name, text in files.items():
        (tmp_path / name).write_bytes(text)
    by_hand = hashlib.sha256()
    for name in sorted(files):
        by_hand.update(name.encode() + files[name])
    first = source_digest(tmp_path)
    assert first == by_hand.hexdigest()
    (tmp_path / "sub" / "c.cpython-311.pyc").write_bytes(b"\x00")
    (tmp_path / "notes.txt").write_text("not a source")
    assert source_digest(tmp_path) == first
    seen = {first}
    (tmp_path / "a.py").write_bytes(b"y = 3\n")  # an edit
    seen.add(source_digest(tmp_path))
    (tmp_path / "d.py").write_bytes(b"")  # a new, empty file
    seen.add(source_digest(tmp_path))
    (tmp_path / "d.py").rename(tmp_path / "e.py")  # a rename
    seen.add(source_digest(tmp_path))
    assert len(seen) == 4
