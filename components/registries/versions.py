"""The Versions tab: when each version of an artifact was published and the labels on it, as a
chart and a table; and how a version is offered in the other tabs' lists."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from api.registries import ArtifactVersion
from components.changes.provenance import asked_and_approved, made_by_request
from components.formatting import ago

MAX_NAMED_TICKS = 20


def labelled(versions: list[ArtifactVersion]) -> Callable[[str], str]:
    """How a version is offered in a list: `3 · latest, production`."""
    labels = {v.version: v.labels for v in versions}
    return lambda version: f"{version} · {', '.join(labels[version])}" if labels[version] else version


def versions_chart(versions: list[ArtifactVersion]) -> go.Figure:
    """When each version was published, with the labels on it: where production lags behind latest."""
    ordered = sorted(versions, key=lambda v: v.number)
    figure = go.Figure(
        go.Scatter(
            x=[v.created_at for v in ordered],
            y=[v.number for v in ordered],
            mode="lines+markers+text",
            text=[", ".join(label for label in v.labels) for v in ordered],
            textposition="top center",
            hovertext=[f"{v.version}: {v.commit_message or 'no message'}" for v in ordered],
            hoverinfo="text+x",
            marker={"size": 9},
        )
    )
    figure.update_layout(height=280, margin={"l": 10, "r": 10, "t": 20, "b": 10}, showlegend=False)
    figure.update_yaxes(title="version", range=[ordered[0].number - 0.5, ordered[-1].number + 0.8])
    if len(ordered) <= MAX_NAMED_TICKS:
        # One tick per version, named as people know it (1.4.0 rather than its number).
        figure.update_yaxes(tickvals=[v.number for v in ordered], ticktext=[v.version for v in ordered])
    return figure


def versions_history(versions: list[ArtifactVersion]) -> None:
    st.plotly_chart(versions_chart(versions), width="stretch")
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "Version": v.version,
                    "#": v.number,
                    "Labels": ", ".join(v.labels),
                    "Approved": "; ".join(
                        f"{label}: {asked_and_approved(ref)}"
                        for label, ref in v.label_change_requests.items()
                    ),
                    "Type": v.content_type,
                    "Variables": ", ".join(v.variables),
                    "Message": v.commit_message,
                    "Published": ago(v.created_at),
                }
                for v in versions
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    for v in versions:
        for label, ref in sorted(v.label_change_requests.items()):
            st.markdown(f"`{label}` on {v.version}")
            made_by_request(ref)
