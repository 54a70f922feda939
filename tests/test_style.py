"""Figures at their printed size: every saved page is 5.5 in or 2.7 in wide, no text prints below
7 pt nor any sub- or superscript below 5.5 pt, and no text leaves the page; and one meaning per
line style across the set (figures._style: solid a curve, dashed α_direct, dotted a reference).

The figures are the quick ones (tests/conftest.py makes each once per test run); the text is
checked on each figure drawn again from its saved data, glyph by glyph through matplotlib's own
mathtext parser, and the page width is read from the saved PDF's MediaBox. The checks are shown
to fail on a figure that breaks each rule.
"""

import re
from unittest import mock

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser
from matplotlib.text import Text

import figures
from figures import _style
from tests.helpers import published_data

PRINTED = (_style.FULL_WIDTH, _style.COLUMN_WIDTH)
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]")
_PARSER = MathTextParser("path")


def pdf_page_size(path):
    """(width, height) in inches of every page of a PDF, from its /MediaBox entries."""
    boxes = _MEDIABOX.findall(path.read_bytes())
    assert boxes, f"{path}: no /MediaBox"
    return [
        ((float(x1) - float(x0)) / 72, (float(y1) - float(y0)) / 72) for x0, y0, x1, y1 in boxes
    ]


def _segments(text: str):
    """(is_math, piece) of one line of text: mathtext between unescaped dollar signs."""
    parts = re.split(r"(?<!\\)\$", text)
    if len(parts) % 2 == 0:  # an odd number of dollars: matplotlib draws it as plain text
        return [(False, text)]
    return [(k % 2 == 1, part) for k, part in enumerate(parts) if part]


def glyph_sizes(artist: Text) -> tuple[float, float]:
    """(smallest text size, smallest glyph size) in points that ``artist`` prints, at the size
    the figure is saved (its sub- and superscripts as mathtext sets them)."""
    size = artist.get_fontsize()
    smallest = size
    if artist.get_usetex():
        raise AssertionError(f"{artist.get_text()!r}: usetex text is not checked")
    prop = artist.get_fontproperties()
    for line in artist.get_text().split("\n"):
        for is_math, piece in _segments(line):
            if is_math:
                parsed = _PARSER.parse(f"${piece}$", dpi=72, prop=prop)
                smallest = min([smallest, *(g[1] for g in parsed.glyphs)])
    return size, smallest


def drawn_texts(fig: Figure) -> list[Text]:
    """The texts that drawing ``fig`` prints: visible, not empty (tick labels outside the view
    are never drawn)."""
    drawn, draw = [], Text.draw

    def record(self, renderer):
        drawn.append(self)
        return draw(self, renderer)

    with mock.patch.object(Text, "draw", record):
        fig.draw_without_rendering()
    return [t for t in drawn if t.get_visible() and t.get_text().strip()]


def text_problems(fig: Figure) -> list[str]:
    """Each text ``fig`` prints that is below 7 pt, has a sub- or superscript below 5.5 pt, or
    reaches outside the page."""
    page = fig.bbox
    problems = []
    for t in drawn_texts(fig):
        size, smallest = glyph_sizes(t)
        label = repr(t.get_text()[:40])
        if size < _style.MIN_TEXT - 1e-9:
            problems.append(f"{label}: {size:g} pt text")
        if smallest < _style.MIN_SCRIPT - 1e-9:
            problems.append(f"{label}: {smallest:.2f} pt sub- or superscript")
        box = t.get_window_extent()
        if (
            box.x0 < page.x0 - 0.5
            or box.y0 < page.y0 - 0.5
            or box.x1 > page.x1 + 0.5
            or box.y1 > page.y1 + 0.5
        ):
            problems.append(f"{label}: outside the page")
    return problems


_NO_LINE = ("None", "none", "", " ")
#: The gid that a line of each non-solid style must carry: its one meaning (figures._style).
_STYLE_ROLE = {"--": "alpha_direct", ":": "reference"}


