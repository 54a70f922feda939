r"""``python -m figures phase``: a phase diagram of the user's own choosing, swept, saved and drawn.

The settings (flags, parsed in :mod:`figures._cli`, or a TOML file read with :mod:`tomllib`,
flags overriding it) are checked here, each error naming its flag, before anything is computed.
The sweep is :func:`analysis.phase_diagram` (cached and resumable under ``--cache``); the picture
draws its ``code`` (an index into ``ds.attrs["regimes"]``) with the regime palette of
:mod:`figures._common`. Nothing is classified here.
"""

from __future__ import annotations

import inspect
import json
import shlex
import time

import numpy as np
import tomllib
from matplotlib.ticker import FuncFormatter

import analysis
import flows
from analysis.internal import check_mu, check_parameters

from ._common import (
    check_folder,
    check_outputs,
    draw_regimes,
    folder_path,
    regime_handles,
)
from ._style import (
    COLUMN_WIDTH,
    FULL_WIDTH,
    cell_edges,
    new_figure,
    save_figure,
    styled,
)

#: method name -> (its class, the fixed keywords of its template, the name drawn in titles);
#: its parameters are those of :data:`analysis.METHOD_PARAMETERS`.
METHODS = {
    "gd": (flows.GD, {}, "GD"),
    "l2sam": (flows.L2SAM, {}, r"$\ell_2$-SAM"),
    "l2sam-layer": (flows.L2SAM, {"per_layer": True}, r"layer-wise $\ell_2$-SAM"),
    "linfsam": (flows.LinfSAM, {}, r"$\ell_\infty$-SAM"),
    "lesam": (flows.LESAM, {}, "LE-SAM"),
}
#: The quantities a diagram can sweep (``analysis.phase_diagram``'s axes), in the order the
#: vertical axis is chosen from, and their flags and mathematical labels.
AXES = analysis.PHASE_AXES
#: Every method parameter (``delta``, ℓ∞-SAM's smoothing of the sign, is fixed, never an axis;
#: without it ℓ∞-SAM takes the exact sign, a Filippov flow).
PARAMS = tuple(dict.fromkeys(p for ps in analysis.METHOD_PARAMETERS.values() for p in ps))
FLAGS = {name: "--" + name.replace("_", "-") for name in (*AXES, *PARAMS)}
LABELS = {
    "alpha": r"scale $\alpha$",
    "rho": r"radius $\rho$",
    "sigma": r"budget $\sigma$",
    "rho_max": r"cap $\rho_{\max}$",
    "depth": r"depth $L$",
}
SYMBOLS = {
    "alpha": r"\alpha",
    "rho": r"\rho",
    "sigma": r"\sigma",
    "rho_max": r"\rho_{\max}",
    "depth": "L",
    "delta": r"\delta",
}
WIDTHS = {"column": (COLUMN_WIDTH, 2.9), "full": (FULL_WIDTH, 3.6)}
#: The most points one diagram may have (2048 × 2048); each axis at most as many values.
MAX_POINTS = 2**22
#: The files a diagram writes into --out.
OUTPUTS = ("phase.pdf", "phase.png", "phase.nc")
#: What each TOML key may hold (a bool is never a number), for the --config check.
_NUMBER = (int, float)
_TOML_TYPES = {
    "method": ("a string", (str,)),
    "loss": ("a string", (str,)),
    "out": ("a string", (str,)),
    "cache": ("a string", (str,)),
    "width": ("a string", (str,)),
    "collapse_tol": ("a number", _NUMBER),
    "mu": ("a list of numbers or a string", (list, str)),
    "depth": ("an integer, a list of integers or a string", (int, list, str)),
    **{k: ("a number, a list of numbers or a string", (*_NUMBER, list, str)) for k in PARAMS},
    "alpha": ("a number, a list of numbers or a string", (*_NUMBER, list, str)),
    "delta": ("a number or a string", (*_NUMBER, str)),
}
#: Every setting, with its default (None: required where the method needs it).
DEFAULTS = {
    "method": None,
    "alpha": None,
    "rho": None,
    "sigma": None,
    "rho_max": None,
    "delta": None,
    "depth": "2",
    "mu": "1,2,3,4,5",
    "loss": "logistic",
    "collapse_tol": 1e-6,
    "out": None,
    "cache": None,
    "width": "column",
}

