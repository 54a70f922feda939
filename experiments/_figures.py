"""Figures of the experiments, 5.5 in wide (a paper's text width), PDF and PNG.

Saved at their exact size (constrained layout, no tight bounding box), text ≥ 7 pt,
Okabe–Ito colours. Bands are 95 % Student-t intervals over seeds.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ._stats import mean_ci  # noqa: E402

WIDTH = 5.5
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.1,
    "savefig.dpi": 200,
    "pdf.fonttype": 42,
}
COLORS = {
    "GD": "#000000",
    "SGD": "#000000",
    "ℓ2-SAM": "#0072B2",
    "ℓ2-SAM ρmax": "#0072B2",
    "ℓ∞-SAM": "#D55E00",
    "LE-SAM": "#009E73",
    "ℓ2-SAM ρ̄": "#56B4E9",
}


def _save(fig, out: Path, name: str):
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        path = out / f"{name}.{ext}"
        fig.savefig(path)
        paths.append(path)
    plt.close(fig)
    return paths


def _band(ax, x, values, color, label, ls="-"):
    m, h = mean_ci(values)
    ax.plot(x, m, color=color, label=label, ls=ls)
    if np.any(np.isfinite(h)):
        ax.fill_between(x, m - h, m + h, color=color, alpha=0.2, lw=0)


def diagonal_figure(ds, out: Path):
    """Low-intensity share of |β| and j†'s intensity quantile against time, per depth."""
    with plt.rc_context(STYLE):
        depths = ds.depth.values
        fig, axes = plt.subplots(
            2, len(depths), figsize=(WIDTH, 3.4), layout="constrained", sharex=True, squeeze=False
        )
        t = ds.time.values
        keep = t > 0
        for b, depth in enumerate(depths):
            for method in ds.method.values:
                sel = ds.sel({"method": method, "depth": depth})
                _band(axes[0, b], t[keep], sel.low_share.values[:, keep], COLORS[method], method)
                _band(
                    axes[1, b], t[keep], sel.dominant_rank.values[:, keep], COLORS[method], method
                )
            axes[0, b].set_title(f"L = {depth}")
            axes[1, b].set_xscale("log")
            axes[1, b].set_xlabel("time t = kη")
            axes[0, b].set_ylim(0, 1)
            axes[1, b].set_ylim(-0.05, 1.05)
        axes[0, 0].set_ylabel("share of |β| on\nlow-intensity pixels")
        axes[1, 0].set_ylabel("intensity quantile\nof j†")
        axes[0, 0].legend(loc="upper left", ncol=1, handlelength=1.2)
        return _save(fig, out, "diagonal_shares")


def shares_figure(cnn, out: Path):
    """Minor share of Grad-CAM and saliency and accuracy with only the minor feature."""
    with plt.rc_context(STYLE):
        names = list(cnn)
        fig, axes = plt.subplots(
            len(names),
            3,
            figsize=(WIDTH, 1.7 * len(names) + 0.4),
            layout="constrained",
            squeeze=False,
        )
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
        return _save(fig, out, "cnn_minor_share")


def maps_figure(cnn, out: Path, methods=("SGD", "ℓ2-SAM ρmax"), seed_index=0, example=0):
    """Grad-CAM maps of one test image at five moments of training, SGD and SAM side by side."""
    with plt.rc_context(STYLE):
        names = list(cnn)
        n_ckpt = cnn[names[0]].sizes["checkpoint"]
        moments = np.unique(np.round(np.array([0, 0.1, 0.25, 0.5, 1.0]) * (n_ckpt - 1)).astype(int))
        rows = [(name, m) for name in names for m in methods]
        fig, axes = plt.subplots(
            len(rows),
            len(moments) + 1,
            figsize=(WIDTH, 0.95 * len(rows) + 0.3),
            layout="constrained",
            squeeze=False,
        )
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
            axes[r, 0].set_ylabel(f"{name}\n{method}", fontsize=7)
            for c, k in enumerate(moments, start=1):
                cam = ds.cam_maps.sel({"method": method}).values[seed_index, k, example]
                axes[r, c].imshow(cam, cmap="magma")
                if r == 0:
                    axes[r, c].set_title(f"step {int(ds.step.values[k])}", fontsize=7)
        axes[0, 0].set_title("input", fontsize=7)
        fig.suptitle(
            "Grad-CAM of one test image over training, each map on its own scale\n"
            "(input: orange = boundary of the minor pixels, blue = major patch)",
            fontsize=7,
        )
        for ax in axes.flat:
            ax.set_xticks([])
            ax.set_yticks([])
        return _save(fig, out, "cnn_gradcam_maps")


def flatness_figure(cnn, out: Path):
    """Hessian trace and top eigenvalue at equal training loss; test-accuracy gap to SGD."""
    with plt.rc_context(STYLE):
        names = list(cnn)
        fig, axes = plt.subplots(
            2, len(names), figsize=(WIDTH, 3.6), layout="constrained", squeeze=False
        )
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
            ax.set_xticks(x, [s.replace(" ", "\n") for s in methods], fontsize=7)
            ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
            ax.set_title(
                f"{name}: at training loss {ds.attrs['equal_loss']:.3g}\n"
                "tr H (filled), λ_max (open)"
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
        return _save(fig, out, "cnn_flatness")
