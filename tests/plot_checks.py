"""What a reader would stumble over in a figure: labels overlapping, labels or legends on the data, labels off
the canvas. The plot tests run every figure through it."""

from __future__ import annotations

import itertools


def _drawn(axis) -> list:
    """Return the major ticks of `axis` inside its view (those matplotlib draws)."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * (hi - lo)
    return [t for t in axis.get_major_ticks() if t.get_loc() is not None and lo - slack <= t.get_loc() <= hi + slack]


def _boxes(fig, renderer):
    """Yield (what, kind, window extent, owning axes or None) for every label and legend drawn on `fig`."""
    for i, ax in enumerate(fig.axes):
        ticks = [
            (f"{a} tick", t)
            for a, axis in (("x", ax.xaxis), ("y", ax.yaxis))
            if axis.get_visible()
            for tick in _drawn(axis)
            for t in (tick.label1, tick.label2)
        ]
        named = [("x label", ax.xaxis.label), ("y label", ax.yaxis.label), ("title", ax.title)]
        for kind, t in ticks + named + [("text", t) for t in ax.texts]:
            if t.get_visible() and t.get_text().strip():
                yield f"axes {i} {kind} {t.get_text()!r}", kind, t.get_window_extent(renderer), ax
        if ax.get_legend():
            yield f"axes {i} legend", "legend", ax.get_legend().get_window_extent(renderer), ax
    for t in fig.texts:
        yield f"figure text {t.get_text()!r}", "figure text", t.get_window_extent(renderer), None
    for j, legend in enumerate(fig.legends):
        yield f"figure legend {j}", "legend", legend.get_window_extent(renderer), None


def _hit(a, b) -> bool:
    """Return whether two window extents overlap by more than a pixel each way."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1


def overlaps(fig) -> list[str]:
    """Return what a reader would stumble over: labels overlapping, labels or legends on data, off canvas."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = list(_boxes(fig, renderer))
    canvas = fig.bbox
    found = [
        f"{what} is off the canvas"
        for what, _, box, _ in boxes
        if box.x0 < -1 or box.y0 < -1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1
    ]
    found += [f"{wa} overlaps {wb}" for (wa, _, a, _), (wb, _, b, _) in itertools.combinations(boxes, 2) if _hit(a, b)]
    for what, kind, box, owner in boxes:
        for i, ax in enumerate(fig.axes):
            own = owner is not None and owner.bbox.bounds == ax.bbox.bounds  # its axes, or a twin of it
            if not (own and kind == "text") and _hit(box, ax.patch.get_window_extent(renderer)):
                found.append(f"{what} lies on the data of axes {i}")
    return found