# --- parsing: one definition of a value, a range, a list ---------------------------------


def parse_values(text, *, integer: bool = False):
    """A fixed value (a float, or an int if ``integer``) or a 1-D array from one setting.

    ``START:STOP:COUNT`` is ``COUNT >= 2`` log-spaced values from START to STOP (both > 0,
    START < STOP); with ``integer``, ``START:STOP`` is every integer from START to STOP.
    ``A,B,...`` (or a TOML list) is those values; a number is itself. Raises ``ValueError``
    (without the flag's name) on anything else.
    """
    if isinstance(text, list):
        text = ",".join(str(v) for v in text)
    if isinstance(text, bool):
        raise ValueError(f"expected a number, a list or a range; got {text!r}")
    text = str(text).strip()
    kind = int if integer else float

    def number(s):
        try:
            value = kind(s)
        except ValueError:
            what = "an integer" if integer else "a number"
            raise ValueError(f"{s.strip()!r} is not {what}") from None
        if not np.isfinite(value) or value <= 0:
            what = "an integer >= 1" if integer else "finite and > 0"
            raise ValueError(f"{s.strip()!r} must be {what}")
        return value

    if ":" in text:
        parts = text.split(":")
        if len(parts) != (2 if integer else 3):
            form = "START:STOP" if integer else "START:STOP:COUNT"
            raise ValueError(f"a range is {form}; got {text!r}")
        if not integer and any(_nonpositive(p) for p in parts[:2]):
            raise ValueError(
                f"the range {text!r} needs START and STOP > 0: they are the values, log-spaced "
                "between, not their logarithms (e.g. 1e-1:1e3:32)"
            )
        start, stop = number(parts[0]), number(parts[1])
        if integer:
            if stop <= start:
                raise ValueError(f"the range {text!r} is empty or reversed (STOP <= START)")
            if stop - start >= MAX_POINTS:
                raise ValueError(f"the range {text!r} has more than {MAX_POINTS} values")
            return np.arange(start, stop + 1)
        try:
            count = int(parts[2])
        except ValueError:
            raise ValueError(f"the count {parts[2]!r} of {text!r} is not an integer") from None
        if count < 2:
            raise ValueError(f"the range {text!r} is empty: COUNT must be >= 2")
        if count > MAX_POINTS:
            raise ValueError(f"the range {text!r} has more than {MAX_POINTS} values")
        if stop <= start:
            raise ValueError(f"the range {text!r} is empty or reversed (STOP <= START)")
        return np.geomspace(start, stop, count)
    if "," in text:
        if text.count(",") >= MAX_POINTS:
            raise ValueError(f"the list has more than {MAX_POINTS} values")
        values = np.array([number(s) for s in text.split(",")])
        if np.any(np.diff(values) <= 0):
            raise ValueError(f"the list {text!r} must be strictly increasing")
        return values
    if not text:
        raise ValueError("empty value")
    return number(text)


def _flag_number(flag: str, text, accepted: str) -> float:
    """``text`` (a flag's word or a TOML value) as a float, or ``ValueError`` naming ``flag``."""
    if isinstance(text, bool):
        raise ValueError(f"{flag}: {text!r} is not {accepted}")
    try:
        return float(text)
    except (ValueError, TypeError):
        raise ValueError(f"{flag}: {text!r} is not {accepted}") from None


def _nonpositive(s: str) -> bool:
    """Whether ``s`` reads as a number <= 0 (so a range of it is not log-spaced)."""
    try:
        return float(s) <= 0
    except ValueError:
        return False


