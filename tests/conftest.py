"""Test-session settings.

JAX's persistent compilation cache stays off in the test process: ``flows.sweep`` turns it on
for the whole process the first time a sweep gets a ``cache_dir``, after which every later
compilation of the session goes through XLA's compile-and-serialise path, where two full-suite
runs here crashed with a segmentation fault inside ``backend_compile_and_load``. Spawned worker
processes (the Dask tests, the cross-process cache tests) are not affected.

``flows`` turns the cache on by default in the user's cache folder; the tests' subprocesses
(the command lines, the README) inherit ``SAMFLOWS_COMPILATION_CACHE=off`` so that a test run
neither reads nor fills it (tests/test_config.py turns it on in a temporary folder).
"""

import os

os.environ["SAMFLOWS_COMPILATION_CACHE"] = "off"

import jax  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)