def line_style_problems(fig: Figure) -> list[str]:
    """Each line of ``fig`` whose style is not its meaning: a dashed line that is not α_direct,
    a dotted one that is not a reference, any other pattern (dash-dot, a custom dash), a solid
    line that says it is α_direct or a reference; a legend entry drawn dashed whose label is not
    α_direct's. A line's meaning is its ``gid`` (figures._style); a legend entry's, its text."""
    problems = []
    legends = fig.findobj(Legend)  # the figure's, its subfigures' and its axes'
    in_legend = {id(h) for lg in legends for h in lg.legend_handles}
    for line in fig.findobj(Line2D):
        ls = line.get_linestyle()
        if id(line) in in_legend or not line.get_visible() or ls in _NO_LINE:
            continue
        # a custom dash pattern reports "--": tell it from the plain dashed line by its pattern
        custom = (
            ls == "--"
            and line._unscaled_dash_pattern != Line2D([], [], ls="--")._unscaled_dash_pattern
        )
        name = f"line {line.get_label()!r} ({ls}, gid {line.get_gid()!r})"
        if ls == "-":
            if line.get_gid() in _STYLE_ROLE.values():
                problems.append(f"{name}: solid, but its gid says otherwise")
        elif ls not in _STYLE_ROLE or custom:
            problems.append(f"{name}: a style with no meaning")
        elif line.get_gid() != _STYLE_ROLE[ls]:
            problems.append(f"{name}: {ls} means {_STYLE_ROLE[ls]} only")
    for coll in fig.findobj(LineCollection):
        if any(dashes is not None for _, dashes in coll.get_linestyle()):
            problems.append(f"line collection {coll.get_label()!r}: not solid")
    for lg in legends:
        for handle, text in zip(lg.legend_handles, lg.get_texts(), strict=True):
            if isinstance(handle, Line2D) and handle.get_linestyle() not in ("-", *_NO_LINE):
                ls = handle.get_linestyle()
                if ls not in _STYLE_ROLE:
                    problems.append(f"legend {text.get_text()!r}: a style with no meaning")
                elif ls == "--" and "direct" not in text.get_text():
                    problems.append(f"legend {text.get_text()!r}: dashed means α_direct only")
    return problems


def _redrawn(cache, name):
    ctx = figures.Context(out=cache, cache=cache, quick=True)
    return _style.styled(figures.FIGURES[name].draw, figures.load_data(ctx, name))


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_saved_pages_are_printed_widths(quick_figures, name):
    out, _ = quick_figures
    ((width, height),) = pdf_page_size(out / f"{name}.pdf")
    assert any(abs(width - w) <= 0.01 for w in PRINTED), f"{name}.pdf is {width:.3f} in wide"
    png = matplotlib.image.imread(out / f"{name}.png")
    dpi = _style.STYLE["savefig.dpi"]
    assert png.shape[1] == pytest.approx(width * dpi, abs=1), "the PNG is the PDF's page"
    assert png.shape[0] == pytest.approx(height * dpi, abs=1)


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_text_is_large_enough_and_on_the_page(quick_figures, name):
    fig = _redrawn(quick_figures[1], name)
    assert any(abs(fig.get_figwidth() - w) < 1e-9 for w in PRINTED)
    assert text_problems(fig) == []


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_one_meaning_per_line_style(name):
    """Each figure of the gallery, drawn from its published data: solid a curve, dashed
    α_direct, dotted a reference, and nothing else (figures._style)."""
    fig = _style.styled(figures.FIGURES[name].draw, published_data(name))
    assert line_style_problems(fig) == []


