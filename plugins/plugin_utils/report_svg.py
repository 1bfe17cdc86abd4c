# -*- coding: utf-8 -*-
# Copyright: tokenfactory.spark contributors
# Apache License 2.0 (see LICENSE)
"""Inline SVG charts (no JavaScript, no external files) for the validation HTML report."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 460, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 24, 40
COLORS = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#c53030", "#718096")


def _fmt(value):
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _nice_max(value):
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return value


def _frame(title, y_max, unit, body, x_labels=(), x_caption=None):
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="15" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for i in range(5):
        y = TOP + plot_h - plot_h * i / 4
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e2e8f0"/>')
        out.append(
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{_fmt(y_max * i / 4)}</text>'
        )
    out.append(
        f'<text x="12" y="{TOP + plot_h / 2:.0f}" font-size="10" transform="rotate(-90 12 {TOP + plot_h / 2:.0f})" '
        f'text-anchor="middle">{escape(unit)}</text>'
    )
    for x, label in x_labels:
        out.append(
            f'<text x="{x:.1f}" y="{TOP + plot_h + 14}" font-size="10" text-anchor="middle">{escape(label)}</text>'
        )
    if x_caption:
        out.append(
            f'<text x="{LEFT + plot_w}" y="{HEIGHT - 6}" font-size="10" text-anchor="end">{escape(x_caption)}</text>'
        )
    out.extend(body)
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#4a5568"/>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#4a5568"/>')
    out.append("</svg>")
    return "\n".join(out)


def empty(title, reason):
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="60" role="img" aria-label="{escape(title)}">'
        f'<text x="{LEFT}" y="15" font-size="13" font-weight="bold">{escape(title)}</text>'
        f'<text x="{LEFT}" y="40" font-size="11" fill="#718096">{escape(reason)}</text></svg>'
    )


def bar_chart(title, labels, values, unit, threshold=None):
    """Vertical bars (e.g. p50/p90/p95/p99) with an optional dashed threshold line."""
    known = [v for v in values if v is not None]
    if not known:
        return empty(title, "no data")
    y_max = _nice_max(max(known + ([threshold] if threshold else [])))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(values)
    body, x_labels = [], []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = LEFT + slot * i + slot * 0.2
        x_labels.append((LEFT + slot * (i + 0.5), label))
        if value is None:
            continue
        h = plot_h * value / y_max
        color = COLORS[4] if threshold is not None and value >= threshold else COLORS[0]
        body.append(
            f'<rect x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{slot * 0.6:.1f}" height="{h:.1f}" fill="{color}">'
            f"<title>{escape(label)}: {_fmt(value)} {escape(unit)}</title></rect>"
        )
        body.append(
            f'<text x="{x + slot * 0.3:.1f}" y="{TOP + plot_h - h - 3:.1f}" font-size="10" '
            f'text-anchor="middle">{_fmt(value)}</text>'
        )
    if threshold is not None:
        y = TOP + plot_h - plot_h * threshold / y_max
        body.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS[4]}" '
            f'stroke-dasharray="5,3"><title>SLO {_fmt(threshold)} {escape(unit)}</title></line>'
        )
    return _frame(title, y_max, unit, body, x_labels)


def histogram_chart(title, edges, counts, unit, y_unit):
    if not counts:
        return empty(title, "no data")
    y_max = _nice_max(max(counts))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    width = plot_w / len(counts)
    body = []
    for i, count in enumerate(counts):
        h = plot_h * count / y_max
        body.append(
            f'<rect x="{LEFT + i * width:.1f}" y="{TOP + plot_h - h:.1f}" width="{max(width - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="{COLORS[2]}"><title>{_fmt(edges[i])}-{_fmt(edges[i + 1])} {escape(unit)}: '
            f"{count}</title></rect>"
        )
    x_labels = [
        (LEFT, _fmt(edges[0])),
        (LEFT + plot_w / 2, _fmt((edges[0] + edges[-1]) / 2)),
        (LEFT + plot_w, _fmt(edges[-1])),
    ]
    return _frame(title, y_max, y_unit, body, x_labels, x_caption=unit)


def line_chart(title, xs, series, unit, y_max=None, x_unit="s"):
    """series: [(name, values)], values aligned with xs (None = gap)."""
    points = [v for _name, values in series for v in values if v is not None]
    if not xs or not points:
        return empty(title, "no data")
    y_max = y_max or _nice_max(max(points))
    x_max = max(xs) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    body = []
    for n, (name, values) in enumerate(series):
        coords = [
            f"{LEFT + plot_w * x / x_max:.1f},{TOP + plot_h - plot_h * min(v, y_max) / y_max:.1f}"
            for x, v in zip(xs, values, strict=False)
            if v is not None
        ]
        color = COLORS[n % len(COLORS)]
        body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(coords)}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        body.append(
            f'<text x="{LEFT + 8 + 110 * n}" y="{HEIGHT - 6}" font-size="10" fill="{color}">'
            f"&#9632; {escape(name)}</text>"
        )
    x_labels = [(LEFT, "0"), (LEFT + plot_w / 2, _fmt(x_max / 2)), (LEFT + plot_w, f"{_fmt(x_max)} {x_unit}")]
    return _frame(title, y_max, unit, body, x_labels)


def hbar_chart(title, labels, values, unit):
    """Horizontal bars (rollout time per role/phase)."""
    if not values:
        return empty(title, "no data")
    row = 18
    height = TOP + row * len(values) + 20
    v_max = max(values) or 1.0
    label_w = 170
    plot_w = WIDTH + 120 - label_w - RIGHT - 50
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH + 120}" height="{height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="4" y="15" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = TOP + row * i
        w = plot_w * value / v_max
        out.append(f'<text x="{label_w - 6}" y="{y + 12}" font-size="11" text-anchor="end">{escape(label[:28])}</text>')
        out.append(
            f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="{COLORS[3]}">'
            f"<title>{escape(label)}: {_fmt(value)} {escape(unit)}</title></rect>"
        )
        out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" font-size="10">{_fmt(value)} {escape(unit)}</text>')
    out.append("</svg>")
    return "\n".join(out)
