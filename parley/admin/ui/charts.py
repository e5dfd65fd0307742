"""Bar charts drawn on the server as SVG (no script; colours come from presentation
attributes and the stylesheet, so the Content-Security-Policy needs no inline style)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 480, 200
LEFT, RIGHT, TOP, BOTTOM = 84, 8, 14, 30
CHAR_W = 10.0
"""The widest a tick's character is drawn (16 px digits and '$' are about 9.6 px wide):
the axis makes room for its longest label, so "$12,345.67" or "120,000,000" is never
cut off at the chart's left edge."""


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    """The category (a day), shown in the bar's tooltip and under the first and last bar."""
    value: float
    highlight: float = 0.0
    """A part of ``value`` drawn in the warning colour (errors among requests)."""


def bar_chart(
    bars: Sequence[Bar], *, title: str, fmt: Callable[[float], str] = lambda v: f"{v:,.0f}"
) -> Markup:
    """A responsive SVG bar chart with a top gridline labelled by the largest value and a
    baseline by zero, both in ``fmt`` (a money chart's axis reads "$0.00", not "0")."""
    top = max((bar.value for bar in bars), default=0.0)
    scale = top or 1.0
    high, low = fmt(top), fmt(0.0)
    left = max(LEFT, 12 + CHAR_W * max(len(high), len(low)))
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(len(bars), 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line class="grid" x1="{left}" y1="{TOP}" x2="{WIDTH - RIGHT}" y2="{TOP}"/>',
        f'<line class="axis" x1="{left}" y1="{TOP + plot_h}" '
        f'x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{TOP + 4}" text-anchor="end">{escape(high)}</text>',
        f'<text class="tick" x="{left - 6}" y="{TOP + plot_h}" text-anchor="end">'
        f"{escape(low)}</text>",
    ]
    for index, bar in enumerate(bars):
        x = left + index * step + step * 0.15
        width = step * 0.7
        height = plot_h * bar.value / scale
        tip = f"{bar.label}: {fmt(bar.value)}"
        if bar.highlight:
            tip += f" ({fmt(bar.highlight)} failed)"
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{TOP + plot_h - height:.1f}" '
            f'width="{width:.1f}" height="{height:.1f}"><title>{escape(tip)}</title></rect>'
        )
        if bar.highlight:
            part = plot_h * bar.highlight / scale
            parts.append(
                f'<rect class="bar-alert" x="{x:.1f}" y="{TOP + plot_h - part:.1f}" '
                f'width="{width:.1f}" height="{part:.1f}"/>'
            )
    if bars:
        parts.append(_label(left, bars[0].label, "start"))
        parts.append(_label(WIDTH - RIGHT, bars[-1].label, "end"))
    parts.append("</svg>")
    return Markup("".join(parts))


def _label(x: float, text: str, anchor: str) -> str:
    return (
        f'<text class="tick" x="{x}" y="{HEIGHT - 6}" text-anchor="{anchor}">{escape(text)}</text>'
    )


ROW, VALUE_W, RANK_W = 44, 120, 480
GLYPH_W = 12.0
"""A generous width of one character of a category's name at the chart's 16 px (most
are 8 to 10 px wide): a name is cut to what fits the chart's width at this, so it is
never clipped at its edge."""
MAX_LABEL = int((RANK_W - 8) // GLYPH_W)


def ranking_chart(
    rows: Sequence[Bar],
    *,
    title: str,
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}",
    limit: int = 10,
) -> Markup:
    """Horizontal bars, largest first (the top ``limit``, the rest summed as "others"):
    each category's name on a line of its own above its bar (shortened to the chart's
    width, whole in its tooltip), its value at the bar's right. Drawn in a viewBox, so it
    shrinks with the page and never overflows it."""
    ranked = sorted(rows, key=lambda bar: bar.value, reverse=True)
    if len(ranked) > limit:
        rest = sum(bar.value for bar in ranked[limit - 1 :])
        ranked = [*ranked[: limit - 1], Bar(f"{len(rows) - limit + 1} others", rest)]
    top = max((bar.value for bar in ranked), default=0.0) or 1.0
    height = max(1, len(ranked)) * ROW + 8
    plot_w = RANK_W - VALUE_W - 4
    parts = [
        f'<svg class="chart" viewBox="0 0 {RANK_W} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    for index, bar in enumerate(ranked):
        y = 4 + index * ROW
        width = plot_w * bar.value / top
        name = bar.label if len(bar.label) <= MAX_LABEL else bar.label[: MAX_LABEL - 1] + "…"
        tip = f"{bar.label}: {fmt(bar.value)}"
        parts.append(
            f'<text class="tick" x="4" y="{y + 16}"><title>{escape(tip)}</title>'
            f"{escape(name)}</text>"
            f'<rect class="bar" x="4" y="{y + 22}" width="{max(width, 1):.1f}" '
            f'height="{ROW - 28}"><title>{escape(tip)}</title></rect>'
            f'<text class="tick" x="{RANK_W - 4}" y="{y + 36}" text-anchor="end">'
            f"{escape(fmt(bar.value))}</text>"
        )
    if not ranked:
        parts.append(f'<text class="tick" x="8" y="20">{escape("Nothing in this range.")}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