def test_the_line_style_check_fails_on_each_misuse():
    """A dashed curve, a dotted curve, a dash-dot line, a dashed α_c and a dashed legend entry
    for a curve are each reported; α_c, α_direct, a reference and a solid curve are not."""
    fig = _style.styled(_style.new_figure, _style.FULL_WIDTH, 2.0)
    ax = fig.add_subplot()
    ax.axhline(0.3, **_style.ALPHA_C_LINE)
    ax.axhline(0.8, **_style.ALPHA_DIRECT_LINE, label="a")
    ax.axvline(1.0, **_style.SWITCH)
    ax.plot([0, 1], [0, 1], color="b", marker="o", **{k: _style.VARIANT[k] for k in ("mfc", "ms")})
    ax.legend(handles=[Line2D([], [], **_style.ALPHA_DIRECT_LINE, label=r"$\alpha_{\rm direct}$")])
    assert line_style_problems(fig) == []
    ax.plot([0, 1], [1, 0], color="b", ls="--", label="curve")
    ax.plot([0, 1], [1, 0], color="b", ls=":", label="dotted curve")
    ax.plot([0, 1], [1, 0], color="b", ls="-.", label="dash-dot")
    ax.axhline(0.5, **{**_style.ALPHA_DIRECT_LINE, "ls": (0, (3.0, 1.5))}, label="custom dash")
    ax.axhline(0.4, **{**_style.ALPHA_C_LINE, "ls": "--"}, label="dashed α_c")
    ax.legend(handles=[Line2D([], [], color="b", ls="--", label="GD")])
    problems = line_style_problems(fig)
    assert len(problems) == 6, problems
    named = ("'curve'", "'dotted curve'", "'dash-dot'", "'custom dash'", "'dashed α_c'", "legend")
    for text, problem in zip(named, problems, strict=True):
        assert text in problem, (text, problems)


def test_the_checks_fail_on_a_figure_that_breaks_the_rules(tmp_path):
    """A tight bounding box widens the page; 6.5 pt text, a 7 pt α_c (its subscript 4.9 pt) and
    a label outside the page are each reported."""
    fig = _style.styled(_style.new_figure, _style.FULL_WIDTH, 2.0)
    ax = fig.add_subplot()
    ax.set_ylabel(r"label $\alpha_c$", fontsize=8)
    fig.savefig(tmp_path / "tight.pdf", bbox_inches="tight", pad_inches=0.2)
    ((width, _),) = pdf_page_size(tmp_path / "tight.pdf")
    assert not any(abs(width - w) <= 0.01 for w in PRINTED)
    _style.save_figure(fig, tmp_path, "exact")
    assert pdf_page_size(tmp_path / "exact.pdf")[0][0] == pytest.approx(_style.FULL_WIDTH, abs=0.01)
    assert text_problems(fig) == []
    ax.text(0.5, 0.5, "small", fontsize=6.5)
    ax.text(0.2, 0.2, r"$\alpha_c$", fontsize=7)
    ax.text(1.5, 0.5, "off the page", transform=ax.transAxes)
    problems = text_problems(fig)
    assert len(problems) == 3, problems
    assert "6.5 pt text" in problems[0]
    assert "4.90 pt sub- or superscript" in problems[1]
    assert "outside the page" in problems[2]


def test_glyph_sizes_of_scripts():
    t = Text(text=r"loss $\alpha_{\rm direct}$ at $10^{-4}$, $x_{a_b}$", fontsize=8)
    size, smallest = glyph_sizes(t)
    assert size == 8 and smallest == pytest.approx(8 * 0.7**2)
    assert glyph_sizes(Text(text=r"cost \$5 and $\alpha$", fontsize=8)) == (8, 8)
    assert np.isclose(glyph_sizes(Text(text=r"$j^\dagger$", fontsize=8))[1], 5.6)


def test_new_figure_refuses_other_widths():
    with pytest.raises(ValueError, match="text width"):
        _style.new_figure(5.0, 2.0)


# --- the experiments' figures (experiments/_figures.py) -------------------------------------


