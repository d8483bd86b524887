"""The console's pages do one job each: no page file grows past MAX_PAGE_LINES (a page with tabs
keeps their bodies in components/<page>/), and no function of pages/ or components/ reaches
MAX_FUNCTION_LINES (a longer one is split into its filters, tables, figures and sections)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.processes import ROOT

MAX_PAGE_LINES = 400
MAX_FUNCTION_LINES = 60


def console_modules() -> list[Path]:
    return sorted([*(ROOT / "pages").rglob("*.py"), *(ROOT / "components").rglob("*.py")])


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """Each function of the file (nested ones too) as `file:line name` and its length in lines."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_no_page_file_is_longer_than_a_page_should_be() -> None:
    pages = sorted((ROOT / "pages").glob("*.py"))
    lengths = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in pages}
    assert len(lengths) > 10
    assert {page: lines for page, lines in lengths.items() if lines > MAX_PAGE_LINES} == {}


def test_every_console_function_is_shorter_than_the_limit() -> None:
    lengths = [length for path in console_modules() for length in function_lengths(path)]
    assert len(lengths) > 100
    assert [(where, lines) for where, lines in lengths if lines >= MAX_FUNCTION_LINES] == []
