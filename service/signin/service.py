"""Signing in with OpenID Connect tokens: a person's token from the company's identity provider
(ORGDECK_OIDC_ISSUER) acts as the member with its verified email, with the role their groups grant;
a CI job's own token acts as the trusted workload whose issuer, audience and claim conditions it
meets. Both are bearer credentials beside API keys (`authenticator` tries each by its shape).

Every token is a sign-in session from its first request on (its sign-in, on the audit trail) until
it expires or is signed out (POST /sign-out)."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.members import CreateMember, Member, role_at_least
from api.signin import CreateWorkloadIdentity, SignInSession, UpdateWorkloadIdentity, WorkloadIdentity
from service.api_keys.keys import is_well_formed
from service.errors import AlreadyExists, InvalidInput, NotFound, Unauthorized
from service.http.auth import Authenticated, Authenticator, Caller
from service.members import service as members
from service.members.models import MemberRow
from service.orgs.models import OrganizationRow
from service.outbound.urls import OutboundRefused, check_outbound_url, check_url_syntax
from service.settings import Settings
from service.signin.keysets import IssuerKeys
from service.signin.models import SignInSessionRow, WorkloadIdentityRow
from service.signin.tokens import (
    InvalidToken,
    Signatures,
    looks_like_jwt,
    unverified_claims,
    verified_claims,
)
from service.storage.db import Database, insert_unless_taken, utcnow
from service.trail.recording import record


@dataclass(frozen=True)
class Membership:
    """What a person's request needs of their membership and its organization."""

    id: str
    email: str
    name: str
    role: str
    org_id: str
    org_slug: str
    org_name: str
    group_roles: dict[str, str]
    sign_in_default_role: str


# Every request of a person looks their membership up: plain columns in one statement, built once.
_MEMBERSHIPS = (
    select(
        MemberRow.id,
        MemberRow.email,
        MemberRow.name,
        MemberRow.role,
        MemberRow.deactivated_at,
        OrganizationRow.id.label("org_id"),
        OrganizationRow.slug.label("org_slug"),
        OrganizationRow.name.label("org_name"),
        OrganizationRow.group_roles,
        OrganizationRow.sign_in_default_role,
    )
    .join(OrganizationRow, OrganizationRow.id == MemberRow.org_id)
    .where(MemberRow.email == bindparam("email"))
    .order_by(MemberRow.created_at, MemberRow.id)
)


# Every request of a workload looks its issuer's workloads up (kept without a trailing slash, which
# a token's iss may have): plain columns in one statement, built once.
_WORKLOADS = (
    select(
        WorkloadIdentityRow.id,
        WorkloadIdentityRow.name,
        WorkloadIdentityRow.audience,
        WorkloadIdentityRow.conditions,
        WorkloadIdentityRow.role,
        OrganizationRow.id.label("org_id"),
        OrganizationRow.slug.label("org_slug"),
        OrganizationRow.name.label("org_name"),
    )
    .join(OrganizationRow, OrganizationRow.id == WorkloadIdentityRow.org_id)
    .where(WorkloadIdentityRow.issuer == bindparam("issuer"))
    .order_by(WorkloadIdentityRow.created_at, WorkloadIdentityRow.id)
)


def authenticator(*, api_keys: Authenticator, tokens: Authenticator) -> Authenticator:
    """Each bearer credential to what reads its shape: an OpenID Connect token (a JWT) to `tokens`,
    anything else (an `odk_` key, or a malformed one) to `api_keys`."""

    def authenticate(session: Session, credential: str) -> Authenticated:
        if not is_well_formed(credential) and looks_like_jwt(credential):
            return tokens(session, credential)
        return api_keys(session, credential)

    return authenticate


