"""The console's embedded mode: a service on SQLite with a demo organization, served in a thread of
`python -m service demo` (service.runtime.launcher starts that process with the console)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from api import OrgdeckClient
from api.errors import Unauthorized
from api.members import CreateMember
from service.api_keys.service import create_key
from service.deployments.demo import seed_deployment_history
from service.members.models import MemberRow
from service.members.service import create_member
from service.notifications.demo import DemoReceiver, seed_delivery_history
from service.orgs.service import create_org, get_org
from service.runtime import demo
from service.runtime.server import ServerThread
from service.settings import Settings
from service.storage.crypto import cipher_for
from service.storage.db import Database
from service.storage.migrate import upgrade
from service.worker import WorkerThread, start_in_thread

logger = logging.getLogger("orgdeck.embedded")

DEMO_ORG = "demo"
DEMO_ADMIN_EMAIL = "avery.admin@demo.example"
KEY_FILE = "demo-api-key"
# The console's first page asks for the demo the moment it is served. The worker's first round (the
# jobs seeded, the deliveries of the seeding's events) waits a moment rather than take turns with
# it: a request of that page which met the round took 0.2 to 0.3 s longer.
WORKER_FIRST_ROUND_AFTER_SECONDS = 3.0


@dataclass(frozen=True)
class Embedded:
    url: str
    api_key: str
    org_slug: str
    server: ServerThread
    receiver: DemoReceiver
    worker: WorkerThread | None
    db: Database

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        self.server.stop()
        self.receiver.stop()
        self.db.dispose()


def start(settings: Settings) -> Embedded:
    """Migrate, make sure the demo org and its key exist, serve, and seed demo data once."""
    if not settings.outbound_allow_private:
        # The demo runs on a laptop next to local model servers and receivers: let it reach them.
        settings = settings.model_copy(update={"outbound_allow_private": ["*"]})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.resolved_database_url)
    upgrade(db)
    # The worker starts once the demo is seeded: until then it would take turns with the seeding for
    # this process's one interpreter, and the jobs seeded wait a moment for it all the same.
    server = ServerThread(settings.model_copy(update={"run_worker": False})).start()
    # Where the demo's channels deliver: on this machine, accepting everything they send.
    receiver = DemoReceiver().start()
    api_key = _demo_key(db, settings.data_dir / KEY_FILE, server.url)
    # Its own server on loopback, with no worker yet: nothing to retry, so no Idempotency-Keys to
    # claim and answer (a fifth of the seeding's time).
    with OrgdeckClient(server.url, api_key, org_slug=DEMO_ORG, max_retries=0) as client:
        demo.seed(client, receiver_url=receiver.url)
    # Past deliveries cannot be made through the API (it stamps them now): written directly, once.
    seed_delivery_history(
        db,
        org_slug=DEMO_ORG,
        retry_schedule=settings.notification_retry_schedule,
        cipher=cipher_for(settings),
    )
    seed_deployment_history(db, org_slug=DEMO_ORG)
    worker = (
        start_in_thread(db, settings, first_round_after=WORKER_FIRST_ROUND_AFTER_SECONDS)
        if settings.run_worker
        else None
    )
    # Started after the app's lifespan, so attached here: /health/ready watches it all the same.
    server.app.state.health.attach_worker(worker.worker.silence if worker is not None else None)
    logger.info("Embedded service on %s, organization %s", server.url, DEMO_ORG)
    return Embedded(
        url=server.url,
        api_key=api_key,
        org_slug=DEMO_ORG,
        server=server,
        receiver=receiver,
        worker=worker,
        db=db,
    )


def demo_admin(session: Session, *, org_id: str) -> MemberRow:
    """The member the console signs in as: the demo organization's admin."""
    found = session.scalar(
        select(MemberRow).where(MemberRow.org_id == org_id, MemberRow.email == DEMO_ADMIN_EMAIL)
    )
    if found is not None:
        return found
    first = CreateMember(org_slug=DEMO_ORG, email=DEMO_ADMIN_EMAIL, name="Avery Admin", role="admin")
    return create_member(session, org_id=org_id, request=first)


def _demo_key(db: Database, key_file: Path, url: str) -> str:
    """The demo org's key from the data directory, or a new one (and the org) written there, 0600.

    A key that no longer works (revoked, or the database was replaced) is replaced, not fatal.
    """
    if key_file.exists():
        key = key_file.read_text().strip()
        with OrgdeckClient(url, key, max_retries=0) as client:
            try:
                client.whoami()
                return key
            except Unauthorized:
                logger.warning("The saved demo key no longer works; issuing a new one")
    with db.session(write=True) as session:
        org = get_org(session, slug=DEMO_ORG) or create_org(session, slug=DEMO_ORG, name="Demo Organization")
        admin = demo_admin(session, org_id=org.id)
        key = create_key(session, org_id=org.id, name="console", role="admin", member=admin).value
    descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key + "\n")
    return key
