"""Figures of the experiments, in the figures' visual language (:mod:`figures._style`).

Drawn at the printed width (5.5 in) and saved at exactly that size (constrained layout, no
tight bounding box), every text at the style's 8 pt (7 pt only for plain text without sub- or
superscripts), methods in the Okabe–Ito colours of :data:`figures._style.METHOD_COLORS`
(ℓ2-SAM at LE-SAM's mean radius ρ̄ in the palette's sky blue, everywhere; LE-SAM capped in its
orange). Curves are paired differences (method minus baseline, same seed): the mean solid, its
95 % Student-t interval over seeds as two thin pale lines; 0 is the dotted reference. Each
``draw_*`` returns the figure; each ``*_figure`` saves it as PDF and PNG and returns the paths.
"""

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import analysis
from figures.internal import (
    FULL_WIDTH,
    METHOD_COLORS,
    OKABE_ITO,
    REFERENCE,
    SMALL_SIZE,
    draw_classes,
    new_figure,
    panel_labels,
    regime_cmap,
    regime_handles,
    save_figure,
    styled,
)

from ._stats import mean_ci

COLORS = {
    "GD": METHOD_COLORS["GD"],
    "SGD": METHOD_COLORS["GD"],
    "ℓ2-SAM": METHOD_COLORS["ℓ2-SAM"],
    "ℓ2-SAM best": METHOD_COLORS["ℓ2-SAM"],
    "ℓ∞-SAM": METHOD_COLORS["ℓ∞-SAM"],
    "LE-SAM": METHOD_COLORS["LE-SAM"],
    "LE-SAM capped": OKABE_ITO["orange"],
    "ℓ2-SAM ρ̄": OKABE_ITO["sky"],
}
LABELS = {
    "GD": "GD",
    "SGD": "SGD",
    "ℓ2-SAM": r"$\ell_2$-SAM",
    "ℓ∞-SAM": r"$\ell_\infty$-SAM",
    "LE-SAM": "LE-SAM",
    "LE-SAM capped": "LE-SAM capped",
    "ℓ2-SAM ρ̄": r"$\ell_2$-SAM at $\bar\rho$",
    "ℓ2-SAM best": r"$\ell_2$-SAM, best $\rho$",
}


def _color(method):
    return COLORS.get(method, OKABE_ITO["purple"])  # the sweep's other radii


def _label(method):
    if method.startswith("ℓ2-SAM ρ="):
        return r"$\ell_2$-SAM, $\rho=" + method.split("=")[1] + "$"
    return LABELS.get(method, method)


def _band(ax, x, values, color, label):
    """The mean over seeds (solid) and its 95 % t interval (two thin, pale solid lines: a
    dotted line is a reference in this set, and fills would overlap)."""
    m, h = mean_ci(values)
    ax.plot(x, m, color=color, label=label, lw=1.1)
    if np.any(np.isfinite(h)):
        for edge in (m - h, m + h):
            ax.plot(x, edge, color=color, lw=0.5, alpha=0.45)


def draw_diagonal(ds, long) -> Figure:
    """Each method's low-intensity share minus GD's (paired by seed) against time, per depth;
    below, ℓ2-SAM's minus GD's over the long horizon."""
    depths = list(ds.depth.values)
    fig = new_figure(FULL_WIDTH, 3.4)
    axes = fig.subplots(2, len(depths), squeeze=False)
    t = ds.time.values
    keep = t > 0
    gd = ds.sel({"method": "GD"}).low_share.values
    for b, depth in enumerate(depths):
        ax = axes[0, b]
        for method in ds.method.values:
            if method == "GD":
                continue
            sel = ds.sel({"method": method, "depth": depth})
            diff = sel.low_share.values - gd[b]
            _band(ax, t[keep], diff[:, keep], _color(method), _label(method))
        ax.axhline(0, **REFERENCE)
        ax.set_xscale("log")
        ax.set_title(f"$L={depth}$")
        ax = axes[1, b]
        if depth in long.depth.values:
            tl = long.time.values
            kl = tl > 0
            sel = long.sel({"depth": depth})
            diff = (
                sel.sel({"method": "ℓ2-SAM"}).low_share.values
                - sel.sel({"method": "GD"}).low_share.values
            )
            _band(ax, tl[kl], diff[:, kl], _color("ℓ2-SAM"), _label("ℓ2-SAM"))
            ax.axhline(0, **REFERENCE)
            ax.set_xscale("log")
        else:
            ax.set_axis_off()
        ax.set_xlabel(r"time $t=k\eta$")
    axes[0, 0].set_ylabel("low-intensity share\nminus GD's")
    axes[1, 0].set_ylabel("long horizon:\n" + r"$\ell_2$-SAM minus GD")
    axes[0, 0].legend(loc="upper left", handlelength=1.2)
    panel_labels([ax for ax in axes.flat if ax.axison])
    return fig


