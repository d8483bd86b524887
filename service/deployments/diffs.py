"""What a deployment would change: field-by-field differences between configs, with credentials
redacted (service/redaction/objects.py). The preview and the jobs diff what runs against what would run;
the evaluation of drift (service/deployments/states.py) diffs the draft against the running version
with the same rules."""

from __future__ import annotations

from typing import Any

from api.deployments import FieldChange
from service.deployments.models import AgentDeploymentRow
from service.redaction.objects import shown


def diff_deployment(
    current: AgentDeploymentRow | None, version: int, config: dict[str, Any]
) -> list[FieldChange]:
    """Field-by-field changes from what runs now to what would run; sensitive values redacted."""
    before: dict[str, Any] = current.config if current is not None else {}
    changes = []
    current_version = current.version if current is not None else None
    if current_version != version:
        kind = "added" if current_version is None else "changed"
        changes.append(FieldChange(field="version", kind=kind, before=current_version, after=version))
    for field in ("name", "provider", "model", "policyBundleHash"):
        changes += value_changes(field, before.get(field), config.get(field))
    for field in ("providerConfig", "promptReferences", "promptPins"):
        changes += mapping_changes(field, before.get(field) or {}, config.get(field) or {})
    old_tools, new_tools = set(before.get("toolRefs") or []), set(config.get("toolRefs") or [])
    changes += [
        FieldChange(field="toolRefs", kind="added", after=ref) for ref in sorted(new_tools - old_tools)
    ]
    changes += [
        FieldChange(field="toolRefs", kind="removed", before=ref) for ref in sorted(old_tools - new_tools)
    ]
    return changes


def value_changes(field: str, before: Any, after: Any) -> list[FieldChange]:
    if before == after:
        return []
    kind = "added" if before is None else "removed" if after is None else "changed"
    return [FieldChange(field=field, kind=kind, before=before, after=after)]


def mapping_changes(field: str, before: dict[str, Any], after: dict[str, Any]) -> list[FieldChange]:
    changes = []
    for key in sorted(before.keys() | after.keys()):
        if key in before and key in after and before[key] == after[key]:
            continue
        old, new = shown(key, before.get(key)), shown(key, after.get(key))
        kind = "added" if key not in before else "removed" if key not in after else "changed"
        changes.append(FieldChange(field=f"{field}.{key}", kind=kind, before=old, after=new))
    return changes
