r"""Phase diagrams as labelled data: the per-run layer swept over a grid (``xarray.Dataset``)."""

from importlib import metadata

import equinox as eqx
import numpy as np

import flows

from ._drive import drive, uses_engine
from ._inputs import check_axis, check_depth, check_method, check_mu, check_parameters
from ._options import split_options
from ._provenance import analysis_version, describe
from ._regime import REGIMES, RUN_ATOL_REL
from ._run import run

#: The quantities :func:`phase_diagram` can sweep (its axes, in its order of dimensions).
PHASE_AXES = ("alpha", "rho", "sigma", "rho_max", "depth")
#: What each point of a diagram returns (the per-run layer's results).
OUTPUTS = ("code", "first", "last", "n_switches", "times", "passes", "status", "t_end", "leader",
           "t_real")  # fmt: skip
VERSIONED = ("samflows", "jax", "jaxlib", "diffrax", "equinox", "numpy", "scipy", "xarray")


def _whole(x):
    """An integer-valued number as a Python int (a depth read from an array); else ``x``."""
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)) and np.isfinite(x) and float(x).is_integer():
        return int(x)
    return x


def phase_diagram(
    method,
    mu,
    *,
    alpha,
    rho=None,
    sigma=None,
    rho_max=None,
    depth=2,
    options=None,
    cache_dir=None,
    progress: bool = True,
    **kwargs,
):
    r"""Regime, first and last :math:`j^\dagger`, switch count and switch times over a grid.

    Every point is the rescaled single-example flow :math:`\{(\mu,+1)\}` from the balanced
    start :math:`w^{(l)}(0)=\alpha`, classified by :func:`analysis._run.run` (the certificates
    and :func:`analysis._regime.decide` of :func:`analysis.regime_path`, in one compiled,
    vmapped call per chunk), swept by :func:`flows.sweep`: cached and resumable with
    ``cache_dir``, with a progress bar.

    Each of ``alpha``, ``rho``, ``sigma``, ``rho_max`` and ``depth`` is a number (fixed) or a
    1-D array (an axis of the grid). ``method`` is a template: the fields named by the axes
    (``rho`` of L2SAM / LinfSAM, ``sigma`` and ``rho_max`` of LESAM) are replaced point by point;
    one not belonging to the method is refused. ``depth`` is static (one compilation each).
    The runs take ``options``, an :class:`analysis.RunOptions` (default: its defaults):
    the default absolute tolerance is relative to each point's start, kept for its every pass
    (:func:`analysis._regime.start_atol`: the diagram of the twins
    :math:`(\lambda\alpha,\lambda\rho)` is the same cell by cell at every magnitude), and
    ``max_steps`` changes the cost, not the regimes: the dense output of every point holds
    ``max_steps`` steps (about 0.8 MB at 1024, L = 2, d = 5), written in full each pass, so a
    larger budget costs memory traffic for the same regimes and switch counts
    (benchmarks/README.md).

    ``kwargs`` are either fields of :class:`analysis.RunOptions` (``max_steps=...``,
    ``rtol=...``: applied to ``options``) or keywords of :func:`flows.sweep` (``executor=`` a
    Dask ``Client`` or ``"dask"`` runs the chunks on a cluster, with the same results;
    ``workers``, ``chunk_size``, ``order``, ...); any other name is refused.

    Returns:
        ``xarray.Dataset`` with one dimension per array axis (in the order ``depth``, then
        ``alpha``, ``rho``, ``sigma``, ``rho_max`` as given) and variables ``code`` (an index
        into ``attrs["regimes"]``, the table :data:`analysis.REGIMES` of
        :func:`analysis.regime_code`: collapse, sequential, direct, minor, stalled,
        undetermined, excursion; ``sequential`` runs start on a minor index,
        :math:`j^\dagger(0^+)\ne\arg\max\mu`, ``excursion`` runs start on the major one and
        leave it before they settle there), ``first`` / ``last`` (:math:`j^\dagger`, 0-based),
        ``n_switches``, ``times`` (dimension
        ``switch``, NaN-padded), ``status``, ``passes``, ``t_end``. ``attrs`` hold the method,
        μ, the loss, the tolerances and the package versions; ``ds.to_netcdf(path)`` saves it.

    >>> import flows, analysis, numpy as np
    >>> ds = analysis.phase_diagram(flows.L2SAM(1.0), [1.0, 2.0, 3.0],
    ...                             alpha=[0.05, 0.6, 3.0], rho=1.0, progress=False)
    >>> [ds.attrs["regimes"].split()[c] for c in ds["code"].values]  # sympy bounds 0.19, 0.57, 0.94
    ['collapse', 'sequential', 'direct']
    """
    import xarray as xr

    method = check_method(method)
    mu = check_mu(mu)
    opts, sweep_options = split_options(options, kwargs)
    given = {"alpha": alpha, "rho": rho, "sigma": sigma, "rho_max": rho_max}
    check_parameters(
        type(method),
        dict(rho=rho, sigma=sigma, rho_max=rho_max),
        method_name=f"`method` {type(method).__name__}",
    )
    if sigma is not None and callable(method.sigma):
        raise ValueError(
            "`sigma`: the template `method` has a schedule sigma(t), which a diagram "
            "keeps fixed: `sigma` can be an axis (or a fixed number) only for a constant "
            "budget, e.g. flows.LESAM(0.35, rho_max); with a schedule leave `sigma` None "
            "and sweep alpha, rho_max or depth."
        )
    values = {k: check_axis(k, v) for k, v in given.items() if v is not None}
    try:
        depths = np.atleast_1d(np.asarray(depth))
    except ValueError:  # ragged
        depths = np.zeros((0,))
    if depths.ndim != 1 or depths.size == 0:
        raise ValueError(f"`depth` must be an integer or a non-empty 1-D list; got {depth!r}.")
    depths = [check_depth(_whole(x)) for x in depths]
    data = flows.single_example(mu)
    axes = [k for k in values if values[k].ndim == 1]
    fixed = {k: float(values[k]) for k in values if values[k].ndim == 0}
    template = method

    def point(depth, **p):  # the JAX driver, jit/vmap-ed by flows.sweep
        p = {**fixed, **p}
        m = template
        for name in p:
            if name != "alpha":
                m = eqx.tree_at(lambda m, name=name: getattr(m, name), m, p[name])
        theta0 = flows.balanced_init(p["alpha"], depth, data.d)
        return run(m, data, theta0, options=opts)

    def batch(depth, **p):  # the numba driver, on whole chunks (one engine thread each)
        n = len(next(iter(p.values())))
        p = {**{k: np.full(n, v) for k, v in fixed.items()}, **p}
        theta0 = np.broadcast_to(p.pop("alpha")[:, None, None], (n, depth, data.d))
        out = drive(template, data, theta0, options=opts, params=p, workers=1)
        return {k: out[k] for k in OUTPUTS}

    engine = uses_engine(method, opts.backend)

    config = dict(
        method=describe(method),
        mu=mu.tolist(),
        fixed=fixed,
        **opts.record(),
        analysis=analysis_version(),
    )
    params = {k: values[k] for k in axes}
    if not params:
        raise ValueError("at least one of `alpha`, `rho`, `sigma`, `rho_max` must be an array.")
    result = flows.sweep(
        batch if engine else point,
        params,
        static={"depth": depths},
        cache_dir=cache_dir,
        config=config,
        progress=progress,
        batched=engine,
        **sweep_options,
    )
    many = len(depths) > 1
    dims = (["depth"] if many else []) + axes
    coords = {"depth": np.array(depths)} if many else {}
    coords.update(params)
    variables = {}
    for key in ("code", "first", "last", "n_switches", "status", "passes", "t_end", "times"):
        arr = np.asarray(result[key])
        arr = arr if many else arr[0]
        variables[key] = (dims + (["switch"] if key == "times" else []), arr)
    attrs = dict(
        regimes=" ".join(REGIMES),
        method=describe(method, swept=axes),
        mu=mu,
        loss=opts.loss,
        fixed=", ".join(f"{k}={v:g}" for k, v in fixed.items())
        + ("" if many else f"{', ' if fixed else ''}depth={depths[0]}"),
        collapse_tol=opts.collapse_tol,
        escape_tol="default" if opts.escape_tol is None else opts.escape_tol,
        rtol=opts.rtol,
        atol=f"relative {RUN_ATOL_REL:g} max|θ₀|" if opts.atol is None else opts.atol,
        max_steps=opts.max_steps,
        max_passes=opts.max_passes,
        n_grid=opts.n_grid,
    )
    for name in VERSIONED:
        try:
            attrs[f"version_{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            attrs[f"version_{name}"] = "none"
    return xr.Dataset(variables, coords=coords, attrs=attrs)