def diagonal_figure(ds, long, out: Path) -> list[Path]:
    return save_figure(styled(draw_diagonal, ds, long), out, "diagonal_shares")


def draw_regime_map(rm) -> Figure:
    """Per digit pair: the measured ℓ2-SAM regime (depth × α/ρ) beside the theory's."""
    pairs = list(rm.pair.values)
    fig = new_figure(FULL_WIDTH, 1.2 * len(pairs) + 0.9)
    axes = fig.subplots(len(pairs), 2, squeeze=False, sharex=True)
    cmap, norm = regime_cmap()
    ratios = rm.ratio.values
    x_edges = np.arange(len(ratios) + 1) - 0.5
    y_edges = np.arange(rm.sizes["depth"] + 1) - 0.5
    codes = {name: k for k, name in enumerate(analysis.REGIMES)}
    present = set()
    for p, pair in enumerate(pairs):
        for c, (grid, title) in enumerate(
            (
                (rm.measured.values[p, :, 1], "measured, full pair"),
                (rm.theory.values[p], r"theory, one example $\mu$"),
            )
        ):
            code = np.vectorize(codes.get)(grid).astype(int)
            present |= set(np.unique(code).tolist())
            ax = axes[p, c]
            draw_classes(ax, x_edges, y_edges, code, cmap, norm, hatched=(codes["undetermined"],))
            ax.set_yticks(range(rm.sizes["depth"]), [f"$L={L}$" for L in rm.depth.values])
            ax.set_xticks(range(len(ratios)), [f"{r:g}" for r in ratios], fontsize=SMALL_SIZE)
            ax.set_title(f"{pair}: {title}")
        axes[p, 0].set_ylabel("depth")
    for ax in axes[-1]:
        ax.set_xlabel(r"$\alpha/\rho$")
    fig.legend(handles=regime_handles(present), loc="outside lower center", ncol=3,
               fontsize=SMALL_SIZE)  # fmt: skip
    panel_labels(list(axes.flat))
    return fig


def regime_figure(rm, out: Path) -> list[Path]:
    return save_figure(styled(draw_regime_map, rm), out, "regime_map_digits")


def _sam(ds):
    """The ℓ2-SAM run of the attribution panels: the sweep's largest radius."""
    return f"ℓ2-SAM ρ={max(ds.attrs['sweep']):g}"


def draw_shares(cnn) -> Figure:
    """Minor share of Grad-CAM and saliency, and accuracy with only the minor feature kept,
    minus SGD's (paired by seed), for ℓ2-SAM (the sweep's largest radius) and LE-SAM."""
    names = list(cnn)
    fig = new_figure(FULL_WIDTH, 1.7 * len(names) + 0.4)
    axes = fig.subplots(len(names), 3, squeeze=False)
    for r, name in enumerate(names):
        ds = cnn[name]
        step = ds.step.values
        base = ds.sel({"method": "SGD"})
        for method in (_sam(ds), "LE-SAM"):
            sel = ds.sel({"method": method})
            color = METHOD_COLORS["ℓ2-SAM"] if method.startswith("ℓ2") else _color(method)
            for c, var in enumerate(("cam_minor_share", "sal_minor_share", "acc_only_minor")):
                diff = sel[var].values - base[var].values
                _band(axes[r, c], step, diff, color, _label(method))
        minor = "weak patch" if name == "patches" else "low-intensity pixels"
        axes[r, 0].set_ylabel(f"{name}\nGrad-CAM share on\n{minor}, − SGD")
        axes[r, 1].set_ylabel("saliency share, − SGD")
        axes[r, 2].set_ylabel("acc., only minor\nkept, − SGD")
        for c in range(3):
            axes[r, c].axhline(0, **REFERENCE)
            axes[r, c].set_xlabel("step")
    axes[0, 0].legend(loc="best", handlelength=1.2)
    panel_labels(list(axes.flat))
    fig.get_layout_engine().set(rect=(0, 0, 0.985, 1))  # room for the last tick label
    return fig


