"""Retention: the worker's pass deletes exactly what is older than each kind's setting, a bounded
batch at a time, while the service goes on serving writes; audit events only once an export covers them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import delete, insert, select
from sqlalchemy.exc import DBAPIError

from service.agents.models import AgentRow
from service.deployments.models import DeploymentJobAgentRow, DeploymentJobRow
from service.environments.models import EnvironmentRow
from service.events.models import EventRow
from service.idempotency.models import IdempotencyKeyRow
from service.idempotency.service import expire_keys
from service.notifications.models import ChannelRow, DeliveryLogRow, DeliveryRow
from service.orgs.models import OrganizationRow
from service.retention.service import prune_pass
from service.settings import Settings
from service.signin.models import SignInSessionRow
from service.storage.db import Database, utcnow
from service.storage.ids import first_id_at, new_id
from service.storage.migrate import upgrade
from service.trail.models import AuditEventRow, AuditExportRow
from tests.conftest import Org, make_settings, scratch_database

DAY = timedelta(days=1)


def org_id_of(db: Database, org: Org) -> str:
    with db.session() as session:
        return session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))


def retention(settings: Settings, **days: float) -> Settings:
    """The test's settings with small batches (so a pass takes several) and the given retentions."""
    values = {
        "retention_notification_logs_days": 0,
        "retention_deliveries_days": 0,
        "retention_audit_events_days": 0,
        "retention_job_details_days": 0,
        "retention_events_days": 0,
        "retention_sign_in_sessions_days": 0,
        **days,
    }
    return make_settings(settings.data_dir, settings.database_url, retention_batch_size=3, **values)


def prune_all(db: Database, settings: Settings) -> dict[str, int]:
    total: dict[str, int] = {}
    while True:
        done = prune_pass(db, settings)
        for kind, count in done.pruned.items():
            total[kind] = total.get(kind, 0) + count
        if not done.more:
            return total


@pytest.fixture
def writes(http, org: Org) -> Iterator[list[int]]:
    """Fleets created one after another while the test prunes: every one must be answered 200."""
    statuses: list[int] = []
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            body = {"orgSlug": org.slug, "name": f"fleet-{uuid.uuid4().hex[:8]}"}
            statuses.append(http.post("fleets", json=body, headers=org.headers).status_code)

    thread = threading.Thread(target=write)
    thread.start()
    yield statuses
    stop.set()
    thread.join()
    assert statuses and set(statuses) == {200}


def ages(now: datetime, *days: float) -> list[datetime]:
    return [now - timedelta(days=age) for age in days]


def seed_logs(db: Database, org_id: str, moments: list[datetime]) -> list[str]:
    rows = [
        {
            "id": new_id("log", at=moment),
            "org_id": org_id,
            "delivery_id": "msg_x",
            "event_id": "evt_x",
            "event_type": "deployment.succeeded",
            "channel_id": "ch_x",
            "channel_name": "x",
            "channel_kind": "webhook",
            "attempt": 1,
            "status": "sent",
            "created_at": moment,
        }
        for moment in moments
    ]
    with db.session(write=True) as session:
        session.execute(insert(DeliveryLogRow), rows)
    return [row["id"] for row in rows]


