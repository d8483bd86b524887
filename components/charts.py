"""Plotly figures shared by pages: the service's sparse heatmaps and the agent status matrix.

Colours carry meaning and are the same everywhere: green is healthy (in sync, complete), amber
needs a look (drifted, partial, changed), red failed, blue-grey is waiting (stale, running).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from api.deployments import AGENT_STATES, AgentStatus, Heatmap, StatusMatrix

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
    "added": GREEN,
    "changed": AMBER,
    "removed": RED,
    "unchanged": LIGHT,
}
# Sequential scales per heatmap metric: volume in blues, failures in reds.
METRIC_SCALES = {
    "count": [[0, "#f4f7fb"], [0.25, "#c6dbef"], [0.6, "#4f8fc9"], [1, "#163f77"]],
    "failures": [[0, "#fbf4f2"], [0.3, "#f6c3b5"], [0.7, "#e0674f"], [1, "#8e1b12"]],
    "failure_rate": [[0, "#fbf4f2"], [0.3, "#f6c3b5"], [0.7, "#e0674f"], [1, "#8e1b12"]],
}
METRIC_LABELS = {"count": "Deployments", "failures": "Failures", "failure_rate": "Failure rate"}
_CHART_MARGIN = {"l": 10, "r": 10, "t": 10, "b": 10}


def tint(colour: str, alpha: float = 0.28) -> str:
    """A see-through version of a `#rrggbb` colour, for table cells that must stay readable."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def heatmap_figure(heatmap: Heatmap, *, height: int | None = None) -> go.Figure:
    """The grid as the service sends it, rows and columns in display order; a failure rate without
    jobs stays blank."""
    dates = heatmap.group_by == "environment"
    details = [
        list(zip(job_row, failed_row, strict=True))
        for job_row, failed_row in zip(heatmap.counts, heatmap.failures, strict=True)
    ]
    rate = heatmap.metric == "failure_rate"
    figure = go.Figure(
        go.Heatmap(
            z=heatmap.values,
            # Bucket columns are ISO dates: a date axis labels them by month and week.
            x=[column.id if dates else column.name for column in heatmap.columns],
            y=[row.name for row in heatmap.rows],
            customdata=details,
            colorscale=METRIC_SCALES[heatmap.metric],
            zmin=0,
            zmax=1 if rate else None,
            xgap=2,
            ygap=2,
            colorbar={"thickness": 12, "tickformat": ".0%" if rate else "d", "outlinewidth": 0},
            hovertemplate=(
                "<b>%{y}</b> · %{x}<br>%{customdata[0]} jobs, %{customdata[1]} failed"
                + ("<br>failure rate %{z:.0%}" if rate else "")
                + "<extra></extra>"
            ),
            hoverongaps=False,
        )
    )
    figure.update_layout(
        height=height or 70 + 34 * max(len(heatmap.rows), 3),
        margin=_CHART_MARGIN,
        plot_bgcolor="rgba(0,0,0,0)",
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"type": "date" if dates else "category", "showgrid": False},
    )
    return figure


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
