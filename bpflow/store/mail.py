"""The mailbox table: approval requests, in-site messages and guest notes. What a mail
means, how it is signed and who may decide it is `bpflow.mailbox`'s; this module only
reads and writes the rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from bpflow.store.accounts import Caller, reads_guest_mail
from bpflow.store.changes import mail_change
from bpflow.store.errors import Conflict, RateLimited
from bpflow.store.parts import StoreParts
from bpflow.store.tables import mail_t
from engine.messages import N_

MailRow = Any  # a row of the mailbox table


def visible_mail(caller: Caller, kind: str | None = None):
    """The SQL condition for the mail `caller` may read: their own, and guest messages
    (no addressee) for those who read them. With a `kind` other than guest, only their
    own (so a page of one kind stays the top of ix_mailbox_list). Guest messages are
    their tenant's only (SPEC §12)."""
    mine = mail_t.c.recipient_id == caller.id
    if reads_guest_mail(caller) and kind in (None, "guest"):
        mine = or_(mine, and_(mail_t.c.tenant == caller.tenant, mail_t.c.kind == "guest",
                              mail_t.c.recipient_id.is_(None)))
    return mine


class MailRows(StoreParts):
    """The store's mailbox rows (part of `Store`)."""

    def insert_mails(self, to: list[str], build: Callable[[str, int], dict[str, Any]],
                     attempt: dict[str, Any] | None = None) -> list[int]:
        """One mail per recipient, in one transaction: `build(name, recipient_id)` gives
        its column values. With `attempt` (instance_id, circle, epoch), a recipient who
        already has the attempt's mail keeps it (a retried worker sends nothing twice)."""
        ids, now = [], self.clock()
        with self.db.begin() as conn:
            users = self.user_ids(conn, to)
            for name in to:
                if attempt is not None:
                    existing = conn.execute(select(mail_t.c.id).where(
                        mail_t.c.instance_id == attempt["instance_id"],
                        mail_t.c.circle == attempt["circle"],
                        mail_t.c.epoch == attempt["epoch"],
                        mail_t.c.recipient_id == users[name])).scalar()
                    if existing is not None:
                        ids.append(existing)
                        continue
                try:
                    ids.append(conn.execute(insert(mail_t).values(
                        **build(name, users[name]), tenant=self._owner(), created_at=now)
                        .returning(mail_t.c.id)).scalar_one())
                except IntegrityError as exc:
                    raise Conflict(N_("the same request is being sent concurrently")) from exc
        self._told(users.values())
        return ids

    def _told(self, user_ids) -> None:
        """Tell the open inboxes of these people (None: guest messages' readers) that
        their mail changed (after the commit; `bpflow.store.changes`)."""
        self.changes.publish([mail_change(self._owner(), user_ids)])

    def insert_guest_mail(self, values: dict[str, Any], client: str, limit: int,
                          window: timedelta) -> int:
        """A guest message to this store's tenant, unless `client` sent it `limit` within
        `window` (RateLimited with the wait; counted per tenant and client): counted and
        inserted in one transaction, across processes."""
        now, tenant = self.clock(), self._owner()
        with self.db.begin() as conn:
            recent = conn.execute(select(func.count(), func.min(mail_t.c.created_at)).where(
                mail_t.c.tenant == tenant, mail_t.c.kind == "guest", mail_t.c.client == client,
                mail_t.c.created_at > now - window)).one()
            if recent[0] >= limit:
                wait = int((recent[1] + window - now).total_seconds()) + 1
                raise RateLimited(N_("too many messages; try again in %(n)s seconds", n=wait),
                                  wait)
            found = conn.execute(insert(mail_t).values(
                kind="guest", tenant=tenant, client=client, created_at=now, **values)
                .returning(mail_t.c.id)).scalar_one()
        self._told([None])
        return found

    def record_decision(self, mail_id: int, decision: str, comment: str,
                        sign: Callable[[MailRow], str]) -> None:
        """Store an undecided approval's decision and its signature (`sign(row)` of the
        row as decided); Conflict when someone decided it first."""
        now = self.clock()
        with self.db.begin() as conn:
            done = conn.execute(update(mail_t).where(
                self._here(mail_t), mail_t.c.id == mail_id, mail_t.c.decision.is_(None)).values(
                decision=decision, comment=comment or "", updated_at=now, read_at=now))
            if done.rowcount != 1:
                raise Conflict(N_("approval %(id)s was decided concurrently", id=mail_id))
            fresh = conn.execute(select(mail_t).where(mail_t.c.id == mail_id)).one()
            conn.execute(update(mail_t).where(mail_t.c.id == mail_id).values(
                decision_signature=sign(fresh)))
        self._told([fresh.recipient_id])

    def undo_decision(self, mail_id: int, decision: str) -> None:
        """Take back a decision `record_decision` just stored, whose step the store then
        refused (a tenant's variables quota): the approval is undecided again."""
        with self.db.begin() as conn:
            done = conn.execute(update(mail_t).where(
                self._here(mail_t), mail_t.c.id == mail_id, mail_t.c.decision == decision
            ).values(decision=None, comment=None, decision_signature=None,
                     updated_at=self.clock()).returning(mail_t.c.recipient_id)).all()
        self._told([r[0] for r in done])

    def mail(self, mail_id: int) -> MailRow | None:
        with self.reader() as conn:
            return conn.execute(select(mail_t).where(self._here(mail_t),
                                                     mail_t.c.id == mail_id)).first()

    def attempt_approvals(self, instance_id: str, circle: str, epoch: int) -> list[MailRow]:
        """The approval mails of one attempt of a circle."""
        with self.reader() as conn:
            return list(conn.execute(select(mail_t).where(
                self._here(mail_t), mail_t.c.instance_id == instance_id, mail_t.c.circle == circle,
                mail_t.c.epoch == epoch, mail_t.c.kind == "approval")).all())

    def open_approvals(self, instance_id: str) -> list[MailRow]:
        """The undecided approval mails of an instance, any circle, any attempt."""
        with self.reader() as conn:
            return list(conn.execute(select(mail_t).where(
                self._here(mail_t), mail_t.c.instance_id == instance_id,
                mail_t.c.kind == "approval",
                mail_t.c.decision.is_(None))).all())

    def mail_page(self, caller: Caller, kind: str | None, status: str | None, limit: int,
                  offset: int) -> list[MailRow]:
        """The caller's mail, newest first."""
        q = select(mail_t).where(visible_mail(caller, kind))
        if kind:
            q = q.where(mail_t.c.kind == kind)
        if status == "pending":
            q = q.where(mail_t.c.kind == "approval", mail_t.c.decision.is_(None))
        elif status == "decided":
            q = q.where(mail_t.c.decision.is_not(None))
        elif status == "unread":
            q = q.where(mail_t.c.read_at.is_(None))
        q = q.order_by(mail_t.c.created_at.desc(), mail_t.c.id.desc()).limit(limit).offset(offset)
        with self.reader() as conn:
            return list(conn.execute(q).all())

    def mark_mail_read(self, mail_id: int) -> None:
        with self.db.begin() as conn:
            done = conn.execute(update(mail_t).where(
                self._here(mail_t), mail_t.c.id == mail_id, mail_t.c.read_at.is_(None))
                .values(read_at=self.clock()).returning(mail_t.c.recipient_id)).all()
        if done:
            self._told([r[0] for r in done])
