"""Every setting of the service, read from `ORGDECK_*` environment variables."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

CommaList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ORGDECK_", extra="ignore")

    data_dir: Path = Field(Path("data"), description="Where the SQLite file and generated keys live.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default: SQLite in data_dir.")
    encryption_keys: CommaList = Field(
        default_factory=list,
        description="Fernet keys, comma-separated: the first encrypts, all decrypt. "
        "Default: one generated into data_dir/encryption.key.",
    )
    redis_url: str | None = Field(None, description="Shares rate-limit budgets between processes.")
    rate_limit: int = Field(1200, ge=0, description="Requests per key per window; 0 turns limiting off.")
    rate_limit_window_seconds: int = Field(60, ge=1)
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    outbound_allow_private: CommaList = Field(
        default_factory=list,
        description="Hosts or CIDRs on private networks that outbound calls may reach; `*` allows all.",
    )
    system_models: CommaList = Field(
        default_factory=list,
        description="Models the operator offers every organization for drafting, comma-separated "
        "`key=kind:model` or `key=kind:model@baseUrl` (kind: openai, anthropic, azure_openai, "
        "openai_compatible); each one's API key is read from ORGDECK_SYSTEM_MODEL_<KEY>_API_KEY.",
    )
    provider_timeout_seconds: float = Field(
        30.0, gt=0, le=600, description="How long a call to a language-model provider may take."
    )
    job_lease_seconds: float = Field(
        60.0,
        gt=0,
        description="How long a worker holds a deployment job (or a wave of it) without renewing it "
        "before another worker may take it over (renewed every third of this while it works).",
    )
    verification_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="How long an environment's verification webhook may take to answer."
    )
    log_level: str = "info"
    log_format: Literal["text", "json"] = Field(
        "text", description="`text` for a terminal; `json`: one JSON object per line, for a log collector."
    )
    access_log: bool | None = Field(
        None,
        description="Log one line per request (method, route, status, duration); default: on with the "
        "json format, off with text (a load balancer in front usually keeps that log already).",
    )
    metrics_access: Literal["open", "loopback-or-key", "key"] = Field(
        "loopback-or-key",
        description="Who may read /metrics: anyone; callers on this host or with any valid key; "
        "callers with any valid key.",
    )
    run_worker: bool = Field(True, description="Run the background worker inside the service process.")
    worker_idle_seconds: float = Field(
        1.0, gt=0, le=60, description="Pause of an idle worker between rounds."
    )
    threads: int = Field(8, ge=1, le=200, description="Worker threads for blocking request handlers.")
    db_pool_size: int = Field(8, ge=1)
    console_url: str | None = Field(None, description="The console's address, linked from notifications.")
    smtp_host: str | None = Field(None, description="SMTP server that sends email notifications.")
    smtp_port: int = Field(25, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: str | None = None
    smtp_from: str = Field("orgdeck@localhost", description="Sender address of email notifications.")
    smtp_starttls: bool = Field(False, description="Upgrade the SMTP connection with STARTTLS.")
    notification_retry_schedule: Annotated[list[Annotated[float, Field(ge=0)]], NoDecode] = Field(
        default_factory=lambda: [0, 5, 300, 1800, 7200, 18000, 36000, 36000],
        min_length=1,
        description="Seconds before each delivery attempt, comma-separated (jitter is added); "
        "a delivery is dead when every attempt has failed.",
    )
    notification_timeout_seconds: float = Field(15.0, gt=0, le=120, description="Per delivery attempt.")
    notification_lease_seconds: float = Field(
        60.0,
        gt=0,
        description="How long a worker holds a claimed delivery without renewing it before another "
        "worker may take it over (the holder renews it every third of this while it sends).",
    )
    notification_concurrency: int = Field(
        128, ge=1, le=1000, description="Deliveries one worker sends at once, to every channel together."
    )
    notification_channel_concurrency: int = Field(
        8, ge=1, le=1000, description="Deliveries one worker sends at once to one channel."
    )
    notification_poll_seconds: float = Field(
        0.2, gt=0, le=10, description="How often a sender with nothing to do looks for new events."
    )
    notification_secret_grace_seconds: float = Field(
        86400.0,
        ge=0,
        description="How long a webhook channel's previous signing secret still signs after a rotation.",
    )

    retention_notification_logs_days: float = Field(
        30.0, ge=0, description="Days a delivery attempt stays in the notification log; 0 keeps it forever."
    )
    retention_deliveries_days: float = Field(
        30.0,
        ge=0,
        description="Days a finished (sent or dead) delivery is kept after it was queued; 0: forever.",
    )
    retention_events_days: float = Field(
        30.0,
        ge=0,
        description="Days an event is kept once it was fanned out and no delivery of it is left; 0: forever.",
    )
    retention_sign_in_sessions_days: float = Field(
        30.0,
        ge=0,
        description="Days a sign-in session is kept after it began, once its token expired; 0: forever.",
    )
    retention_audit_events_days: float = Field(
        0.0,
        ge=0,
        description="Days an audit event is kept; 0 (the default) keeps the trail forever. Only events "
        "an export has covered are ever pruned (GET /audit-events/export).",
    )
    retention_idempotency_days: float = Field(
        1.0, ge=1, description="Days an idempotency record is kept (a key is replayed for 24 hours)."
    )
    retention_job_details_days: float = Field(
        365.0,
        ge=0,
        description="Days an ended deployment job keeps its per-agent detail (versions, resolved config, "
        "results); the job itself and the analytics' rollups stay. 0: forever.",
    )
    retention_batch_size: int = Field(
        1000, ge=1, le=100_000, description="Rows one pruning statement deletes, each in its own transaction."
    )

    oidc_issuer: str | None = Field(
        None,
        description="The company identity provider's issuer URL: its tokens sign people in "
        "(`Authorization: Bearer <ID token>`), verified against its discovery document and JWKS.",
    )
    oidc_audience: str | None = Field(
        None, description="The audience (client id) the identity provider's tokens must name."
    )
    oidc_groups_claim: str = Field(
        "groups", description="The token claim listing a person's groups (mapped to roles per organization)."
    )
    oidc_clock_skew_seconds: int = Field(
        60, ge=0, le=600, description="How far a token's exp, nbf and iat may be off the service's clock."
    )
    oidc_timeout_seconds: float = Field(
        10.0, gt=0, le=60, description="How long a fetch of an issuer's discovery document or JWKS may take."
    )
    oidc_jwks_refresh_seconds: float = Field(
        30.0,
        ge=0,
        description="The least time between two fetches of an issuer's JWKS for an unknown key id "
        "(a flood of tokens with made-up key ids must not become a flood of fetches).",
    )

    @field_validator(
        "encryption_keys",
        "outbound_allow_private",
        "system_models",
        "notification_retry_schedule",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @cached_property
    def resolved_database_url(self) -> str:
        """The URL to connect with; plain `postgresql://` URLs are given the psycopg 3 driver."""
        url = self.database_url or f"sqlite:///{(self.data_dir / 'orgdeck.db').resolve()}"
        for plain in ("postgres://", "postgresql://"):
            if url.startswith(plain):
                return "postgresql+psycopg://" + url.removeprefix(plain)
        return url

    @property
    def logs_requests(self) -> bool:
        return self.log_format == "json" if self.access_log is None else self.access_log

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")
