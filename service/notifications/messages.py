"""What a delivery sends, by channel kind: a signed Standard Webhooks JSON body, a Slack message, an
email. Built from the stored event alone, so a delivery's detail shows exactly what its attempts
send, and every attempt of one delivery sends the same body.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from api.common import format_timestamp
from api.version import VERSION
from service.settings import Settings

USER_AGENT = f"Orgdeck-Webhooks/{VERSION}"
JSON = "application/json"
TITLES = {
    "agent.stale": "Agent is stale",
    "agent.drifted": "Agent drifted",
    "agent.error": "Agent failed to deploy",
    "deployment.complete": "Deployment complete",
    "deployment.error": "Deployment failed",
    "deployment.partial": "Deployment partly failed",
    "deployment.paused": "Rollout paused",
    "deployment.resumed": "Rollout resumed",
    "deployment.aborted": "Rollout aborted",
    "deployment.rolled_back": "Rollout rolled back",
    "change_request.opened": "Change request opened",
    "change_request.decided": "Change request decided",
    "policy.violation": "Policy violated",
}


@dataclass(frozen=True)
class Message:
    """An event addressed to one channel: everything that decides what is sent."""

    delivery_id: str
    event_id: str
    event_type: str
    occurred_at: datetime
    org_slug: str
    payload: dict[str, Any]
    channel_kind: str
    channel_config: dict[str, Any]


@dataclass(frozen=True)
class Content:
    """A message's body as the receiver gets it, and where it goes as the channel shows it."""

    destination: str
    content_type: str
    body: bytes


def content(message: Message, settings: Settings) -> Content:
    config = message.channel_config
    if message.channel_kind == "email":
        email = email_message(message, settings)
        text = email.get_body(("plain",))
        body = text.get_content().encode() if isinstance(text, EmailMessage) else b""
        return Content(", ".join(config["recipients"]), "text/plain", body)
    if message.channel_kind == "webhook":
        return Content(config["url"], JSON, webhook_json(message))
    return Content(config["url"], JSON, _compact(slack_message(message, settings)))


def webhook_json(message: Message) -> bytes:
    return _compact(webhook_body(message))


def _compact(shaped: dict[str, Any]) -> bytes:
    return json.dumps(shaped, separators=(",", ":")).encode()


def webhook_body(message: Message) -> dict[str, Any]:
    """The Standard Webhooks payload shape: type, timestamp and the event's data."""
    return {
        "type": message.event_type,
        "timestamp": format_timestamp(message.occurred_at),
        "data": {"eventId": message.event_id, "orgSlug": message.org_slug, **message.payload},
    }


def summary(message: Message) -> str:
    """One readable line, e.g. "Deployment failed: production, agents support-bot, job job_9"."""
    payload = message.payload
    details = []
    environment = payload.get("environmentName") or payload.get("environment")
    if environment:
        details.append(str(environment.get("name", "?") if isinstance(environment, dict) else environment))
    agents = payload.get("agents") or ([payload["stableKey"]] if payload.get("stableKey") else [])
    if agents:
        names = [str(a.get("stableKey", "?")) if isinstance(a, dict) else str(a) for a in agents]
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        details.append(f"agent{'s' if len(names) > 1 else ''} {', '.join(names[:5])}{more}")
    if payload.get("jobId"):
        details.append(f"job {payload['jobId']}")
    if payload.get("test"):
        details.append("test notification")
    title = TITLES.get(message.event_type, message.event_type)
    return f"{title}: {', '.join(details)}" if details else title


def console_link(message: Message, settings: Settings) -> str | None:
    if not settings.console_url:
        return None
    page = "notifications" if message.payload.get("test") else message.event_type.split(".")[0] + "s"
    return f"{settings.console_url.rstrip('/')}/{page}"


def slack_message(message: Message, settings: Settings) -> dict[str, Any]:
    """An incoming-webhook message: `text` for notifications, blocks for the channel."""
    text = f"[{message.org_slug}] {summary(message)}"
    context = f"{message.event_type} · {format_timestamp(message.occurred_at)}"
    link = console_link(message, settings)
    if link:
        context += f" · <{link}|Open in Orgdeck>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_slack_escape(text)}*"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        ],
    }


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def email_message(message: Message, settings: Settings) -> EmailMessage:
    email = EmailMessage()
    title = summary(message)
    email["Subject"] = f"[Orgdeck] {title}"
    email["From"] = settings.smtp_from
    email["To"] = ", ".join(message.channel_config["recipients"])
    link = console_link(message, settings)
    details = json.dumps(message.payload, indent=2, sort_keys=True)
    when = format_timestamp(message.occurred_at)
    lines = [title, "", f"Organization: {message.org_slug}", f"Event: {message.event_type} at {when}"]
    email.set_content("\n".join([*lines, *([f"Open in Orgdeck: {link}"] if link else []), "", details]))
    link_html = f'<p><a href="{html.escape(link)}">Open in Orgdeck</a></p>' if link else ""
    email.add_alternative(
        f"<h2>{html.escape(title)}</h2><p>Organization: {html.escape(message.org_slug)}<br>"
        f"Event: {html.escape(message.event_type)} at {when}</p>{link_html}"
        f"<pre>{html.escape(details)}</pre>",
        subtype="html",
    )
    return email


def email_headers(email: EmailMessage) -> dict[str, str]:
    """The headers of an email that a delivery's attempt shows."""
    return {name: str(email[name]) for name in ("Subject", "From", "To")}
