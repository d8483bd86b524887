"""Plotly figures shared by pages: the service's sparse heatmaps, the agent status matrix and the
audit trail's changes per day.

Colours carry meaning and are the same everywhere: green is healthy (in sync, complete), amber
needs a look (drifted, partial, changed), red failed, blue-grey is waiting (stale, running).
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative

from api.audit import AuditStats
from api.deployments import AGENT_STATES, AgentStatus, Heatmap, HeatmapAxisItem, StatusMatrix

GREEN = "#2f9e62"
AMBER = "#f0a23b"
RED = "#d9534f"
BLUE_GREY = "#7d97bd"
LIGHT = "#e8ebf0"
GREY = "#a0a7b4"

STATE_COLOURS = {
    "in_sync": GREEN,
    "drifted": AMBER,
    "stale": BLUE_GREY,
    "error": RED,
    "not_deployed": LIGHT,
}
STATE_LABELS = {
    "in_sync": "In sync",
    "drifted": "Drifted",
    "stale": "Stale",
    "error": "Error",
    "not_deployed": "Not deployed",
}
STATUS_COLOURS = {
    "complete": GREEN,
    "partial": AMBER,
    "error": RED,
    "running": BLUE_GREY,
    "pending": GREY,
    "paused": GREY,
    "aborted": LIGHT,
    "rolled_back": RED,
    "added": GREEN,
    "changed": AMBER,
    "removed": RED,
    "unchanged": LIGHT,
}
# Sequential scales per heatmap metric: volume in blues; failures and failure rates from green (none
# failed) through amber to red. Each starts at a visible tint, so that a cell with jobs never looks
# like a cell without any (drawn in NO_JOBS).
METRIC_SCALES = {
    "count": [[0, "#c3d8ee"], [0.3, "#8fb8e0"], [0.7, "#3f7fc0"], [1, "#163f77"]],
    "failures": [[0, "#cdebd8"], [0.25, "#f4d58d"], [0.6, "#e0674f"], [1, "#8e1b12"]],
    "failure_rate": [[0, "#cdebd8"], [0.15, "#f4d58d"], [0.5, "#e0674f"], [1, "#8e1b12"]],
}
METRIC_LABELS = {"count": "Deployments", "failures": "Failures", "failure_rate": "Failure rate"}
NO_JOBS = "#eceff3"
TOO_FEW = "#c9ced8"
# A failure rate of fewer jobs than this is not coloured: one failed job of one is not "100 %".
MIN_RATE_SAMPLE = 5
_CHART_MARGIN = {"l": 10, "r": 10, "t": 10, "b": 10}
# Every chart's `config`: no mode bar of zoom and download buttons over small dashboard charts.
PLOT_CONFIG = {"displayModeBar": False}


def tint(colour: str, alpha: float = 0.28) -> str:
    """A see-through version of a `#rrggbb` colour, for table cells that must stay readable."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def heatmap_figure(heatmap: Heatmap, *, height: int | None = None, clickable: bool = False) -> go.Figure:
    """The grid as the service sends it, rows and columns in display order, with each row's total
    at its right. Cells without jobs are grey; a failure rate of fewer than MIN_RATE_SAMPLE jobs is
    a darker grey, not a colour. With `clickable`, each cell with jobs can be selected (a click):
    its row and column ids come back as the selected point's `customdata`."""
    dates = heatmap.group_by == "environment"
    rate = heatmap.metric == "failure_rate"
    x = [column.id if dates else column.name for column in heatmap.columns]
    y = [row.name for row in heatmap.rows]
    cells = [
        [_Cell(jobs, failed, value) for jobs, failed, value in zip(*grids, strict=True)]
        for grids in zip(heatmap.counts, heatmap.failures, heatmap.values, strict=True)
    ]
    hovers = [
        [
            _heat_hover(row.name, _column_name(column, heatmap), cell)
            for column, cell in zip(heatmap.columns, line, strict=True)
        ]
        for row, line in zip(heatmap.rows, cells, strict=True)
    ]
    figure = go.Figure()
    _flat_layer(figure, x, y, [[cell.jobs == 0 for cell in line] for line in cells], NO_JOBS, hovers)
    if rate:
        _flat_layer(
            figure,
            x,
            y,
            [[0 < cell.jobs < MIN_RATE_SAMPLE for cell in line] for line in cells],
            TOO_FEW,
            hovers,
        )
    figure.add_trace(_value_layer(heatmap, x, y, cells, hovers))
    if clickable:
        _click_targets(figure, heatmap, x, y, cells, hovers)
    _row_totals(figure, y, cells, heatmap.metric)
    figure.update_layout(
        height=height or 90 + 34 * max(len(heatmap.rows), 3),
        margin={"l": 10, "r": 110 if rate else 70, "t": 34, "b": 10},
        plot_bgcolor="rgba(0,0,0,0)",
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis=_time_axis(heatmap) if dates else {"type": "category", "showgrid": False},
        showlegend=False,
        hovermode="closest",
        hoverdistance=8,
        # A click selects the cell's point and nothing else: no box, no dimming of the others.
        dragmode=False,
        clickmode="event+select",
    )
    return figure


