"""A rollout in waves: its strategy in words, its waves as a table with the current one marked, and
the operator's Pause, Resume and Abort; and the "Roll out in waves" part of the Deploy and promote
forms, which makes the strategy and says how it would split the agents."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.deployments import (
    ABORTABLE_JOB_STATUSES,
    MAX_PAUSE_SECONDS,
    DeploymentJob,
    RolloutStrategy,
    WaveVerification,
)
from components.charts import BLUE_GREY, LIGHT, RED, STATUS_COLOURS
from components.confirm import confirmed
from components.connection import client
from components.deployments.tables import coloured
from components.feedback import notify, plain, show_error
from components.formatting import duration
from components.permissions import control

ON_FAILURE_WORDS = {"stop": "stop", "rollback": "roll back"}
COUNT, PERCENT = "Agents", "Percent"
CURRENT = "▶"
PAUSABLE = ("pending", "running")
# A wave's statuses beyond a job's: one being checked, one that failed, one never started.
WAVE_COLOURS = STATUS_COLOURS | {"verifying": BLUE_GREY, "failed": RED, "skipped": LIGHT}
TIME = "%H:%M:%S"
# What was done to the job, for the message after the action.
DONE = {"pause": "Paused", "resume": "Resumed", "abort": "Aborted"}


def strategy_words(strategy: RolloutStrategy) -> str:
    """`waves of 2 · 30 s apart · on failure roll back`."""
    size = strategy.wave_size
    waves = f"waves of {size}" if isinstance(size, int) else f"waves of {size} of the agents"
    apart = f"{duration(strategy.pause_seconds)} apart" if strategy.pause_seconds else "no pause"
    return f"{waves} · {apart} · on failure {ON_FAILURE_WORDS[strategy.on_failure]}"


def split_words(strategy: RolloutStrategy, agents: int) -> str:
    """`3 wave(s): 2 · 2 · 1 agent(s)`: how `agents` agents would be split."""
    per_wave = max(1, strategy.wave_count(agents))
    sizes = [min(per_wave, agents - start) for start in range(0, agents, per_wave)]
    return f"{len(sizes)} wave(s): {' · '.join(map(str, sizes))} agent(s)"


def waves_frame(job: DeploymentJob) -> pd.DataFrame:
    rollout = job.rollout
    assert rollout is not None
    under_way = job.status in ABORTABLE_JOB_STATUSES
    return pd.DataFrame(
        [
            {
                "": CURRENT if under_way and wave.index == rollout.current_wave else "",
                "Wave": wave.index + 1,
                "Agents": ", ".join(wave.agent_stable_keys),
                "Status": wave.status,
                "Started (UTC)": wave.started_at.strftime(TIME) if wave.started_at else "",
                "Finished (UTC)": wave.finished_at.strftime(TIME) if wave.finished_at else "",
                "Verification": verification_words(wave.verification),
            }
            for wave in rollout.waves
        ]
    )


def verification_words(verification: WaveVerification | None) -> str:
    if verification is None:
        return ""
    return f"{verification.result}: {verification.message}" if verification.message else verification.result


def rollout_state(job: DeploymentJob) -> None:
    """Who paused it, or how long until the next wave."""
    rollout = job.rollout
    assert rollout is not None
    if job.status == "paused":
        st.info(
            f"Paused by {plain(rollout.paused_by or 'someone')} — resume to continue.",
            icon=":material/pause_circle:",
        )
    elif job.status == "running" and rollout.next_wave_at is not None:
        wait = (rollout.next_wave_at - datetime.now(UTC)).total_seconds()
        if wait > 0:
            st.caption(f"Next wave in {wait:.0f} s")


def rollout_panel(job: DeploymentJob, after_action: Callable[[DeploymentJob], None] | None = None) -> None:
    """The strategy, the waves and the controls of a job deployed in waves."""
    rollout = job.rollout
    assert rollout is not None
    st.markdown(f"**Rollout:** {strategy_words(rollout.strategy)}")
    rollout_state(job)
    st.dataframe(coloured(waves_frame(job), "Status", WAVE_COLOURS), hide_index=True, width="stretch")
    with st.container(horizontal=True):
        pausable = job.status in PAUSABLE
        if st.button(
            "Pause",
            icon=":material/pause:",
            key=f"pause_{job.id}",
            **control(
                "pauseDeploymentJob", **unless(pausable, "Only a running or pending rollout can be paused.")
            ),
        ):
            act(job, "pause", after_action)
        if st.button(
            "Resume",
            icon=":material/play_arrow:",
            key=f"resume_{job.id}",
            **control(
                "resumeDeploymentJob",
                **unless(job.status == "paused", "Only a paused rollout can be resumed."),
            ),
        ):
            act(job, "resume", after_action)
        abortable = job.status in ABORTABLE_JOB_STATUSES
        if confirmed(
            "Abort",
            key=f"abort_{job.id}",
            warning="Abort this rollout? No further wave starts; what is deployed stays (no roll back).",
            **control(
                "abortDeploymentJob",
                **unless(abortable, "Only a pending, running or paused rollout can be aborted."),
            ),
        ):
            act(job, "abort", after_action)


def unless(allowed: bool, why_not: str) -> dict[str, Any]:
    """A control's own `disabled` and `help`: the reason only where the state forbids it."""
    return {"disabled": not allowed, "help": None if allowed else why_not}


def act(job: DeploymentJob, action: str, after_action: Callable[[DeploymentJob], None] | None) -> None:
    transition = getattr(client().deployments, action)
    try:
        changed: DeploymentJob = transition(job.id)
    except ApiError as error:
        show_error(error, f"{action} the rollout")
        return
    if after_action is not None:
        after_action(changed)
    notify(f"{DONE[action]} the rollout of job `{changed.id}`: it is now **{changed.status}**.")


def strategy_form(key: str, agents: int) -> RolloutStrategy | None:
    """The optional "Roll out in waves" part of a form for `agents` agents; None: all at once."""
    with st.expander("Roll out in waves (optional)", icon=":material/waves:"):
        if not st.toggle("Deploy in waves", key=f"{key}_waves"):
            st.caption("Off: every agent is deployed at once.")
            return None
        unit_col, size_col, pause_col, failure_col = st.columns(4)
        unit = unit_col.segmented_control(
            "Wave size in", [COUNT, PERCENT], default=COUNT, required=True, key=f"{key}_wave_unit"
        )
        size = size_col.number_input(
            "Wave size",
            min_value=1,
            max_value=100 if unit == PERCENT else None,
            value=1,
            step=1,
            key=f"{key}_wave_size_{unit}",
            help="Agents per wave, or a percent of them (rounded up, at least one).",
        )
        pause = pause_col.number_input(
            "Pause seconds",
            min_value=0,
            max_value=MAX_PAUSE_SECONDS,
            value=0,
            step=1,
            key=f"{key}_pause_seconds",
            help="Seconds between waves; each wave is verified first if the environment has a "
            "verification webhook.",
        )
        on_failure = failure_col.radio(
            "On a failed wave",
            list(ON_FAILURE_WORDS),
            format_func=ON_FAILURE_WORDS.__getitem__,
            key=f"{key}_on_failure",
            help="Stop leaves later waves undeployed; roll back also puts the waves done back.",
        )
        strategy = RolloutStrategy(
            wave_size=f"{int(size)}%" if unit == PERCENT else int(size),
            pause_seconds=int(pause),
            on_failure=on_failure,
        )
        st.caption(f"{strategy_words(strategy)} → {split_words(strategy, agents)}")
        return strategy
