"""`orgdeck policies`: draft governance rule text from plain instructions."""

from __future__ import annotations

import click
from rich.markup import escape

from api.cli.context import json_option, with_client
from api.cli.output import err, out, print_json
from api.client import OrgdeckClient
from api.governance import CATEGORIES, SEVERITIES


@click.group(
    name="policies",
    epilog="\b\nExample:\n  orgdeck policies draft --instructions 'Agents never reveal API keys.'",
)
def group() -> None:
    """Governance policies."""


@group.command(
    epilog="""\b
Examples:
  orgdeck policies draft --instructions "Agents must never reveal API keys or passwords."
  orgdeck policies draft --instructions "$(cat rules/secrets.txt)" --name secrets --severity warning
  orgdeck policies draft --instructions "..." --provider-id prov_01j... --model gpt-4o --json
"""
)
@click.option(
    "--instructions", required=True, metavar="TEXT", help="What the rule should enforce, in plain words."
)
@click.option("--name", metavar="NAME", help="The policy's name.")
@click.option("--description", metavar="TEXT", help="What the policy is for.")
@click.option("--category", type=click.Choice(CATEGORIES), help="Default: security.")
@click.option("--severity", type=click.Choice(SEVERITIES), help="Default: error.")
@click.option(
    "--provider-id", metavar="ID", help="Draft with this LLM provider connection of the organization."
)
@click.option(
    "--model", "model_id", metavar="MODEL", help="With --provider-id: the model (default: its own)."
)
@click.option(
    "--system-model", metavar="KEY", help="Draft with this operator model (see GET /providers/system)."
)
@json_option
@with_client
def draft(
    client: OrgdeckClient,
    instructions: str,
    name: str | None,
    description: str | None,
    category: str | None,
    severity: str | None,
    provider_id: str | None,
    model_id: str | None,
    system_model: str | None,
    as_json: bool,
) -> None:
    """Draft a policy's rule text (printed to stdout) and its check (on stderr); nothing is saved.

    By default the built-in offline drafter writes it; --provider-id or --system-model pick a model.
    """
    result = client.policies.generate(
        instructions,
        name=name,
        description=description,
        category=category,
        severity=severity,
        provider_id=provider_id,
        model_id=model_id,
        system_model_key=system_model,
    )
    if as_json:
        print_json(result)
        return
    drafted = result.drafted_with
    err().print(
        f"[dim]Drafted with {escape(drafted.name)} ({escape(drafted.model)}) in {result.latency_ms} ms[/]"
    )
    if result.notice:
        err().print(f"[dim]{escape(result.notice)}[/]", soft_wrap=True)
    out().print(escape(result.rule_text), soft_wrap=True)
    if result.check is not None:
        # Beside the rule, not in it: stdout stays the rule text a script saves.
        passing = sum(example.expect == "pass" for example in result.examples)
        err().print(
            f"[dim]Check: {escape(result.check)}\nEnforcement: {result.enforcement} · "
            f"{passing} passing and {len(result.examples) - passing} failing examples (all with --json)[/]",
            soft_wrap=True,
        )
