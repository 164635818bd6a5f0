"""The figures' shared style: every figure shows the measurement beside the theory it tests:
measured values as markers with error bars of :data:`ERROR_BAR_SE` pooled standard errors (3:
the verdicts' rule, so a bar that misses the theory is a claim that fails)
(:func:`privgames.analysis.metrics.pooled`), the theory as dashed lines; legends sit outside
the axes so that they hide no line. Each game's figures are in its package
(``privgames.analysis.<game>.figures``): functions of a results frame returning a Figure.
"""


from __future__ import annotations

import os

import matplotlib

if "MPLBACKEND" not in os.environ:  # a notebook's kernel names its inline backend there: keep it
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

#: Standard errors an error bar spans: the report's verdicts judge at 3 SE, and so do the bars.
ERROR_BAR_SE = 3


def legend_outside(ax: plt.Axes, title: str | None = None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  fontsize="small", frameon=False)


def integer_ticks(ax: plt.Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