def _value_layer(
    heatmap: Heatmap, x: list[str], y: list[str], cells: list[list[_Cell]], hovers: list[list[str]]
) -> go.Heatmap:
    """The cells coloured by their value on the metric's scale, over the flat layers."""
    rate = heatmap.metric == "failure_rate"
    z = [[cell.value if cell.coloured(rate) else None for cell in line] for line in cells]
    return go.Heatmap(
        z=z,
        x=x,
        y=y,
        customdata=hovers,
        colorscale=METRIC_SCALES[heatmap.metric],
        zmin=0,
        zmax=1 if rate else None,
        xgap=2,
        ygap=2,
        colorbar={
            "orientation": "h",
            "thickness": 10,
            "len": 0.3,
            "x": 1,
            "xanchor": "right",
            "y": 1.01,
            "yanchor": "bottom",
            "tickformat": ".0%" if rate else "d",
            **({} if rate else _whole_ticks(z)),
            "outlinewidth": 0,
        },
        hovertemplate="%{customdata}<extra></extra>",
        hoverongaps=False,
    )


def _whole_ticks(z: list[list[float | None]]) -> dict[str, Any]:
    """Ticks of a count's colour scale on whole numbers only, at most five of them: left to itself,
    a scale up to 2 ticks at 0.5 steps, which read "1 1 2" once rounded."""
    highest = max((value for line in z for value in line if value is not None), default=1)
    return {"tick0": 0, "dtick": max(1, math.ceil(highest / 4))}


def _row_totals(figure: go.Figure, y: list[str], cells: list[list[_Cell]], metric: str) -> None:
    """Each row's total at its right, under a `Total` heading."""
    for row, line in zip(y, cells, strict=True):
        figure.add_annotation(
            x=1.005,
            xref="paper",
            xanchor="left",
            y=row,
            yref="y",
            text=_row_total(line, metric),
            showarrow=False,
            font={"size": 12},
        )
    figure.add_annotation(
        x=1.005,
        xref="paper",
        xanchor="left",
        y=1,
        yref="paper",
        yanchor="bottom",
        text="<b>Total</b>",
        showarrow=False,
        font={"size": 12},
    )


def _time_axis(heatmap: Heatmap) -> dict[str, Any]:
    """A date axis that ends where the columns do, half a bucket either side of their centres."""
    half = timedelta(days=3.5 if heatmap.bucket == "week" else 0.5)
    first, last = (date.fromisoformat(heatmap.columns[i].id) for i in (0, -1))
    edges = [datetime.combine(first, time.min) - half, datetime.combine(last, time.min) + half]
    return {"type": "date", "showgrid": False, "range": [edge.isoformat() for edge in edges]}


class _Cell:
    __slots__ = ("failed", "jobs", "value")

    def __init__(self, jobs: int, failed: int, value: float | None) -> None:
        self.jobs, self.failed, self.value = jobs, failed, value

    def coloured(self, rate: bool) -> bool:
        return self.jobs >= (MIN_RATE_SAMPLE if rate else 1)


def _column_name(column: HeatmapAxisItem, heatmap: Heatmap) -> str:
    if heatmap.group_by != "environment":
        return column.name
    day = date.fromisoformat(column.id)
    return f"week of {day:%a %d %b %Y}" if heatmap.bucket == "week" else f"{day:%a %d %b %Y}"


