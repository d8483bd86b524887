"""How a change request is put in words: its kind, who asked for it, and what it produced."""

from __future__ import annotations

from api.changes import ChangeRequest

KIND_LABELS = {
    "deployment": "Deployment",
    "label": "Label move",
    "policy": "Policy",
    "environment": "Environment",
}


def requester(request: ChangeRequest) -> str:
    return request.requested_by.email or f"key {request.requested_by.key_name}"


def approvals_text(request: ChangeRequest) -> str:
    """How many approvals count, of those the rules require now."""
    counted = sum(approval.counted for approval in request.approvals)
    return f"{counted} of {request.required_approvals} approval(s)"


def result_text(request: ChangeRequest) -> str:
    result = request.result or {}
    if request.kind == "environment" and result:
        return "deleted" if result.get("deleted") else "applied"
    if "jobId" in result:
        return f"job {result['jobId']}"
    if "label" in result:
        return f"{result['label']} → version {result['version']}"
    if result.get("deleted"):
        return f"policy {result['policyId']} deleted"
    if "policyId" in result:
        return f"policy {result['policyId']} version {result['version']}"
    return request.conflict or ""
