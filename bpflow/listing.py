"""Read-only listings the web app pages need beside the store's own: the last step of
instances, an instance's change counter, mailbox counts per kind, and the users.

Plain queries on the store's tables (no engine step), each answering in a couple of
statements however many rows there are.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, or_, select

from bpflow.models import EventRow, InstanceRow, Mail, User
from bpflow.store import Store

instances_t = InstanceRow.__table__
events_t = EventRow.__table__
mail_t = Mail.__table__
users_t = User.__table__
STEP_EVENTS = ("circle_succeeded", "circle_failed", "circle_skipped", "circle_reset",
               "circle_retry_scheduled", "circle_pending", "circle_ready")


def last_steps(store: Store, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest circle event (circle, kind, at) of each instance."""
    if not ids:
        return {}
    newest = (select(events_t.c.instance_id, func.max(events_t.c.seq).label("seq"))
              .where(events_t.c.instance_id.in_(ids), events_t.c.kind.in_(STEP_EVENTS))
              .group_by(events_t.c.instance_id).subquery())
    q = select(events_t.c.instance_id, events_t.c.circle, events_t.c.kind,
               events_t.c.at).join(newest, and_(events_t.c.instance_id == newest.c.instance_id,
                                                events_t.c.seq == newest.c.seq))
    with store._read() as conn:
        return {r.instance_id: {"circle": r.circle, "kind": r.kind, "at": r.at}
                for r in conn.execute(q)}


def instance_stamp(store: Store, instance_id: str) -> tuple[int, str] | None:
    """(event counter, status) of an instance: what a page polls to see a change."""
    q = select(instances_t.c.seq, instances_t.c.status).where(instances_t.c.id == instance_id)
    with store._read() as conn:
        row = conn.execute(q).first()
    return (row.seq, row.status) if row else None


def mail_about(store: Store, user_id: int | None, instance_id: str) -> bool:
    """Whether the user was sent mail about the instance (an approver may look at it)."""
    q = select(mail_t.c.id).where(mail_t.c.recipient_id == user_id,
                                  mail_t.c.instance_id == instance_id).limit(1)
    with store._read() as conn:
        return conn.execute(q).first() is not None


def _visible_mail(user: dict[str, Any]):
    mine = mail_t.c.recipient_id == user.get("id")
    if "admin" in user.get("roles", []):
        mine = or_(mine, and_(mail_t.c.kind == "guest", mail_t.c.recipient_id.is_(None)))
    return mine


def mail_counts(store: Store, user: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per mail kind the user can see: {"total", "unread", "pending"} (pending: approvals
    not yet decided)."""
    q = (select(mail_t.c.kind, func.count(),
                func.sum(case((mail_t.c.read_at.is_(None), 1), else_=0)),
                func.sum(case((and_(mail_t.c.kind == "approval",
                                    mail_t.c.decision.is_(None)), 1), else_=0)))
         .where(_visible_mail(user)).group_by(mail_t.c.kind))
    out = {k: {"total": 0, "unread": 0, "pending": 0} for k in ("approval", "message", "guest")}
    with store._read() as conn:
        for kind, total, unread, pending in conn.execute(q):
            out[kind] = {"total": int(total), "unread": int(unread or 0),
                         "pending": int(pending or 0)}
    return out


def users(store: Store) -> list[dict[str, Any]]:
    """Every user with their roles, by name (never a password hash)."""
    q = select(users_t.c.id, users_t.c.username, users_t.c.roles,
               users_t.c.created_at).order_by(users_t.c.username)
    with store._read() as conn:
        return [{"id": r.id, "username": r.username, "roles": list(r.roles),
                 "created_at": r.created_at} for r in conn.execute(q)]
