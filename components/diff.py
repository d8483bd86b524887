"""A side-by-side, line-by-line diff of two texts, as HTML for `st.html`."""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass

_REMOVED = "background:rgba(255,80,80,0.18)"
_ADDED = "background:rgba(60,200,100,0.20)"
_CELL = "padding:1px 8px;vertical-align:top;white-space:pre-wrap;word-break:break-word;font-family:monospace;font-size:13px"
_NUMBER = "padding:1px 6px;color:#888;text-align:right;font-family:monospace;font-size:12px;user-select:none"


@dataclass(frozen=True)
class DiffStats:
    added: int
    removed: int

    @property
    def identical(self) -> bool:
        return self.added == 0 and self.removed == 0


def diff_stats(left: str, right: str) -> DiffStats:
    added = removed = 0
    matcher = difflib.SequenceMatcher(a=left.splitlines(), b=right.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return DiffStats(added=added, removed=removed)


def side_by_side(left: str, right: str, *, left_title: str, right_title: str) -> str:
    """Rows of (old line, new line): removed lines red on the left, added ones green on the right."""
    left_lines, right_lines = left.splitlines(), right.splitlines()
    rows = []
    matcher = difflib.SequenceMatcher(a=left_lines, b=right_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        span = max(i2 - i1, j2 - j1)
        for offset in range(span):
            old = i1 + offset if i1 + offset < i2 else None
            new = j1 + offset if j1 + offset < j2 else None
            changed = tag != "equal"
            rows.append(
                _cell(old, left_lines, _REMOVED if changed else "")
                + _cell(new, right_lines, _ADDED if changed else "")
            )
    header = (
        f'<tr><th colspan="2" style="{_CELL};text-align:left">{html.escape(left_title)}</th>'
        f'<th colspan="2" style="{_CELL};text-align:left">{html.escape(right_title)}</th></tr>'
    )
    body = "".join(f"<tr>{row}</tr>" for row in rows)
    return (
        '<table style="width:100%;border-collapse:collapse;table-layout:fixed">'
        '<colgroup><col style="width:3em"><col><col style="width:3em"><col></colgroup>'
        f"{header}{body}</table>"
    )


def _cell(index: int | None, lines: list[str], style: str) -> str:
    if index is None:
        return f'<td style="{_NUMBER}"></td><td style="{_CELL}"></td>'
    text = html.escape(lines[index]) or "&nbsp;"
    return f'<td style="{_NUMBER};{style}">{index + 1}</td><td style="{_CELL};{style}">{text}</td>'
