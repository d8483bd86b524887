"""A policy's versions: when each was saved, and the rule text of an earlier one beside the current."""

from __future__ import annotations

import difflib

import pandas as pd
import streamlit as st

from api.governance import PolicyWithVersions
from components.formatting import ago


def versions_panel(policy: PolicyWithVersions) -> None:
    st.markdown("**Versions**")
    st.dataframe(
        pd.DataFrame(
            [
                {"Version": v.version, "Name": v.name, "Severity": v.severity, "Saved": ago(v.created_at)}
                for v in policy.versions
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    earlier = policy.versions[1:]
    if earlier:
        shown = st.selectbox(
            "Compare with", earlier, format_func=lambda v: f"version {v.version}", key=f"cmp_{policy.id}"
        )
        diff = difflib.unified_diff(
            shown.rule_text.splitlines(),
            policy.rule_text.splitlines(),
            f"version {shown.version}",
            f"version {policy.version}",
            lineterm="",
        )
        st.code("\n".join(diff) or "Same rule text.", language="diff")