def _settings(args, parser) -> dict:
    """Flags over the TOML file over the defaults; unknown TOML keys are an error."""
    given = {k: v for k, v in vars(args).items() if v is not None and k not in ("config", "quiet")}
    file = {}
    if args.config is not None:
        try:
            with open(args.config, "rb") as f:
                raw = tomllib.load(f)
        except OSError as err:
            parser.error(f"--config {args.config}: cannot read it ({err.strerror or err})")
        except tomllib.TOMLDecodeError as err:
            parser.error(f"--config {args.config}: not valid TOML ({err})")
        except UnicodeDecodeError:
            parser.error(f"--config {args.config}: not valid TOML (not UTF-8 text)")
        spellings = {}
        for k in raw:
            spellings.setdefault(k.replace("-", "_"), []).append(k)
        twice = [" and ".join(v) for v in spellings.values() if len(v) > 1]
        if twice:
            parser.error(
                f"--config {args.config}: {'; '.join(twice)} are one setting, given twice; "
                "keep one spelling"
            )
        file = {k.replace("-", "_"): v for k, v in raw.items()}
        unknown = sorted(k for k in raw if k.replace("-", "_") not in DEFAULTS)
        if unknown:
            parser.error(
                f"--config {args.config}: unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(DEFAULTS)}"
            )
        for key, value in file.items():
            problem = _toml_type_problem(key, value)
            if problem:
                parser.error(f"--config {args.config}: {problem}")
    return {**DEFAULTS, **file, **given}


def _toml_type_problem(key: str, value) -> str | None:
    """Why a TOML ``key`` cannot hold ``value`` (a message naming the key), or None."""
    what, types = _TOML_TYPES[key]
    items = value if isinstance(value, list) else [value]
    item_types = (int,) if key == "depth" else _NUMBER
    bad = isinstance(value, bool) or not isinstance(value, types)
    if isinstance(value, list):
        bad = (
            bad
            or not value
            or any(isinstance(v, bool) or not isinstance(v, item_types) for v in items)
        )
    return f"`{key}` must be {what}; got {value!r}" if bad else None


#: The largest depth: float64's exponents span 2^±1024, so α^L leaves the float64 range past
#: L = 1024 for every α outside [1/2, 2] (:func:`_check_depth`).
MAX_DEPTH = 1024


def _check_depth(depth, alpha) -> None:
    r"""Refuse a depth at which :math:`\beta=\alpha^L` of a start of the diagram is not a normal
    float64 (:math:`10^{-307}\le\alpha^L\le10^{308}`), or above ``MAX_DEPTH``, naming ``--depth``
    and the limit; such a run would only under- or overflow (and each depth compiles)."""
    worst = float(np.max(np.abs(np.log10(np.atleast_1d(alpha)))))
    limit = MAX_DEPTH if worst == 0 else min(MAX_DEPTH, int(307 / worst))
    top = int(np.max(depth))
    if top > limit:
        at = float(np.atleast_1d(alpha)[np.argmax(np.abs(np.log10(np.atleast_1d(alpha))))])
        raise ValueError(
            f"--depth: L = {top} is beyond what float64 represents: the start α^L must stay within "
            f"1e-307..1e308 (at α = {at:g}: L <= {limit}) and L <= {MAX_DEPTH} at any α"
        )


