"""How protection reads wherever it is shown: an environment's badge ("protected · 2 approvals"),
the same words in every listing, detail and on the Deploy tab."""

from __future__ import annotations

from api.environments import Environment

PROTECTED_ICON = ":material/lock:"


def approvals(count: int) -> str:
    return f"{count} approval{'s' if count != 1 else ''}"


def badge(environment: Environment) -> str:
    """`protected · 2 approvals`, or empty for an environment anyone may deploy to directly."""
    if not environment.protected:
        return ""
    return f"protected · {approvals(environment.required_approvals)}"
