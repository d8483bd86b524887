"""Calls the service makes to addresses someone gave it: the rule every such URL must pass (no
private network unless allowed) and Standard Webhooks signing."""