def _experiment_data():
    """Small random stand-ins for the experiments' results, with the variables, dimensions and
    coordinates of experiments._diagonal.run_diagonal, experiments._regime_map and
    experiments._cnnrun (the figures read nothing else): (diagonal, long, regime map,
    {task: cnn})."""
    import xarray as xr

    import analysis
    from experiments._cnnrun import methods
    from experiments._diagonal import METHODS as DIAG_METHODS

    sweep = (0.1, 0.4)
    CNN_METHODS = methods(sweep)

    rng = np.random.default_rng(0)
    depths, seeds, steps = [1, 2, 3, 4], [0, 1, 2], np.arange(6) * 20
    dims = ("method", "depth", "seed", "step")
    shape = (len(DIAG_METHODS), len(depths), len(seeds), steps.size)
    diag = xr.Dataset(
        {k: (dims, rng.uniform(size=shape)) for k in ("low_share", "dominant_rank")},
        coords={"method": list(DIAG_METHODS), "depth": depths, "seed": seeds, "step": steps},
    )
    diag["time"] = ("step", steps * 0.1)
    long = diag.sel({"method": ["GD", "ℓ2-SAM"], "depth": [2, 3, 4]})
    names = np.array(analysis.REGIMES)
    rm = xr.Dataset(
        {
            "measured": (("pair", "depth", "method", "ratio"), rng.choice(names, (2, 4, 2, 8))),
            "theory": (("pair", "depth", "ratio"), rng.choice(names, (2, 4, 8))),
        },
        coords={
            "pair": ["4 vs 9", "3 vs 8"],
            "depth": depths,
            "method": ["GD", "ℓ2-SAM"],
            "ratio": np.geomspace(0.08, 0.8, 8),
        },  # fmt: skip
    )
    n_m, n_s, n_c, side = len(CNN_METHODS), len(seeds), 5, 8
    cnn = {}
    for name in ("patches", "digits"):
        per_run = ("method", "seed", "checkpoint")
        maps = ("example", "row", "col")
        image = np.zeros((1, side, side))
        image[0, 2:4, 2:4] = 1.0  # a 4-pixel patch, drawn as one
        values = {
            k: (per_run, rng.uniform(size=(n_m, n_s, n_c)))
            for k in ("cam_minor_share", "sal_minor_share", "acc_only_minor", "test_acc")
        }
        values |= {k: (("method", "level", "seed"), rng.uniform(1, 2, size=(n_m, 2, n_s)))
                   for k in ("flat_trace", "flat_top")}  # fmt: skip
        values |= {
            "cam_maps": (per_run + maps, rng.uniform(size=(n_m, n_s, n_c, 1, side, side))),
            "attr_images": (maps, rng.uniform(size=(1, side, side))),
            "attr_minor": (maps, image),
            "attr_major": (maps, image),
        }
        cnn[name] = xr.Dataset(
            values,
            coords={
                "method": list(CNN_METHODS),
                "level": [0.1, 0.03],
                "seed": seeds,
                "checkpoint": np.arange(n_c),
                "step": ("checkpoint", np.arange(n_c) * 100),
            },  # fmt: skip
            attrs={"sweep": list(sweep)},
        )
    return diag, long, rm, cnn


def test_experiment_figures_are_printed_width_with_large_enough_text(tmp_path):
    """Each figure of experiments/_figures.py, drawn as ``python -m experiments`` draws it:
    5.5 in wide on the saved page (PDF and PNG), no text under 7 pt nor script under 5.5 pt,
    nothing off the page, one meaning per line style."""
    from experiments import _figures

    diag, long, rm, cnn = _experiment_data()
    drawn = {
        "diagonal_shares": (_figures.draw_diagonal, _figures.diagonal_figure, (diag, long)),
        "regime_map_digits": (_figures.draw_regime_map, _figures.regime_figure, (rm,)),
        "cnn_minor_share": (_figures.draw_shares, _figures.shares_figure, (cnn,)),
        "cnn_gradcam_maps": (_figures.draw_maps, _figures.maps_figure, (cnn,)),
        "cnn_flatness": (_figures.draw_flatness, _figures.flatness_figure, (cnn,)),
    }
    for name, (draw, save, data) in drawn.items():
        fig = _style.styled(draw, *data)
        assert fig.get_figwidth() == _style.FULL_WIDTH, name
        assert text_problems(fig) == [], name
        assert line_style_problems(fig) == [], name
        pdf, png = save(*data, tmp_path)
        assert (pdf.name, png.name) == (f"{name}.pdf", f"{name}.png")
        ((width, height),) = pdf_page_size(pdf)
        assert width == pytest.approx(_style.FULL_WIDTH, abs=0.01), name
        dpi = _style.STYLE["savefig.dpi"]
        assert matplotlib.image.imread(png).shape[:2] == (round(height * dpi), round(width * dpi))
