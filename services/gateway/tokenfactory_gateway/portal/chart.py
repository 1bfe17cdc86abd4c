"""Inline SVG bar charts for the portal (rendered on the server: no JavaScript, no external files)."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 26, 44
COLORS = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#c53030", "#718096", "#d69e2e", "#319795")


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.4g}"
    return f"{value:.3g}"


def nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 1.0
    while magnitude * 10 < value:
        magnitude *= 10
    while magnitude > value:
        magnitude /= 10
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return value


def stacked_bars(title: str, buckets: list[str], series: dict[str, list[float]], unit: str) -> str:
    """One bar per bucket (x labels `buckets`), stacked by series name; `series[name][i]` belongs to bucket i."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(buckets))]
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
            f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>')  # fmt: skip
    if not buckets or not any(totals):
        return head + f'<text x="{LEFT}" y="60" font-size="12" fill="#718096">no usage in this range</text></svg>'
    y_max = nice_max(max(totals))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out = [head]
    for i in range(5):
        y = TOP + plot_h - plot_h * i / 4
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e2e8f0"/>'
                   f'<text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                   f"{_fmt(y_max * i / 4)}</text>")  # fmt: skip
    out.append(f'<text x="12" y="{TOP + plot_h / 2:.0f}" font-size="10" text-anchor="middle" '
               f'transform="rotate(-90 12 {TOP + plot_h / 2:.0f})">{escape(unit)}</text>')  # fmt: skip
    slot = plot_w / len(buckets)
    every = max(1, len(buckets) // 8)
    for i, bucket in enumerate(buckets):
        base = TOP + plot_h
        for n, (name, values) in enumerate(series.items()):
            if not values[i]:
                continue
            h = plot_h * values[i] / y_max
            base -= h
            out.append(f'<rect x="{LEFT + slot * i + slot * 0.15:.1f}" y="{base:.1f}" width="{slot * 0.7:.1f}" '
                       f'height="{h:.1f}" fill="{COLORS[n % len(COLORS)]}"><title>{escape(bucket)} '
                       f"{escape(name)}: {_fmt(values[i])} {escape(unit)}</title></rect>")  # fmt: skip
        if i % every == 0:
            out.append(f'<text x="{LEFT + slot * (i + 0.5):.1f}" y="{TOP + plot_h + 14}" font-size="10" '
                       f'text-anchor="middle">{escape(bucket)}</text>')  # fmt: skip
    for n, name in enumerate(series):
        out.append(f'<text x="{LEFT + 150 * n}" y="{HEIGHT - 6}" font-size="11" fill="{COLORS[n % len(COLORS)]}">'
                   f"&#9632; {escape(name)}</text>")  # fmt: skip
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#4a5568"/>')
    out.append("</svg>")
    return "".join(out)
