r"""The spread between two runs of the pipeline: for every number the runs save, the largest
difference between them.

For each netCDF file saved by both runs and each numeric variable :math:`x` in it, the spread
is :math:`\max_i|x^{(a)}_i-x^{(b)}_i|` over the entries finite in both runs, and the count of
entries finite in one run only (a run that reached a level where the other did not).

``python -m experiments._spread A B JSON`` compares the output folders ``A`` and ``B`` and
writes the result to ``JSON``.
"""

import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr


def spread(a, b) -> dict:
    """``{file: {variable: [largest |difference|, entries finite in one run only]}}`` over the
    netCDF files in both folders ``a`` and ``b`` (see the module docstring)."""
    a, b = Path(a), Path(b)
    for name, folder in (("a", a), ("b", b)):
        if not folder.is_dir():
            raise ValueError(f"`{name}` must be a folder of a run's results; got {str(folder)!r}.")
    out = {}
    for path in sorted(a.glob("*.nc")):
        if not (b / path.name).exists():
            continue
        da, db = xr.load_dataset(path), xr.load_dataset(b / path.name)
        out[path.name] = {}
        for var in da.data_vars:
            x, y = np.asarray(da[var].values), np.asarray(db[var].values)
            if x.dtype.kind not in "fiub" or var not in db or x.shape != y.shape:
                continue
            x, y = x.astype(np.float64), y.astype(np.float64)
            both = np.isfinite(x) & np.isfinite(y)
            largest = float(np.max(np.abs(x[both] - y[both]))) if both.any() else 0.0
            out[path.name][var] = [largest, int(np.sum(np.isfinite(x) != np.isfinite(y)))]
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        sys.stderr.write("usage: python -m experiments._spread A B JSON\n")
        return 2
    result = {"command": "python -m experiments --quick", "spread": spread(args[0], args[1])}
    Path(args[2]).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