def check_settings(s: dict) -> dict:
    """The checked configuration of a diagram, or ``ValueError`` naming the flag at fault.

    Returns a dict with ``method`` (name), ``template`` (the :mod:`flows` method),
    ``values`` (name -> a float, or an array for a swept axis, for α, ρ, σ, ρ_max and depth),
    ``swept`` (the two swept names, vertical first), ``mu``, ``options`` (the
    :class:`analysis.RunOptions` with ``--loss`` and ``--collapse-tol``),
    ``out``, ``cache`` and ``width``.
    """
    if s["method"] is None:
        raise ValueError("--method is required; choose from " + ", ".join(METHODS))
    if s["method"] not in METHODS:
        raise ValueError(
            f"--method: unknown method {s['method']!r}; choose from {', '.join(METHODS)}"
        )
    cls, fixed, _ = METHODS[s["method"]]
    check_parameters(
        cls, {p: s[p] for p in PARAMS}, method_name=s["method"], spell=FLAGS.__getitem__
    )
    params = analysis.METHOD_PARAMETERS[cls]
    signature = inspect.signature(cls).parameters  # required: a parameter without a default
    for name in params:
        if s[name] is None and signature[name].default is inspect.Parameter.empty:
            raise ValueError(f"{FLAGS[name]} is required for {s['method']}")
    if s["alpha"] is None:
        raise ValueError("--alpha is required")
    values = {}
    if s["delta"] is not None:
        values["delta"] = _flag_number("--delta", s["delta"], "a number > 0")
        if not (np.isfinite(values["delta"]) and values["delta"] > 0):
            raise ValueError(f"--delta: {s['delta']!r} is not a number > 0")
    for name in AXES:
        if s[name] is None:
            continue
        try:
            values[name] = parse_values(s[name], integer=name == "depth")
        except ValueError as err:
            raise ValueError(f"{FLAGS[name]}: {err}") from None
    if "depth" in values and "alpha" in values:
        _check_depth(values["depth"], values["alpha"])
    try:
        mu_text = ",".join(map(str, s["mu"])) if isinstance(s["mu"], list) else str(s["mu"])
        mu = check_mu([float(x) for x in mu_text.split(",")])
    except (ValueError, TypeError) as err:
        raise ValueError(f"--mu: malformed {s['mu']!r} ({err}); e.g. --mu 1,2,3,4,5") from None
    # the run options, checked here (by analysis.RunOptions) and passed whole to the sweep
    try:
        options = analysis.RunOptions(loss=s["loss"])
    except ValueError:
        raise ValueError(f"--loss: {s['loss']!r} is not logistic or exponential") from None
    collapse_tol = _flag_number("--collapse-tol", s["collapse_tol"], "in (0, 1)")
    try:
        options = options.replace(collapse_tol=collapse_tol)
    except ValueError:
        raise ValueError(f"--collapse-tol: {s['collapse_tol']!r} is not in (0, 1)") from None
    if s["width"] not in WIDTHS:
        raise ValueError(f"--width: {s['width']!r} is not one of {', '.join(WIDTHS)}")
    swept = [k for k in AXES if np.ndim(values.get(k)) == 1]
    if len(swept) != 2:
        got = ", ".join(FLAGS[k] for k in swept) or "none"
        raise ValueError(
            f"exactly two of {', '.join(FLAGS[k] for k in AXES)} must be ranges or lists "
            f"(the axes of the picture); got {len(swept)}: {got}"
        )
    n_points = int(np.prod([np.size(values[k]) for k in swept]))
    if n_points > MAX_POINTS:
        sizes = " x ".join(str(np.size(values[k])) for k in swept)
        raise ValueError(
            f"{FLAGS[swept[0]]}, {FLAGS[swept[1]]}: the grid has {sizes} = {n_points} points, "
            f"more than {MAX_POINTS} (2048 x 2048); choose fewer values"
        )
    if s["out"] is None:
        raise ValueError("--out is required")
    out = folder_path("--out", s["out"])
    cache = folder_path("--cache", s["cache"]) if s["cache"] is not None else out / "cache"
    return dict(
        method=s["method"],
        # the template carries the fixed parameters (1.0 for a swept one: replaced per point)
        template=cls(
            **fixed,
            **{p: 1.0 if np.ndim(values[p]) else values[p] for p in params if p in values},
        ),
        values=values,
        swept=swept,
        mu=mu,
        options=options,
        out=out,
        cache=cache,
        width=s["width"],
    )


# --- computing and drawing ---------------------------------------------------------------


def _order(points):
    """Sweep order: by scale invariance a run's cost depends on α over the radius (or σ)."""
    key = np.zeros(len(next(iter(points.values()))))
    for name, sign in (("alpha", 1.0), ("rho", -1.0), ("sigma", -1.0)):
        if name in points:
            key = key + sign * np.log(points[name])
    return key


def compute(cfg: dict, *, progress: bool = True):
    """The :func:`analysis.phase_diagram` Dataset of a checked configuration, with it in attrs."""
    v = cfg["values"]
    ds = analysis.phase_diagram(
        cfg["template"],
        cfg["mu"],
        alpha=v["alpha"],
        rho=v.get("rho"),
        sigma=v.get("sigma"),
        rho_max=v.get("rho_max"),
        depth=[int(x) for x in np.atleast_1d(v["depth"])],
        options=cfg["options"],
        cache_dir=cfg["cache"],
        progress=progress,
        order=_order,
    )
    ds.attrs["command_method"] = cfg["method"]
    ds.attrs["swept"] = " ".join(cfg["swept"])
    ds.attrs["config"] = json.dumps(
        {
            "method": cfg["method"],
            **{k: np.asarray(x).tolist() for k, x in v.items()},
            "mu": cfg["mu"].tolist(),
            "loss": cfg["options"].loss,
            "collapse_tol": cfg["options"].collapse_tol,
        }
    )
    return ds