def _heat_hover(row: str, column: str, cell: _Cell) -> str:
    head = f"<b>{row}</b> · {column}<br>"
    if cell.jobs == 0:
        return head + "no jobs"
    jobs = f"{cell.jobs} job{'s' if cell.jobs != 1 else ''}, {cell.failed} failed ({cell.failed / cell.jobs:.0%})"
    if cell.jobs < MIN_RATE_SAMPLE:
        jobs += f"<br>too few jobs to rate (fewer than {MIN_RATE_SAMPLE})"
    return head + jobs


def _row_total(line: list[_Cell], metric: str) -> str:
    """What a row adds up to: its jobs, its failed jobs, or its failure rate and how many jobs."""
    jobs = sum(cell.jobs for cell in line)
    failed = sum(cell.failed for cell in line)
    if metric == "count":
        return f"{jobs:,}"
    if metric == "failures":
        return f"{failed:,}"
    return f"{failed / jobs:.0%} of {jobs:,}" if jobs else "no jobs"


def _flat_layer(
    figure: go.Figure,
    x: list[str],
    y: list[str],
    where: list[list[bool]],
    colour: str,
    hovers: list[list[str]],
) -> None:
    """Cells of one flat colour (no jobs, too few jobs), under the coloured ones."""
    figure.add_trace(
        go.Heatmap(
            z=[[1 if flag else None for flag in line] for line in where],
            x=x,
            y=y,
            customdata=hovers,
            colorscale=[[0, colour], [1, colour]],
            showscale=False,
            xgap=2,
            ygap=2,
            hovertemplate="%{customdata}<extra></extra>",
            hoverongaps=False,
        )
    )


def _click_targets(
    figure: go.Figure,
    heatmap: Heatmap,
    x: list[str],
    y: list[str],
    cells: list[list[_Cell]],
    hovers: list[list[str]],
) -> None:
    """An invisible point on each cell with jobs: heatmap cells cannot be selected, points can."""
    points = [
        (x[j], y[i], [row.id, column.id], hovers[i][j])
        for i, (row, line) in enumerate(zip(heatmap.rows, cells, strict=True))
        for j, (column, cell) in enumerate(zip(heatmap.columns, line, strict=True))
        if cell.jobs
    ]
    size = max(6, min(28, 900 // max(len(x), 1)))
    invisible = {"marker": {"opacity": 0}}
    figure.add_trace(
        go.Scatter(
            x=[point[0] for point in points],
            y=[point[1] for point in points],
            customdata=[point[2] for point in points],
            text=[point[3] + "<br><i>Click to open these jobs</i>" for point in points],
            mode="markers",
            marker={"symbol": "square", "size": size, "color": "rgba(0,0,0,0)"},
            selected=invisible,
            unselected=invisible,
            hovertemplate="%{text}<extra></extra>",
        )
    )


def status_matrix_figure(matrix: StatusMatrix) -> go.Figure:
    """Agents by environments, each cell coloured by state and labelled with the running version."""
    environments = matrix.environments
    agents = list(dict.fromkeys(item.stable_key for item in matrix.items))
    names = {item.stable_key: item.agent_name for item in matrix.items}
    cells = {(item.stable_key, item.environment_id): item for item in matrix.items}
    state_index = {state: i for i, state in enumerate(AGENT_STATES)}
    z = [[_state_value(cells.get((a, e.id)), state_index) for e in environments] for a in agents]
    labels = [[_cell_label(cells.get((a, e.id))) for e in environments] for a in agents]
    hovers = [[_cell_hover(cells.get((a, e.id)), names[a], e.name) for e in environments] for a in agents]
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=[environment.name for environment in environments],
            y=agents,
            text=labels,
            texttemplate="%{text}",
            customdata=hovers,
            hovertemplate="%{customdata}<extra></extra>",
            colorscale=_discrete_scale([STATE_COLOURS[state] for state in AGENT_STATES]),
            zmin=-0.5,
            zmax=len(AGENT_STATES) - 0.5,
            showscale=False,
            xgap=3,
            ygap=3,
            hoverongaps=False,
        )
    )
    # A legend of the states, from invisible markers in each state's colour.
    for state in AGENT_STATES:
        figure.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=STATE_LABELS[state],
                marker={"size": 12, "symbol": "square", "color": STATE_COLOURS[state]},
            )
        )
    figure.update_layout(
        height=110 + 30 * max(len(agents), 3),
        margin=_CHART_MARGIN,
        plot_bgcolor="rgba(0,0,0,0)",
        yaxis={"autorange": "reversed", "type": "category", "showgrid": False},
        xaxis={"type": "category", "side": "top", "showgrid": False},
        legend={"orientation": "h", "y": -0.02, "yanchor": "top", "x": 0},
    )
    return figure


