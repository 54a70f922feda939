"""Test-session settings.

JAX's persistent compilation cache stays off in the test process: a shared per-run cache
was measured to save nothing here (21.4 min against 20.2 min for the suite; most analysis
executables hold host callbacks and are not written). The two segmentation faults once
blamed on the cache came from the kernel's limit on memory regions, ``vm.max_map_count``,
which ``flows._config.release_compiled_when_crowded`` now keeps the process below.

``flows`` turns the cache on by default in the user's cache folder; the tests' subprocesses
(the command lines, the README) inherit ``SAMFLOWS_COMPILATION_CACHE=off`` so that a test run
neither reads nor fills it (tests/test_config.py turns it on in a temporary folder).
"""

import os

os.environ["SAMFLOWS_COMPILATION_CACHE"] = "off"

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """xdist's work units (``--dist loadgroup``): one per test file, as ``--dist loadfile``
    (its tests share compiled solvers), except that the figure test files are one unit
    together, on one worker, so that the quick figure build they read (``quick_figures``)
    is made once."""
    for item in items:
        name = item.path.name
        group = "figures" if name.startswith("test_figures") else str(item.path)
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def quick_figures(tmp_path_factory):
    """``python -m figures --quick`` (in process, through the CLI entry point), made once:
    the folders ``(out, cache)`` of the written figures and of their saved data."""
    import figures

    root = tmp_path_factory.mktemp("figures")
    out, cache = root / "out", root / "cache"
    assert figures.main(["--quick", "--quiet", "--out", str(out), "--cache", str(cache)]) == 0
    return out, cache