class TokenAuthenticator:
    """Turns a verified token into its caller. Keeps the issuers' published keys for the process."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.company_issuer = (settings.oidc_issuer or "").rstrip("/")
        self.company_signatures = Signatures(
            IssuerKeys(
                timeout_seconds=settings.oidc_timeout_seconds,
                refresh_seconds=settings.oidc_jwks_refresh_seconds,
            )
        )
        # Workload issuers are an organization's choice: called only where outbound calls may go.
        self.workload_signatures = Signatures(
            IssuerKeys(
                timeout_seconds=settings.oidc_timeout_seconds,
                refresh_seconds=settings.oidc_jwks_refresh_seconds,
                check_url=lambda url: check_outbound_url(url, settings),
            )
        )

    def __call__(self, session: Session, credential: str) -> Authenticated:
        try:
            stated = unverified_claims(credential)
            caller = self._caller(session, credential, stated)
        except Unauthorized as refusal:
            return Authenticated(refusal=refusal)
        started = session.execute(
            select(SignInSessionRow.ended_at).where(SignInSessionRow.token_hash == caller.token_hash)
        ).one_or_none()
        if started is not None and started.ended_at is not None:
            return Authenticated(
                refusal=Unauthorized("This token was signed out; sign in again", code="signed_out")
            )
        afterwards = None if started is not None else functools.partial(record_sign_in, caller=caller)
        return Authenticated(caller=caller, afterwards=afterwards)

    def _caller(self, session: Session, token: str, stated: Mapping[str, Any]) -> Caller:
        """A token of the company's issuer for the service's audience is a person's; any other is
        a workload's, and one of the company's issuer that no workload trusts goes to the person's
        path, which says what is wrong with it."""
        issuer = stated["iss"].rstrip("/")
        company = issuer == self.company_issuer
        audience = stated.get("aud")
        if company and self.settings.oidc_audience in (
            audience if isinstance(audience, list) else [audience]
        ):
            return self._person(session, token)
        workloads = session.connection().execute(_WORKLOADS, {"issuer": issuer}).all()
        if not workloads and company:
            return self._person(session, token)
        return self._workload(token, stated["iss"], workloads)

    # -- people ---------------------------------------------------------------------------------

    def _person(self, session: Session, token: str) -> Caller:
        settings = self.settings
        claims = verified_claims(
            token,
            signatures=self.company_signatures,
            issuer=settings.oidc_issuer or "",
            audiences=[settings.oidc_audience or ""],
            skew_seconds=settings.oidc_clock_skew_seconds,
        )
        email = claims.get("email")
        if not isinstance(email, str) or "@" not in email:
            raise InvalidToken(
                "The token names no email address; ask the identity provider for the email scope"
            )
        if "email_verified" in claims and claims["email_verified"] is not True:
            raise Unauthorized(f"The identity provider has not verified {email}", code="email_unverified")
        membership = self._membership(session, email.lower(), claims)
        role = _granted_role(membership, claims.get(settings.oidc_groups_claim))
        return Caller(
            org_id=membership.org_id,
            org_slug=membership.org_slug,
            org_name=membership.org_name,
            key_id=membership.id,
            key_name=f"sign-in {membership.email}",
            role=role,
            key_role=role,
            member_id=membership.id,
            member_email=membership.email,
            member_name=membership.name,
            via="oidc",
            token_hash=token_hash(token),
            token_expires_at=_expiry(claims),
        )

    def _membership(self, session: Session, email: str, claims: Mapping[str, Any]) -> Membership:
        """The person's membership (the oldest, if several organizations have them), or one made now
        in an organization that provisions their domain; else 401 saying why."""
        rows = session.connection().execute(_MEMBERSHIPS, {"email": email}).all()
        for row in rows:
            if row.deactivated_at is None:
                return Membership(**{name: getattr(row, name) for name in Membership.__dataclass_fields__})
        if rows:
            raise Unauthorized(f"{email} has been removed from the organization", code="member_deactivated")
        domain = email.rpartition("@")[2]
        for org in session.scalars(select(OrganizationRow).order_by(OrganizationRow.created_at)):
            if domain in org.sign_in_domains:
                return self._provision(org.id, email, claims)
        raise Unauthorized(f"{email} is not a member of any organization here", code="unknown_member")

    def _provision(self, org_id: str, email: str, claims: Mapping[str, Any]) -> Membership:
        """Make the person a member with the organization's default sign-in role, on the audit trail
        as done by them."""
        with self.db.session(write=True) as session:
            org = session.get_one(OrganizationRow, org_id)
            name = claims.get("name") if isinstance(claims.get("name"), str) else email.partition("@")[0]
            request = CreateMember(
                org_slug=org.slug, email=email, name=name[:200], role=org.sign_in_default_role
            )
            try:
                member = members.create_member(session, org_id=org.id, request=request)
                newly = True
            except AlreadyExists:  # a concurrent first request made it
                member = session.scalars(
                    select(MemberRow).where(MemberRow.org_id == org_id, MemberRow.email == email)
                ).one()
                newly = False
            membership = Membership(
                id=member.id,
                email=member.email,
                name=member.name,
                role=member.role,
                org_id=org.id,
                org_slug=org.slug,
                org_name=org.name,
                group_roles=org.group_roles,
                sign_in_default_role=org.sign_in_default_role,
            )
            if newly:
                actor = Caller(
                    org_id=org.id,
                    org_slug=org.slug,
                    org_name=org.name,
                    key_id=member.id,
                    key_name=f"sign-in {email}",
                    role=member.role,
                    key_role=member.role,
                    member_id=member.id,
                    member_email=email,
                    member_name=member.name,
                    via="oidc",
                )
                record(
                    session,
                    actor=actor,
                    action="provisionMember",
                    result=Member.model_validate(member),
                    arguments={},
                    request_id=None,
                )
            return membership

    # -- workloads ------------------------------------------------------------------------------

    def _workload(self, token: str, issuer: str, workloads: Sequence[Row[Any]]) -> Caller:
        """The first of `workloads` (the issuer's, oldest first) whose audience and conditions the
        token meets."""
        if not workloads:
            raise InvalidToken(f"Tokens of '{issuer}' are not trusted here")
        claims = verified_claims(
            token,
            # The company's issuer is the operator's: its keys are fetched as for people.
            signatures=self.company_signatures
            if issuer.rstrip("/") == self.company_issuer
            else self.workload_signatures,
            issuer=issuer,
            audiences=sorted({workload.audience for workload in workloads}),
            skew_seconds=self.settings.oidc_clock_skew_seconds,
        )
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        for workload in workloads:
            if workload.audience in audiences and all(_holds(c, claims) for c in workload.conditions):
                matched = {c["claim"]: claims[c["claim"]] for c in workload.conditions}
                return Caller(
                    org_id=workload.org_id,
                    org_slug=workload.org_slug,
                    org_name=workload.org_name,
                    key_id=workload.id,
                    key_name=workload.name,
                    role=workload.role,
                    key_role=workload.role,
                    via="workload",
                    claims={"sub": claims.get("sub"), **matched},
                    token_hash=token_hash(token),
                    token_expires_at=_expiry(claims),
                )
        raise Unauthorized(
            "The token's claims meet the conditions of no trusted workload", code="workload_not_trusted"
        )


def _holds(condition: Mapping[str, str], claims: Mapping[str, Any]) -> bool:
    value = claims.get(condition["claim"])
    if not isinstance(value, str | int | bool):
        return False
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if condition.get("equals") is not None:
        return text == condition["equals"]
    return fnmatch.fnmatchcase(text, condition["matches"])


def _granted_role(membership: Membership, groups: object) -> str:
    """The member's role; with a group mapping, the highest role their groups grant now (the
    default sign-in role when none does)."""
    if not membership.group_roles:
        return membership.role
    best = membership.sign_in_default_role
    for group in groups if isinstance(groups, list) else []:
        granted = membership.group_roles.get(group) if isinstance(group, str) else None
        if granted is not None and role_at_least(granted, best):
            best = granted
    return best


def _expiry(claims: Mapping[str, Any]) -> datetime:
    return datetime.fromtimestamp(int(claims["exp"]), tz=UTC)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- sign-in sessions ---------------------------------------------------------------------------


def record_sign_in(session: Session, *, caller: Caller) -> None:
    """The token's first request: its session starts, and the sign-in is on the audit trail."""
    row = SignInSessionRow(
        org_id=caller.org_id,
        token_hash=caller.token_hash,
        member_id=caller.member_id,
        workload_id=caller.key_id if caller.via == "workload" else None,
        expires_at=caller.token_expires_at,
    )
    if insert_unless_taken(session, row):
        record(
            session,
            actor=caller,
            action="signIn",
            result=SignInSession.model_validate(row),
            arguments={},
            request_id=None,
        )