def _discrete_scale(colours: list[str]) -> list[list[Any]]:
    """A colourscale of flat bands, one per colour, so each whole number maps to one colour."""
    scale: list[list[Any]] = []
    for i, colour in enumerate(colours):
        scale += [[i / len(colours), colour], [(i + 1) / len(colours), colour]]
    return scale


def _state_value(item: AgentStatus | None, state_index: dict[str, int]) -> int | None:
    return None if item is None else state_index[item.state]


def _cell_label(item: AgentStatus | None) -> str:
    if item is None or item.deployed_version is None:
        return ""
    return f"v{item.deployed_version}"


def _cell_hover(item: AgentStatus | None, agent_name: str, environment: str) -> str:
    if item is None:
        return ""
    lines = [f"<b>{agent_name}</b> in {environment}: {STATE_LABELS[item.state]}"]
    if item.deployed_version is not None:
        lines.append(f"running v{item.deployed_version}, newest v{item.latest_version}")
    elif item.latest_version is not None:
        lines.append(f"newest v{item.latest_version}, never deployed here")
    lines += [
        f"newer {change.field}: {change.before} → {change.after}"
        for change in item.newer
        if change.field != "version"
    ]
    lines += [f"drift: {change.field} ({change.kind})" for change in item.drift[:8]]
    if len(item.drift) > 8:
        lines.append(f"… and {len(item.drift) - 8} more")
    if item.error:
        lines.append(f"error: {item.error[:120]}")
    return "<br>".join(lines)


# Each action of a chart gets its own colour: the actions drawn, in order, take the palette's colours
# in turn (a hash of the name gave two actions of one chart the same colour). Past the palette's
# length, which few periods reach, colours come round again.
ACTION_PALETTE = [
    *qualitative.Plotly,
    *qualitative.Dark24,
]


_DAY_MS = 86_400_000


def changes_per_day_figure(stats: AuditStats, *, height: int = 320) -> go.Figure:
    """Changes per UTC day, stacked by action (the audit trail's counts, as the service made them)."""
    actions = sorted({item.action for item in stats.per_day})
    figure = go.Figure(
        [
            go.Bar(
                x=[item.day for item in stats.per_day if item.action == action],
                y=[item.count for item in stats.per_day if item.action == action],
                name=action,
                marker_color=ACTION_PALETTE[number % len(ACTION_PALETTE)],
                # A day wide whatever the period: alone, a day's bar would be drawn a hairline.
                width=_DAY_MS * 0.8,
                hovertemplate=f"%{{x|%a %d %b}}: %{{y}} {action}<extra></extra>",
            )
            for number, action in enumerate(actions)
        ]
    )
    figure.update_layout(
        title={"text": "Changes per day, by action", "font": {"size": 14}},
        barmode="stack",
        height=height,
        margin={"l": 10, "r": 10, "t": 56, "b": 10},
        # Beside the plot, never over the axis's dates, however many actions the period holds.
        legend={"orientation": "v", "y": 1, "yanchor": "top", "x": 1.01, "xanchor": "left"},
        xaxis={
            "type": "date",
            "showgrid": False,
            # The whole period, quiet days too, half a day of margin either side of the bars.
            "range": [
                datetime.combine(stats.start.date(), time.min) - timedelta(hours=12),
                datetime.combine(stats.end.date(), time.min) + timedelta(hours=12),
            ],
        },
        yaxis={"title": None, "rangemode": "tozero"},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure
