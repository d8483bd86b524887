"""What the commands of every resource share: a list's paging (`--limit`, `--cursor`, `--all`) and
how one record, a page of them, or a change to one is printed."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from rich.markup import escape

from api.cli.context import fail, json_option
from api.cli.output import EXIT_USAGE, out, print_json, shown, table, wire
from api.common import MAX_PAGE_SIZE, Page

Command = TypeVar("Command", bound=Callable[..., Any])

# One page of a list from a cursor (None: the first page) and a page size.
Fetch = Callable[[str | None, int], Page[Any]]


def paged(default_limit: int) -> Callable[[Command], Command]:
    """`--limit`, `--cursor`, `--all` and `--json`, passed as `limit`, `cursor`, `every`, `as_json`."""

    def add(command: Command) -> Command:
        options = [
            click.option(
                "--limit",
                type=click.IntRange(1, MAX_PAGE_SIZE),
                default=default_limit,
                show_default=True,
                help="Items per page.",
            ),
            click.option("--cursor", metavar="C", help="Start at this page: the next cursor a list printed."),
            click.option(
                "--all", "every", is_flag=True, help="Follow every page and print them as one list."
            ),
            json_option,
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return add


list_options = paged(default_limit=50)


def by_offset(list_page: Callable[..., Page[Any]]) -> Fetch:
    """A list the service pages by offset: its cursor is where the next page starts."""
    return lambda cursor, limit: list_page(offset=_offset(cursor), limit=limit)


def by_cursor(list_page: Callable[..., Page[Any]]) -> Fetch:
    """A list the service pages by cursor: its own `nextCursor`."""
    return lambda cursor, limit: list_page(cursor=cursor, limit=limit)


def whole(list_all: Callable[[], Page[Any]]) -> Fetch:
    """A list the service answers whole (a few keys, members, channels): paged here alike, every
    page cut from one answer (asked for once, however many pages `--all` prints)."""
    answer = functools.cache(list_all)

    def fetch(cursor: str | None, limit: int) -> Page[Any]:
        items, start = answer().items, _offset(cursor)
        return Page[Any](items=items[start : start + limit], limit=limit, offset=start, total=len(items))

    return fetch


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        fail(f"--cursor takes the next cursor a list printed (got '{cursor}')", EXIT_USAGE)
    return int(cursor)


def next_cursor(page: Page[Any]) -> str | None:
    """Where the page after this one starts, or None when this is the last."""
    if page.next_cursor:
        return page.next_cursor
    if page.offset is None or not page.items:
        return None
    end = page.offset + len(page.items)
    more = end < page.total if page.total is not None else len(page.items) == page.limit
    return str(end) if more else None


def collect(fetch: Fetch, *, cursor: str | None, limit: int, every: bool) -> Page[Any]:
    """One page with its next cursor, or with `every` all pages from `cursor` on, as one."""
    page = fetch(cursor, limit)
    following = next_cursor(page)
    if not every:
        return page.model_copy(update={"next_cursor": following})
    items = list(page.items)
    while following:
        page = fetch(following, limit)
        items += page.items
        following = next_cursor(page)
    return Page[Any](items=items, limit=limit, offset=_offset(cursor) if page.offset is not None else None)


def print_list(
    fetch: Fetch,
    columns: Sequence[str],
    *,
    cursor: str | None,
    limit: int,
    every: bool,
    as_json: bool,
) -> None:
    """A page (or every page) as the API's JSON, or as a table of `columns` (wire names) followed
    by the cursor of the next page."""
    page = collect(fetch, cursor=cursor, limit=limit, every=every)
    if as_json:
        print_json(page)
        return
    rows = table(*[column.upper() for column in columns])
    for item in page.items:
        record = wire(item)
        rows.add_row(*[escape(shown(record.get(column))) for column in columns])
    out().print(rows)
    print_more(page)


def print_more(page: Page[Any]) -> None:
    """Under a table: how to get the next page, when there is one."""
    if page.next_cursor:
        out().print(f"[dim]More: --cursor {escape(page.next_cursor)} (or --all)[/]", soft_wrap=True)


def print_record(record: BaseModel, as_json: bool) -> None:
    """One record: the API's JSON, or each of its fields on a line."""
    if as_json:
        print_json(record)
        return
    facts = table("", "")
    facts.show_header = False
    for name, value in wire(record).items():
        facts.add_row(f"[bold]{escape(name)}[/]", escape(shown(value)))
    out().print(facts)


def print_done(record: BaseModel, as_json: bool, summary: str) -> None:
    """What a create, update or delete did: the record as JSON, or one line saying so."""
    if as_json:
        print_json(record)
    else:
        out().print(escape(summary), soft_wrap=True)
