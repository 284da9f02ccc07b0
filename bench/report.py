"""Print measured Rows as a text table, or render them as one Markdown table.

In: Rows whose `results` are filled (see harness.run_row). Out: lines of text.
"""
from __future__ import annotations

from harness import CONTENDERS, TITLES, Result, Row, ratios


def fmt_time(value: float, unit: str) -> str:
    """Milliseconds as a short number in `unit` ("ms" or "us")."""
    v = value * 1e3 if unit == "us" else value
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def fmt_ratio(r: float | None) -> str:
    """'0.41x', or '-' when the ratio is unknown."""
    return "-" if r is None else f"{r:.2f}x"


def gflops(row: Row, value: Result) -> str:
    """'123.4 GFLOP/s' for rows that count flops, else ''."""
    if row.flops is None or not isinstance(value, float):
        return ""
    return f"{row.flops / (value * 1e-3) / 1e9:.1f} GFLOP/s"


def text_lines(row: Row) -> list[str]:
    """One block of the printed table: the label, then a line per contender."""
    lines = [_titled(row)]
    for name, value in row.results.items():
        if isinstance(value, str):
            lines.append(f"  {name:13s} {value}")
            continue
        vs_numpy, vs_best = ratios(row, name)
        cell = f"{fmt_time(value, row.unit)} {row.unit}"
        lines.append(f"  {name:13s} {cell:>13s} {fmt_ratio(vs_numpy):>9s} "
                     f"{fmt_ratio(vs_best):>9s}  {gflops(row, value)}".rstrip())
    return lines


def column_header() -> str:
    """The column titles printed above the first row."""
    return f"  {'contender':13s} {'time':>13s} {'vs NumPy':>9s} {'vs best':>9s}"


def _md_cell(row: Row, name: str, fastest: float | None) -> str:
    value = row.results.get(name)
    if value is None:
        return "-"
    if isinstance(value, str):
        return value.replace("|", "/")
    text = fmt_time(value, row.unit) + ("" if row.unit == "ms" else " us")
    if value == fastest:
        text = f"**{text}**"
    if name not in ("numpy", "torch", "jax"):
        vs_numpy, vs_best = ratios(row, name)
        text += f" ({fmt_ratio(vs_numpy)} / {fmt_ratio(vs_best)})"
    rate = gflops(row, value)
    return text + (f", {rate.replace(' GFLOP/s', ' GF/s')}" if rate else "")


def markdown(rows: list[Row]) -> list[str]:
    """A Markdown table: a column per contender seen, fgrad cells with both ratios."""
    names = [c for c in CONTENDERS if any(c in row.results for row in rows)]
    lines = ["| workload | " + " | ".join(TITLES[n] for n in names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for row in rows:
        times = [v for v in row.results.values() if isinstance(v, float)]
        fastest = min(times) if times else None
        cells = [_md_cell(row, n, fastest) for n in names]
        lines.append(f"| {_titled(row)} | " + " | ".join(cells) + " |")
    return lines


def _titled(row: Row) -> str:
    return f"{row.label} [{row.note}]" if row.note else row.label
