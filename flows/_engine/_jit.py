"""The compile options of the engine's functions (numba, the machine code cached on disk).

``jit`` compiles a function on its own; ``inlined`` puts it into its caller's IR, so that
LLVM sees the caller's loops and constants through it (the field's column passes);
``loop`` is the chunk loop, which releases the GIL so that threads run chunks side by
side. The NumPy error model: a division by zero gives inf or NaN, as in JAX, and nothing
raises inside the loop.
"""

from numba import njit

jit = njit(cache=True, error_model="numpy")
inlined = njit(cache=True, error_model="numpy", inline="always")
loop = njit(cache=True, error_model="numpy", nogil=True)