def _number(x) -> str:
    return f"{float(x):g}"


def title(ds) -> str:
    """The caption-like title: the method and its fixed parameters, L, μ and the loss."""
    cfg = json.loads(ds.attrs["config"])
    swept = ds.attrs["swept"].split()
    cls, _, name = METHODS[cfg["method"]]
    if "delta" in analysis.METHOD_PARAMETERS[cls] and cfg.get("delta") is None:
        name += " (exact sign)"
    fixed = [
        f"${SYMBOLS[k]}={_number(cfg[k])}$"
        for k in (*PARAMS, "depth")
        if cfg.get(k) is not None and k not in swept
    ]
    mu = ", ".join(_number(m) for m in cfg["mu"])
    first = name + " regimes" + (", " + ", ".join(fixed) if fixed else "")
    return f"{first}\n$\\mu=({mu})$, {cfg['loss']} loss"


def draw(ds, width: str = "column"):
    """The regime codes of a two-axis phase-diagram Dataset over its two axes."""
    return styled(_draw, ds, width)  # the style for every artist, not only the Figure


def _draw(ds, width):
    y_name, x_name = ds.attrs["swept"].split()
    code = ds["code"].transpose(y_name, x_name).values
    x, y = ds[x_name].values, ds[y_name].values
    w, h = WIDTHS[width]
    fig = new_figure(w, h)
    ax = fig.add_subplot()
    logs = {}
    for name, vals in ((x_name, x), (y_name, y)):
        logs[name] = name != "depth" and vals.max() / vals.min() >= 10
    draw_regimes(ax, cell_edges(x, logs[x_name]), cell_edges(y, logs[y_name]), code)
    ax.set_xscale("log" if logs[x_name] else "linear")
    ax.set_yscale("log" if logs[y_name] else "linear")
    for axis, name in ((ax.xaxis, x_name), (ax.yaxis, y_name)):
        if logs[name]:
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0.01, not 10⁻²
    if x_name == "depth":
        ax.set_xticks(x)
    if y_name == "depth":
        ax.set_yticks(y)
    ax.set_xlabel(LABELS[x_name])
    ax.set_ylabel(LABELS[y_name])
    ax.set_title(title(ds))
    handles = regime_handles(set(np.unique(code).tolist()))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 2 if width == "column" else 5),
        handlelength=1.2,
    )
    return fig


def run(args, args_list, parser) -> int:
    """Run ``python -m figures phase`` on its parsed ``args`` (the words ``args_list``).

    ``parser`` (:func:`figures._cli.phase_parser`) reports a bad setting as one line.
    """
    try:
        cfg = check_settings(_settings(args, parser))
        check_folder("--out", cfg["out"], create=True)
        check_outputs("--out", [cfg["out"] / name for name in OUTPUTS])
        check_folder("--cache", cfg["cache"], create=True)
    except ValueError as err:
        parser.error(str(err))
    t0 = time.perf_counter()
    ds = compute(cfg, progress=not args.quiet)
    ds.attrs["command"] = "python -m figures phase " + shlex.join(args_list)
    nc = cfg["out"] / "phase.nc"
    ds.to_netcdf(nc)
    paths = save_figure(draw(ds, cfg["width"]), cfg["out"], "phase")
    if not args.quiet:
        counts = ", ".join(
            f"{analysis.REGIMES[k]} {int(n)}"
            for k, n in zip(*np.unique(ds["code"].values, return_counts=True), strict=True)
        )
        print(f"{counts} of {ds['code'].size} points ({time.perf_counter() - t0:.1f} s)")
        print("wrote " + ", ".join(str(p) for p in (*paths, nc)))
    return 0