def test_prunes_exactly_what_is_older_than_each_setting_while_serving(db, settings, org, other_org, writes):
    org_id, now = org_id_of(db, org), utcnow()
    logs = seed_logs(db, org_id, ages(now, 1, 29.9, 30.1, 45, 400, 401, 402))
    other_logs = seed_logs(db, org_id_of(db, other_org), ages(now, 31, 2))
    with db.session(write=True) as session:
        channel = ChannelRow(org_id=org_id, name=f"c-{uuid.uuid4().hex[:6]}", kind="webhook", config={})
        environment = EnvironmentRow(org_id=org_id, name=f"e-{uuid.uuid4().hex[:6]}")
        agent = AgentRow(
            org_id=org_id,
            stable_key="a",
            name="a",
            provider="openai",
            provider_config={},
            prompt_references={},
        )
        session.add_all([channel, environment, agent])
        session.flush()
        deliveries = {}
        for status, age in (("sent", 20), ("sent", 11), ("dead", 12), ("pending", 30), ("failed", 40)):
            moment = now - timedelta(days=age)
            event = EventRow(org_id=org_id, type="deployment.succeeded", payload={}, occurred_at=moment)
            session.add(event)
            session.flush()
            delivery = DeliveryRow(
                id=new_id("msg", at=moment),
                org_id=org_id,
                event_id=event.id,
                event_type=event.type,
                channel_id=channel.id,
                status=status,
                created_at=moment,
            )
            session.add(delivery)
            deliveries[(status, age)] = delivery.id
        jobs = {}
        for status, age in (("complete", 400), ("error", 367), ("running", 500), ("complete", 300)):
            moment = now - timedelta(days=age)
            job = DeploymentJobRow(
                id=new_id("job", at=moment), org_id=org_id, environment_id=environment.id, status=status
            )
            if status == "running":  # under a live lease: no worker takes it up and ends it
                job.lease_token, job.lease_expires_at = "lease_held", now + DAY
            job.agent_rows = [
                DeploymentJobAgentRow(
                    agent_id=agent.id, stable_key="a", version=1, config={}, config_hash="h"
                )
            ]
            session.add(job)
            jobs[(status, age)] = job.id

    pruned = prune_all(
        db,
        retention(
            settings,
            retention_notification_logs_days=30,
            retention_deliveries_days=10.5,
            retention_job_details_days=365,
        ),
    )

    with db.session() as session:
        kept_logs = set(
            session.scalars(select(DeliveryLogRow.id).where(DeliveryLogRow.id.in_(logs + other_logs)))
        )
        kept_deliveries = set(session.scalars(select(DeliveryRow.id).where(DeliveryRow.org_id == org_id)))
        jobs_with_detail = set(
            session.scalars(
                select(DeploymentJobAgentRow.job_id).where(DeploymentJobAgentRow.job_id.in_(jobs.values()))
            )
        )
        jobs_kept = set(session.scalars(select(DeploymentJobRow.id).where(DeploymentJobRow.org_id == org_id)))
    assert kept_logs == {logs[0], logs[1], other_logs[1]}
    # Finished deliveries past 10.5 days go; pending and failed ones stay whatever their age.
    assert kept_deliveries == {deliveries[("pending", 30)], deliveries[("failed", 40)]}
    assert jobs_with_detail == {jobs[("running", 500)], jobs[("complete", 300)]}
    assert jobs_kept == set(jobs.values())  # the jobs themselves stay
    assert pruned["notification_logs"] >= 6 and pruned["deliveries"] >= 3 and pruned["job_details"] >= 2


def seed_audit_events(db: Database, org_id: str, moments: list[datetime]) -> list[str]:
    rows = [
        {
            "id": new_id("aud", at=moment),
            "org_id": org_id,
            "occurred_at": moment,
            "action": "createAgent",
            "changes": {},
        }
        for moment in moments
    ]
    with db.session(write=True) as session:
        session.execute(insert(AuditEventRow), rows)
    return [row["id"] for row in rows]


def audit_ids(db: Database, ids: list[str]) -> set[str]:
    with db.session() as session:
        return set(session.scalars(select(AuditEventRow.id).where(AuditEventRow.id.in_(ids))))


def test_audit_events_are_pruned_only_where_an_export_covers_them(db, settings, org, caplog):
    org_id, now = org_id_of(db, org), utcnow()
    events = seed_audit_events(db, org_id, ages(now, 100, 95, 80, 70, 5))
    settings_90 = retention(settings, retention_audit_events_days=60)

    with caplog.at_level("WARNING", logger="orgdeck.retention"):
        prune_all(db, settings_90)
    assert audit_ids(db, events) == set(events)  # nothing exported: everything kept, loudly
    assert "no export covers them" in caplog.text

    # An export of the days 100 to 85 ago covers the two oldest only.
    with db.session(write=True) as session:
        session.add(
            AuditExportRow(
                org_id=org_id,
                covers_from_id=first_id_at("aud", now - 101 * DAY),
                covers_to_id=first_id_at("aud", now - 85 * DAY),
                range_start=now - 101 * DAY,
                range_end=now - 85 * DAY,
                completed_at=now,
            )
        )
    prune_all(db, settings_90)
    assert audit_ids(db, events) == set(events[2:])


def test_the_database_refuses_to_delete_an_event_no_export_covers(db, org):
    org_id, now = org_id_of(db, org), utcnow()
    [event] = seed_audit_events(db, org_id, [now - 400 * DAY])
    with pytest.raises(DBAPIError, match="append-only"), db.session(write=True) as session:
        session.execute(delete(AuditEventRow).where(AuditEventRow.id == event))
    assert audit_ids(db, [event]) == {event}


