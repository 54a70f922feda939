r"""Where a single-example run ends, over a grid of per-coordinate starts :math:`(\alpha_1,\dots,
\alpha_d)`: the flow's answer to the limit rule of :func:`analysis.limit_leader`.

Every point is the rescaled flow of :math:`\{(\mu,+1)\}` from :math:`w^{(l)}_j(0)=\alpha_j` for
every layer :math:`l` (balanced across layers, not across coordinates), decided by the
certificates of :func:`analysis.certificate` pass after pass (:func:`analysis._run.run` with
``need="limit"``: the regime and the settled leader, without tracking :math:`j^\dagger` in
between), vmapped and swept by :func:`flows.sweep`.
"""

from typing import NamedTuple

import numpy as np

import flows

from ._drive import drive, uses_engine
from ._inputs import check_axis, check_depth, check_method, check_mu
from ._options import split_options
from ._provenance import analysis_version, describe
from ._regime import UNDETERMINED
from ._run import run


class LimitMap(NamedTuple):
    """Result of :func:`limit_map`; arrays of shape ``(n_1, ..., n_d)`` (one axis per α_j)."""

    alphas: tuple  # the d axes
    code: np.ndarray  # index into analysis.REGIMES
    leader: np.ndarray  # the limit index j (0-based) of an escape, -1 otherwise
    status: np.ndarray  # flows.Status of the last solve
    passes: np.ndarray  # solves used


def limit_map(
    method,
    mu,
    alphas,
    *,
    depth: int = 2,
    options=None,
    cache_dir=None,
    progress: bool = True,
    **kwargs,
) -> LimitMap:
    r"""The end of the flow from every start :math:`\alpha\in A_1\times\dots\times A_d`.

    Each run is continued until :func:`analysis._regime.decide` decides it: ``collapse``
    (status ``collapsed``), ``stalled`` (:func:`analysis._certify.never_escapes`), an escape
    whose leader is *settled* (:func:`analysis.certificate`, with the coordinates that
    :func:`analysis._certify.trapped` proves can never grow again), reported as ``minor``
    (the leader is not :math:`\arg\max\mu`) or ``direct`` / ``sequential`` (it is; which of the
    two only says whether :math:`j^\dagger(0^+)` was already :math:`\arg\max\mu`: the path in
    between is not tracked), or ``undetermined`` after ``max_passes`` solves. ``leader`` is
    the settled limit index: where the run escapes, :math:`\beta/\lVert\beta\rVert\to
    e_{\text{leader}}` (at :math:`L\ge3` the leader is the first coordinate to blow up).

    Arguments:
        method: a flows method (GD, L2SAM, LinfSAM, LESAM); its parameters are used as given.
        mu: the example, shape ``(d,)``, positive, unique largest entry.
        alphas: ``d`` 1-D arrays of starts > 0, the axes of the grid (coordinate ``j`` on
            axis ``j``).
        depth: :math:`L` (static).
        options: the :class:`analysis.RunOptions` of every run (default: its defaults). Its
            ``atol`` None means ``"auto"`` (relative to each pass's start) for exact ℓ∞-SAM,
            where a coordinate held at 0 by sliding keeps a rounding residual
            (:math:`\sim10^{-14}`) that an absolute tolerance far below it would make the
            solver resolve in steps of :math:`10^{-5}\tau` (4096 steps per 0.04 τ at
            :math:`L=4`); otherwise :math:`10^{-150}\max|\theta_0|` of each point, kept for its
            every pass, as in :func:`analysis.regime_path`.
        cache_dir, progress: passed to :func:`flows.sweep`.
        kwargs: fields of :class:`analysis.RunOptions` (applied to ``options``) or keywords
            of :func:`flows.sweep` (``workers`` defaults to 1 here with the thread runner; see
            the comment in the code; ``executor=`` runs the sweep on a Dask cluster).

    >>> import flows, analysis
    >>> m = analysis.limit_map(flows.LinfSAM(1.0), [1.0, 2.0], ([0.5, 2.0], [0.5, 1.2]),
    ...                        depth=3, progress=False)
    >>> [[analysis.REGIMES[c] for c in row] for row in m.code], m.leader.tolist()
    ([['stalled', 'direct'], ['minor', 'minor']], [[-1, 1], [0, 0]])
    """
    method = check_method(method)
    mu = check_mu(mu)
    depth = check_depth(depth)
    options, sweep_options = split_options(options, kwargs)
    if not isinstance(alphas, (list, tuple)) or len(alphas) != mu.shape[0]:
        raise ValueError(
            f"`alphas` must be a list or tuple of d = {mu.shape[0]} 1-D arrays (one axis per "
            f"coordinate); got {alphas!r:.80}."
        )
    axes = tuple(np.atleast_1d(check_axis(f"alphas[{j}]", a)) for j, a in enumerate(alphas))
    if options.atol is None and isinstance(method, flows.LinfSAM) and method.delta is None:
        options = options.replace(atol="auto")  # exact ℓ∞-SAM (above)
    data = flows.single_example(mu)

    keys = ("code", "leader", "status", "passes")

    def point(depth, alpha):  # the JAX driver, jit/vmap-ed by flows.sweep
        theta0 = flows.balanced_init(alpha, depth, data.d)
        out = run(method, data, theta0, options=options, need="limit")
        return {k: out[k] for k in keys}

    def batch(depth, alpha):  # the numba driver, on whole chunks (one engine thread each)
        theta0 = np.broadcast_to(alpha[:, None, :], (alpha.shape[0], depth, data.d))
        out = drive(method, data, theta0, options=options, need="limit", workers=1)
        return {k: out[k] for k in keys}

    engine = uses_engine(method, options.backend)
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, mu.shape[0])
    # One host thread by default for the JAX driver: with two, an exact ℓ∞-SAM sweep can hang,
    # both threads waiting inside XLA's execution. Pass workers=... to override. A Dask
    # executor sizes its own workers.
    if not engine and sweep_options.get("executor") in (None, "threads"):
        sweep_options.setdefault("workers", 1)
    result = flows.sweep(
        batch if engine else point,
        {"alpha": grid},
        static={"depth": [depth]},
        product=False,
        cache_dir=cache_dir,
        config=dict(
            method=describe(method),
            mu=mu.tolist(),
            **options.record(),
            analysis=analysis_version(),
        ),  # fmt: skip
        progress=progress,
        batched=engine,
        **sweep_options,
    )
    shape = tuple(a.size for a in axes)
    failed = np.asarray(result["failed"])[0]  # a point whose solve raised: not decided
    out = {}
    for key, fill in (("code", UNDETERMINED), ("leader", -1), ("status", -1), ("passes", 0)):
        values = np.where(failed, fill, np.nan_to_num(np.asarray(result[key])[0], nan=fill))
        out[key] = values.astype(int).reshape(shape)
    return LimitMap(axes, **out)
