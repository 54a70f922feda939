"""Shared plumbing for the packages built on :mod:`figures` (:mod:`experiments`): not part of
the user API.

The figures' visual language (:mod:`figures._style`: the printed widths, the text sizes, the
method colours, and the functions that make, style and save a figure), in one clearly
internal home (the convention of ``equinox.internal``), so that the experiments draw as the
figures do without importing a private module; and the check of an output folder
(:func:`figures._common.folder_path`, :func:`figures._common.check_folder`), so that a folder
the experiments cannot make is refused as the figures refuse it.
"""

from ._common import check_folder as check_folder
from ._common import folder_path as folder_path
from ._common import regime_cmap as regime_cmap
from ._common import regime_handles as regime_handles
from ._style import FULL_WIDTH as FULL_WIDTH
from ._style import METHOD_COLORS as METHOD_COLORS
from ._style import OKABE_ITO as OKABE_ITO
from ._style import REFERENCE as REFERENCE
from ._style import SMALL_SIZE as SMALL_SIZE
from ._style import draw_classes as draw_classes
from ._style import new_figure as new_figure
from ._style import panel_labels as panel_labels
from ._style import save_figure as save_figure
from ._style import styled as styled

__all__ = sorted(name for name in dir() if not name.startswith("_"))