def sign_out(session: Session, *, caller: Caller) -> SignInSession:
    """End the session of the caller's token: the token is refused from now on."""
    if caller.token_hash is None:
        raise InvalidInput(
            "An API key has no session to sign out of; revoke the key instead", code="not_signed_in"
        )
    # The token's sign-in is recorded after its first answer: this may come first.
    record_sign_in(session, caller=caller)
    row = session.scalars(
        select(SignInSessionRow).where(SignInSessionRow.token_hash == caller.token_hash).with_for_update()
    ).one()
    row.ended_at = utcnow()
    session.flush()
    return SignInSession.model_validate(row)


# -- trusted workloads --------------------------------------------------------------------------


def create_workload(
    session: Session, *, org_id: str, request: CreateWorkloadIdentity, settings: Settings
) -> WorkloadIdentityRow:
    _check_issuer(request.issuer, settings)
    row = WorkloadIdentityRow(
        org_id=org_id,
        name=request.name,
        issuer=request.issuer.rstrip("/"),
        audience=request.audience,
        conditions=[c.model_dump(exclude_none=True) for c in request.conditions],
        role=request.role,
    )
    if not insert_unless_taken(session, row):
        raise AlreadyExists(f"A trusted workload named '{request.name}' already exists", field="name")
    return row