def shares_figure(cnn, out: Path) -> list[Path]:
    return save_figure(styled(draw_shares, cnn), out, "cnn_minor_share")


def map_moments(n_ckpt: int) -> np.ndarray:
    """The checkpoints drawn by :func:`draw_maps`: 0, 10 %, 25 %, 50 % and 100 % of training."""
    return np.unique(np.round(np.array([0, 0.1, 0.25, 0.5, 1.0]) * (n_ckpt - 1)).astype(int))


def map_headers(ds) -> list:
    """The column headers of one task's rows in :func:`draw_maps`: the steps of its own
    checkpoints."""
    return [f"step {int(ds.step.values[k])}" for k in map_moments(ds.sizes["checkpoint"])]


def draw_maps(cnn, methods=("SGD", "ℓ2-SAM best"), seed_index=0, example=0) -> Figure:
    """Grad-CAM maps of one test image at five moments of training, SGD and SAM side by side;
    each task's first row carries the steps of that task's checkpoints."""
    names = list(cnn)
    rows = [(name, m) for name in names for m in methods]
    n_cols = max(len(map_moments(cnn[n].sizes["checkpoint"])) for n in names) + 1
    fig = new_figure(FULL_WIDTH, 1.05 * len(rows) + 0.4)
    axes = fig.subplots(len(rows), n_cols, squeeze=False)
    for r, (name, method) in enumerate(rows):
        ds = cnn[name]
        axes[r, 0].imshow(ds.attr_images.values[example], cmap="gray")
        axes[r, 0].contour(
            ds.attr_minor.values[example], levels=[0.5], colors="#E69F00", linewidths=0.8
        )
        if ds.attr_major.values[example].sum() < 16:  # a patch, not a pixel set
            axes[r, 0].contour(
                ds.attr_major.values[example], levels=[0.5], colors="#56B4E9", linewidths=0.8
            )
        axes[r, 0].set_ylabel(f"{name}\n{method}", fontsize=SMALL_SIZE)
        headers = map_headers(ds)
        for c, k in enumerate(map_moments(ds.sizes["checkpoint"]), start=1):
            cam = ds.cam_maps.sel({"method": method}).values[seed_index, k, example]
            axes[r, c].imshow(cam, cmap="magma")
            if r == 0 or rows[r - 1][0] != name:  # each task's own checkpoints
                axes[r, c].set_title(headers[c - 1], fontsize=SMALL_SIZE)
    axes[0, 0].set_title("input", fontsize=SMALL_SIZE)
    fig.suptitle(
        "Grad-CAM of one test image over training, each map on its own scale\n"
        "(input: orange = boundary of the minor pixels, blue = major patch)",
        fontsize=SMALL_SIZE,
    )
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


def maps_figure(cnn, out: Path, **kwargs) -> list[Path]:
    return save_figure(styled(draw_maps, cnn, **kwargs), out, "cnn_gradcam_maps")


COMPARATORS = ("SGD", "ℓ2-SAM ρ̄", "ℓ2-SAM best")


