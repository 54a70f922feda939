"""Figures of the experiments, in the figures' visual language (:mod:`figures._style`).

Drawn at the printed width (5.5 in) and saved at exactly that size (constrained layout, no
tight bounding box), every text at the style's 8 pt (7 pt only for plain text without sub- or
superscripts), methods in the Okabe–Ito colours of :data:`figures._style.METHOD_COLORS`
(ℓ2-SAM at LE-SAM's mean radius ρ̄ in the palette's sky blue). Bands are 95 % Student-t
intervals over seeds. Each ``draw_*`` returns the figure; each ``*_figure`` saves it as PDF and
PNG and returns the paths.
"""

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from figures.internal import (
    FULL_WIDTH,
    METHOD_COLORS,
    OKABE_ITO,
    SMALL_SIZE,
    new_figure,
    save_figure,
    styled,
)

from ._stats import mean_ci

COLORS = {
    "GD": METHOD_COLORS["GD"],
    "SGD": METHOD_COLORS["GD"],
    "ℓ2-SAM": METHOD_COLORS["ℓ2-SAM"],
    "ℓ2-SAM ρmax": METHOD_COLORS["ℓ2-SAM"],
    "ℓ∞-SAM": METHOD_COLORS["ℓ∞-SAM"],
    "LE-SAM": METHOD_COLORS["LE-SAM"],
    "ℓ2-SAM ρ̄": OKABE_ITO["sky"],
}


def _band(ax, x, values, color, label, ls="-"):
    m, h = mean_ci(values)
    ax.plot(x, m, color=color, label=label, ls=ls)
    if np.any(np.isfinite(h)):
        ax.fill_between(x, m - h, m + h, color=color, alpha=0.2, lw=0)


def draw_diagonal(ds) -> Figure:
    """Low-intensity share of |β| and j†'s intensity quantile against time, per depth."""
    depths = ds.depth.values
    fig = new_figure(FULL_WIDTH, 3.4)
    axes = fig.subplots(2, len(depths), sharex=True, squeeze=False)
    t = ds.time.values
    keep = t > 0
    for b, depth in enumerate(depths):
        for method in ds.method.values:
            sel = ds.sel({"method": method, "depth": depth})
            _band(axes[0, b], t[keep], sel.low_share.values[:, keep], COLORS[method], method)
            _band(axes[1, b], t[keep], sel.dominant_rank.values[:, keep], COLORS[method], method)
        axes[0, b].set_title(f"L = {depth}")
        axes[1, b].set_xscale("log")
        axes[1, b].set_xlabel("time t = kη")
        axes[0, b].set_ylim(0, 1)
        axes[1, b].set_ylim(-0.05, 1.05)
    axes[0, 0].set_ylabel("share of |β| on\nlow-intensity pixels")
    axes[1, 0].set_ylabel("intensity quantile\nof j†")
    axes[0, 0].legend(loc="upper left", ncol=1, handlelength=1.2)
    return fig


def diagonal_figure(ds, out: Path) -> list[Path]:
    return save_figure(styled(draw_diagonal, ds), out, "diagonal_shares")


def draw_shares(cnn) -> Figure:
    """Minor share of Grad-CAM and saliency and accuracy with only the minor feature."""
    names = list(cnn)
    fig = new_figure(FULL_WIDTH, 1.7 * len(names) + 0.4)
    axes = fig.subplots(len(names), 3, squeeze=False)
    for r, name in enumerate(names):
        ds = cnn[name]
        step = ds.step.values
        for method in ds.method.values:
            sel = ds.sel({"method": method})
            for c, var in enumerate(("cam_minor_share", "sal_minor_share", "acc_only_minor")):
                _band(axes[r, c], step, sel[var].values, COLORS[method], method)
        minor = "weak patch" if name == "patches" else "low-intensity pixels"
        axes[r, 0].set_ylabel(f"{name}\nGrad-CAM share on\n{minor}")
        axes[r, 1].set_ylabel(f"saliency share on\n{minor}")
        axes[r, 2].set_ylabel("test accuracy,\nonly minor kept")
        for c in range(3):
            axes[r, c].set_xlabel("step")
    axes[0, 0].legend(loc="best", handlelength=1.2)
    return fig


def shares_figure(cnn, out: Path) -> list[Path]:
    return save_figure(styled(draw_shares, cnn), out, "cnn_minor_share")


def draw_maps(cnn, methods=("SGD", "ℓ2-SAM ρmax"), seed_index=0, example=0) -> Figure:
    """Grad-CAM maps of one test image at five moments of training, SGD and SAM side by side."""
    names = list(cnn)
    n_ckpt = cnn[names[0]].sizes["checkpoint"]
    moments = np.unique(np.round(np.array([0, 0.1, 0.25, 0.5, 1.0]) * (n_ckpt - 1)).astype(int))
    rows = [(name, m) for name in names for m in methods]
    fig = new_figure(FULL_WIDTH, 0.95 * len(rows) + 0.3)
    axes = fig.subplots(len(rows), len(moments) + 1, squeeze=False)
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
        for c, k in enumerate(moments, start=1):
            cam = ds.cam_maps.sel({"method": method}).values[seed_index, k, example]
            axes[r, c].imshow(cam, cmap="magma")
            if r == 0:
                axes[r, c].set_title(f"step {int(ds.step.values[k])}", fontsize=SMALL_SIZE)
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


def draw_flatness(cnn) -> Figure:
    """Hessian trace and top eigenvalue at equal training loss; test-accuracy gap to SGD."""
    names = list(cnn)
    fig = new_figure(FULL_WIDTH, 3.6)
    axes = fig.subplots(2, len(names), squeeze=False)
    for c, name in enumerate(names):
        ds = cnn[name]
        methods = list(ds.method.values)
        x = np.arange(len(methods))
        ax = axes[0, c]
        for k, (var, marker, off) in enumerate(
            (("flat_trace", "o", -0.15), ("flat_top", "s", 0.15))
        ):
            m, h = mean_ci(ds[var].values, axis=1)
            for i, method in enumerate(methods):
                ax.errorbar(
                    x[i] + off,
                    m[i],
                    yerr=h[i],
                    fmt=marker,
                    color=COLORS[method],
                    ms=4,
                    capsize=2,
                    mfc="white" if k else COLORS[method],
                )
        ax.set_xticks(x, [s.replace(" ", "\n") for s in methods], fontsize=SMALL_SIZE)
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.set_title(
            f"{name}: at training loss {ds.attrs['equal_loss']:.3g}\ntr H (filled), λ_max (open)"
        )
        ax = axes[1, c]
        step = ds.step.values
        base = ds.test_acc.sel({"method": "SGD"}).values
        for method in methods[1:]:
            gap = ds.test_acc.sel({"method": method}).values - base
            _band(ax, step, 100 * gap, COLORS[method], method)
        ax.axhline(0, color="#888888", lw=0.6)
        ax.set_xlabel("step")
        ax.set_ylabel("test accuracy − SGD's\n(points, paired by seed)")
    axes[1, 0].legend(loc="best", handlelength=1.2)
    return fig


def flatness_figure(cnn, out: Path) -> list[Path]:
    return save_figure(styled(draw_flatness, cnn), out, "cnn_flatness")