def test_idempotency_records_older_than_their_retention_go_in_batches(db, settings, org):
    org_id, now = org_id_of(db, org), utcnow()
    rows = [
        {
            "org_id": org_id,
            "caller_id": "key_x",
            "key": f"k{index}",
            "fingerprint": "f",
            "method": "POST",
            "path": "/fleets",
            "state": "done",
            "claim": "c",
            "locked_until": now,
            "created_at": now - timedelta(days=age),
        }
        for index, age in enumerate((0.5, 1.9, 2.1, 3, 4, 5, 6, 7))
    ]
    with db.session(write=True) as session:
        session.execute(insert(IdempotencyKeyRow), rows)
    keep_two_days = make_settings(
        settings.data_dir, settings.database_url, retention_idempotency_days=2, retention_batch_size=4
    )

    assert expire_keys(db, keep_two_days) is True  # a full batch: more may be left
    assert expire_keys(db, keep_two_days) is False
    with db.session() as session:
        kept = set(session.scalars(select(IdempotencyKeyRow.key).where(IdempotencyKeyRow.org_id == org_id)))
    assert kept == {"k0", "k1"}


@pytest.fixture
def quiet_db(tmp_path) -> Iterator[Database]:
    """A database of the test's own: on the shared one, the shared service's sender fans out every
    event it finds, the test's "not yet fanned out" one included."""
    with scratch_database(tmp_path) as url:
        quiet = Database(url)
        upgrade(quiet)
        try:
            yield quiet
        finally:
            quiet.dispose()


def test_events_go_once_fanned_out_and_their_deliveries_are_gone(quiet_db, settings):
    db, now = quiet_db, utcnow()
    with db.session(write=True) as session:
        organization = OrganizationRow(slug="events-retention", name="Events")
        session.add(organization)
        session.flush()
        org_id = organization.id
        channel = ChannelRow(org_id=org_id, name=f"c-{uuid.uuid4().hex[:6]}", kind="webhook", config={})
        session.add(channel)
        events = {}
        for name, age, fanned_out, delivery in (
            ("old, delivered, delivery gone", 40, True, None),
            ("old, not yet fanned out", 40, False, None),
            ("old, its delivery still pending", 40, True, "pending"),
            ("recent, delivered", 5, True, None),
        ):
            moment = now - timedelta(days=age)
            event = EventRow(
                id=new_id("evt", at=moment),
                org_id=org_id,
                type="deployment.succeeded",
                payload={},
                occurred_at=moment,
                fanned_out_at=moment if fanned_out else None,
            )
            session.add(event)
            session.flush()
            if delivery:
                session.add(
                    DeliveryRow(
                        org_id=org_id,
                        event_id=event.id,
                        event_type=event.type,
                        channel_id=channel.id,
                        status=delivery,
                    )
                )
            events[name] = event.id

    pruned = prune_all(db, retention(settings, retention_events_days=30))

    with db.session() as session:
        kept = set(session.scalars(select(EventRow.id).where(EventRow.id.in_(events.values()))))
    assert kept == set(events.values()) - {events["old, delivered, delivery gone"]}
    assert pruned["events"] >= 1


def test_sign_in_sessions_go_once_expired_and_older_than_their_retention(db, settings, org):
    org_id, now = org_id_of(db, org), utcnow()
    sessions = {
        (age, expired): new_id("sis", at=now - timedelta(days=age))
        for age, expired in ((40, True), (40, False), (5, True))
    }
    with db.session(write=True) as session:
        session.execute(
            insert(SignInSessionRow),
            [
                {
                    "id": session_id,
                    "org_id": org_id,
                    "token_hash": uuid.uuid4().hex * 2,
                    "started_at": now - timedelta(days=age),
                    "expires_at": now - timedelta(hours=1) if expired else now + timedelta(hours=1),
                }
                for (age, expired), session_id in sessions.items()
            ],
        )

    prune_all(db, retention(settings, retention_sign_in_sessions_days=30))

    with db.session() as session:
        kept = set(
            session.scalars(select(SignInSessionRow.id).where(SignInSessionRow.id.in_(sessions.values())))
        )
    assert kept == {sessions[(40, False)], sessions[(5, True)]}