def draw_flatness(cnn) -> Figure:
    """LE-SAM minus each comparator (paired by seed): tr H and λ_max at each fixed loss level;
    below, each method's test accuracy minus SGD's over training."""
    names = list(cnn)
    fig = new_figure(FULL_WIDTH, 3.8)
    axes = fig.subplots(2, len(names), squeeze=False)
    for c, name in enumerate(names):
        ds = cnn[name]
        le = ds.sel({"method": "LE-SAM"})
        ax = axes[0, c]
        levels = ds.level.values
        for i, comp in enumerate(COMPARATORS):
            other = ds.sel({"method": comp})
            for k, (var, marker) in enumerate((("flat_trace", "o"), ("flat_top", "s"))):
                diff = le[var].values - other[var].values  # (level, seed)
                m, h = mean_ci(diff, axis=1)
                x = np.arange(len(levels)) + 0.12 * (i - 1) + 0.04 * (2 * k - 1)
                ax.errorbar(x, m, yerr=h, fmt=marker, color=_color(comp), ms=3.5, capsize=2,
                            mfc="white" if k else _color(comp),
                            label=f"− {_label(comp)}" if k == 0 else None)  # fmt: skip
        ax.axhline(0, **REFERENCE)
        ax.set_xticks(range(len(levels)), [f"loss {lv:g}" for lv in levels])
        ax.set_title(f"{name}: LE-SAM minus comparator\n" + r"tr$\,H$ (filled), "
                     r"$\lambda_{\max}$ (open)")  # fmt: skip
        ax = axes[1, c]
        step = ds.step.values
        base = ds.test_acc.sel({"method": "SGD"}).values
        for method in ("LE-SAM", "LE-SAM capped", "ℓ2-SAM ρ̄", "ℓ2-SAM best"):
            gap = ds.test_acc.sel({"method": method}).values - base
            _band(ax, step, 100 * gap, _color(method), _label(method))
        ax.axhline(0, **REFERENCE)
        ax.set_xlabel("step")
        ax.set_ylabel("test accuracy − SGD's\n(points, paired by seed)")
    axes[0, 0].legend(loc="best", handlelength=1.0)
    axes[1, 0].legend(loc="best", handlelength=1.2)
    panel_labels(list(axes.flat))
    return fig


def flatness_figure(cnn, out: Path) -> list[Path]:
    return save_figure(styled(draw_flatness, cnn), out, "cnn_flatness")


def draw_small(small) -> Figure:
    """CNNs from a small start, paired differences from SGD (same seed) over training: the
    training loss and the Grad-CAM and saliency minor shares of ℓ2-SAM at each radius; and
    the test accuracy of the networks trained on the minor feature alone."""
    from ._cnnrun import minor_only, sweep_name

    names = list(small)
    fig = new_figure(FULL_WIDTH, 1.6 * len(names) + 0.8)
    axes = fig.subplots(len(names), 4, squeeze=False)
    shades = (OKABE_ITO["sky"], METHOD_COLORS["ℓ2-SAM"], OKABE_ITO["purple"])
    for r, name in enumerate(names):
        ds = small[name]
        step = ds.step.values
        base = ds.sel({"method": "SGD"})
        for i, rho in enumerate(ds.attrs["radii"]):
            sel = ds.sel({"method": sweep_name(rho)})
            for c, var in enumerate(("train_loss", "cam_minor_share", "sal_minor_share")):
                _band(axes[r, c], step, sel[var].values - base[var].values,
                      shades[i % len(shades)], rf"$\rho={rho:g}$")  # fmt: skip
        judged = sweep_name(ds.attrs["judged"])
        gap = (ds.sel({"method": minor_only(judged)}).test_acc.values
               - ds.sel({"method": minor_only("SGD")}).test_acc.values)  # fmt: skip
        _band(axes[r, 3], step, 100 * gap, METHOD_COLORS["ℓ2-SAM"],
              rf"$\rho={ds.attrs['judged']:g}$")  # fmt: skip
        axes[r, 0].set_ylabel(f"{name}\ntraining loss − SGD's")
        axes[r, 1].set_ylabel("Grad-CAM minor\nshare − SGD's")
        axes[r, 2].set_ylabel("saliency minor\nshare − SGD's")
        axes[r, 3].set_ylabel("trained on minor only:\ntest acc. − SGD's (pts)")
        for c in range(4):
            axes[r, c].axhline(0, **REFERENCE)
            axes[r, c].set_xlabel("step")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), handlelength=1.2)
    panel_labels(list(axes.flat))
    return fig


def small_figure(small, out: Path) -> list[Path]:
    return save_figure(styled(draw_small, small), out, "cnn_small_start")
