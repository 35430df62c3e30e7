"""Inline SVG plots: no JavaScript, no network, so a report opens from disk anywhere.

A plot is a list of series over a shared x axis (seconds since the run started) with fault
bands drawn behind them and the run's phases (setup, id ageing, workload, drain, final reads)
marked along its foot, so that a flat stretch reads as what it was. A band shows only its key (the fault's number in the report's fault
table, the legend); its full label is the band's tooltip. Keys are set in rows so that they
never overprint: a key with no free place in any row is left out (the table still lists it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float | None]]  # None: no value that second (a gap, not a zero)


@dataclass
class Band:
    start: float
    end: float
    label: str
    key: str = ""


@dataclass
class Phase:
    start: float
    end: float
    label: str


KEY_ROWS = 5
KEY_CHAR_PX = 7.0  # the width of one character of a key at the plot's font size, with margin


def place_keys(bands: list[Band], px) -> list[int | None]:
    """The row of each band's key, first fit left to right; None where no row has room."""
    row_ends: list[float] = [float("-inf")] * KEY_ROWS
    rows: list[int | None] = [None] * len(bands)
    for i in sorted(range(len(bands)), key=lambda i: bands[i].start):
        x0 = px(bands[i].start) + 2
        width = KEY_CHAR_PX * len(bands[i].key) + 3
        for row in range(KEY_ROWS):
            if x0 >= row_ends[row]:
                rows[i], row_ends[row] = row, x0 + width
                break
    return rows


@dataclass
class Plot:
    title: str
    y_label: str
    series: list[Series]
    bands: list[Band] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    width: int = 900
    height: int = 220


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return value


def render_svg(plot: Plot) -> str:
    left, right, top, bottom = 60, 20, 28, 34
    w, h = plot.width - left - right, plot.height - top - bottom
    xs = [x for s in plot.series for x, _ in s.points] + [b.end for b in plot.bands]
    xs += [p.start for p in plot.phases]
    ys = [y for s in plot.series for _, y in s.points if y is not None]
    x_max = max(xs) if xs else 1.0
    x_max = x_max if x_max > 0 else 1.0
    y_max = _nice_max(max(ys) if ys else 1.0)

    def px(x: float) -> float:
        return left + w * x / x_max

    def py(y: float) -> float:
        return top + h - h * y / y_max

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" role="img" width="{plot.width}" '
           f'height="{plot.height}" viewBox="0 0 {plot.width} {plot.height}" aria-label="{escape(plot.title)}">',
           f'<text x="{left}" y="16" class="title">{escape(plot.title)}</text>']
    for band, row in zip(plot.bands, place_keys(plot.bands, px)):
        x0, x1 = px(band.start), px(max(band.end, band.start + x_max / 400))
        key = (f'<text x="{x0 + 2:.1f}" y="{top + 10 + 11 * row}">{escape(band.key)}</text>'
               if row is not None and band.key else "")
        out.append(f'<g class="fault"><rect x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{h}">'
                   f'<title>{escape(band.key)} {escape(band.label)} ({band.start:.0f}s-{band.end:.0f}s)</title></rect>'
                   f'{key}</g>')
    for phase in plot.phases:
        # a boundary line and the phase's name at the foot; a name wider than its phase is left
        # to the tooltip
        x0, x1 = px(phase.start), px(min(phase.end, x_max))
        name = (f'<text x="{x0 + 3:.1f}" y="{top + h - 4}">{escape(phase.label)}</text>'
                if x1 - x0 >= KEY_CHAR_PX * len(phase.label) + 6 else "")
        out.append(f'<g class="phase"><line x1="{x0:.1f}" x2="{x0:.1f}" y1="{top}" y2="{top + h}"/>'
                   f'<rect x="{x0:.1f}" y="{top + h - 14}" width="{max(x1 - x0, 0):.1f}" height="14">'
                   f'<title>{escape(phase.label)} ({phase.start:.0f}s-{phase.end:.0f}s)</title></rect>{name}</g>')
    for k in range(5):
        y = y_max * k / 4
        out.append(f'<line class="grid" x1="{left}" x2="{left + w}" y1="{py(y):.1f}" y2="{py(y):.1f}"/>'
                   f'<text class="tick" x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for k in range(6):
        x = x_max * k / 5
        out.append(f'<text class="tick" x="{px(x):.1f}" y="{top + h + 16}" text-anchor="middle">{x:.0f}s</text>')
    out.append(f'<text class="tick" x="14" y="{top + h / 2:.0f}" transform="rotate(-90 14 {top + h / 2:.0f})" '
               f'text-anchor="middle">{escape(plot.y_label)}</text>')
    for i, s in enumerate(plot.series):
        color = PALETTE[i % len(PALETTE)]
        segments, current = [], []
        for x, y in s.points:
            if y is None:
                if current:
                    segments.append(current)
                current = []
            else:
                current.append(f"{px(x):.1f},{py(y):.1f}")
        if current:
            segments.append(current)
        for seg in segments:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(seg)}"/>')
        out.append(f'<text x="{left + w - 150 * (len(plot.series) - i)}" y="16" fill="{color}" class="legend">'
                   f'&#9632; {escape(s.label)}</text>')
    out.append("</svg>")
    return "".join(out)
