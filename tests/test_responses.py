"""Pre-rendered JSON spliced into wire models: the answer is the text the model itself would give,
and a model whose field order no longer allows the splice fails here, not in front of a client."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from api.common import Page, Record
from api.deployments import AgentStatus, EnvironmentRef, Heatmap, HeatmapAxisItem, StatusMatrix
from api.notifications import LogEntry
from service.http.responses import splice_json

LOG_ENTRY = LogEntry(
    id="log_1",
    delivery_id="dlv_1",
    event_id="evt_1",
    event_type="agent.error",
    channel_id="chn_1",
    channel_name="Hook",
    channel_kind="webhook",
    attempt=1,
    status="failed",
    response_status=500,
    created_at=datetime(2026, 11, 25, 10, 15, tzinfo=UTC),
)
ENVIRONMENT = EnvironmentRef(id="env_1", name="production")

# Every model a route answers by splicing, whole, with the fields it splices in.
SPLICED: list[tuple[BaseModel, tuple[str, ...]]] = [
    (
        Page[LogEntry](items=[LOG_ENTRY, LOG_ENTRY], limit=50, offset=0, total=2, next_cursor="c"),
        ("items",),
    ),
    (
        StatusMatrix(
            stale_after_days=14,
            environments=[ENVIRONMENT],
            items=[
                AgentStatus.model_validate(
                    {
                        "stableKey": "triage",
                        "agentName": "Triage",
                        "environmentId": "env_1",
                        "state": "in_sync",
                    }
                )
            ],
            counts={"in_sync": 1},
            limit=50,
            offset=0,
            total_agents=1,
        ),
        ("items",),
    ),
    (
        Heatmap(
            group_by="environment",
            bucket="day",
            metric="failure_rate",
            start=date(2026, 11, 1),
            end=date(2026, 11, 2),
            rows=[HeatmapAxisItem(id="env_1", name="production")],
            columns=[HeatmapAxisItem(id="2026-11-01", name="2026-11-01")],
            counts=[[4]],
            failures=[[1]],
            values=[[0.25]],
        ),
        ("counts", "failures", "values"),
    ),
]


def rendered_fields(whole: BaseModel, names: tuple[str, ...]) -> dict[str, str]:
    """Each spliced field's JSON text, as the database or a row cache would render it."""
    wire = json.loads(whole.model_dump_json())
    keys = {name: type(whole).model_fields[name].alias or name for name in names}
    return {name: json.dumps(wire[keys[name]], separators=(",", ":")) for name in names}


def frame_of(whole: BaseModel, names: tuple[str, ...]) -> BaseModel:
    return whole.model_copy(update={name: [] for name in names})


@pytest.mark.parametrize(("whole", "names"), SPLICED, ids=[type(whole).__name__ for whole, _ in SPLICED])
def test_a_splice_gives_the_models_own_json(whole: BaseModel, names: tuple[str, ...]) -> None:
    spliced = splice_json(frame_of(whole, names), **rendered_fields(whole, names))
    assert spliced == whole.model_dump_json()


class Middle(Record):
    first: int
    spliced: list[int]
    last: int


class Lead(Record):
    spliced: list[int]
    other_field: str


def test_a_field_in_the_middle_cannot_be_spliced() -> None:
    with pytest.raises(ValueError, match="neither its first nor its last"):
        splice_json(Middle(first=1, spliced=[], last=2), spliced="[1]")


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="no fields"):
        splice_json(Lead(spliced=[], other_field="x"), missing="[]")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"spliced": "[1,2]"}, '{"spliced":[1,2],"otherField":"x"}'),
        ({"spliced": "[]", "other_field": '"y"'}, '{"spliced":[],"otherField":"y"}'),
    ],
)
def test_keys_are_the_wire_names_in_model_order(fields: dict[str, Any], expected: str) -> None:
    assert splice_json(Lead(spliced=[], other_field="x"), **fields) == expected