def list_workloads(session: Session, *, org_id: str) -> list[WorkloadIdentityRow]:
    return list(
        session.scalars(
            select(WorkloadIdentityRow)
            .where(WorkloadIdentityRow.org_id == org_id)
            .order_by(WorkloadIdentityRow.name)
        )
    )


def get_workload(session: Session, *, org_id: str, workload_id: str) -> WorkloadIdentityRow:
    row = session.scalar(
        select(WorkloadIdentityRow).where(
            WorkloadIdentityRow.id == workload_id, WorkloadIdentityRow.org_id == org_id
        )
    )
    if row is None:
        raise NotFound(f"No trusted workload '{workload_id}' in this organization", field="workloadId")
    return row


def update_workload(
    session: Session, *, org_id: str, workload_id: str, request: UpdateWorkloadIdentity, settings: Settings
) -> WorkloadIdentityRow:
    row = get_workload(session, org_id=org_id, workload_id=workload_id)
    changes = request.model_dump(exclude_unset=True, exclude={"org_slug"}, by_alias=False)
    if "issuer" in changes:
        _check_issuer(changes["issuer"], settings)
        changes["issuer"] = changes["issuer"].rstrip("/")
    if "conditions" in changes:
        changes["conditions"] = [c.model_dump(exclude_none=True) for c in request.conditions or []]
    for field, value in changes.items():
        if getattr(row, field) != value:
            setattr(row, field, value)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(f"A trusted workload named '{row.name}' already exists", field="name") from exc
    return row


def delete_workload(session: Session, *, org_id: str, workload_id: str) -> WorkloadIdentity:
    row = get_workload(session, org_id=org_id, workload_id=workload_id)
    answer = WorkloadIdentity.model_validate(row)
    session.delete(row)
    session.flush()
    return answer


def _check_issuer(issuer: str, settings: Settings) -> None:
    try:
        check_url_syntax(issuer)
        check_outbound_url(issuer, settings)
    except OutboundRefused as exc:
        raise InvalidInput(str(exc), field="issuer") from exc
