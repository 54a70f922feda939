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

jax.config.update("jax_enable_compilation_cache", False)
