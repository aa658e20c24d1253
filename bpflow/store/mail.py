"""The mailbox table: approval requests, in-site messages and guest notes. What a mail
means, how it is signed and who may decide it is `bpflow.mailbox`'s; this module only
reads and writes the rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal, get_args

from sqlalchemy import and_, bindparam, exists, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from bpflow.store import statements as sql
from bpflow.store.accounts import Caller, acting_for, reads_guest_mail, standing
from bpflow.store.alchemy import AlchemyTx
from bpflow.store.changes import mail_change
from bpflow.store.errors import Conflict, RateLimited
from bpflow.store.parts import StoreParts
from bpflow.store.reads import straight
from bpflow.store.tables import instances_t, mail_t, users_t
from engine.errors import BpflowError
from engine.messages import N_

if TYPE_CHECKING:
    from bpflow.store.steps import Op
    from bpflow.store.writing import Tx

MailRow = Any  # a row of the mailbox table
# what `change_round`'s plan gives: (mail id, new values) of rows, names to send new
# mail to and how to build it
RoundPlan = tuple[list[tuple[int, dict[str, Any]]], list[str],
                  Callable[[str, int], dict[str, Any]] | None]
# the kinds of mail, the one list of them (the API's schemas and the inbox name them from
# here): approval requests, in-site messages, guest notes, copies (SPEC §15 抄送) and urges
# (催办, from a person or a circle's `remind`)
MailKind = Literal["approval", "message", "guest", "cc", "urge"]
MAIL_KINDS: tuple[str, ...] = get_args(MailKind)
_TENANT = mail_t.c.tenant == bindparam("b_tenant")
# a mail by id, and the approval mails of one attempt of a circle (oldest first), of any
# tenant (the view of every tenant) or of this store's: reads on the decision's path
_MAIL = select(mail_t).where(mail_t.c.id == bindparam("b_id"))
MAIL = {False: straight(_MAIL), True: straight(_MAIL.where(_TENANT))}
_OF_ATTEMPT = (mail_t.c.instance_id == bindparam("b_instance_id"),
               mail_t.c.circle == bindparam("b_circle"),
               mail_t.c.epoch == bindparam("b_epoch"), mail_t.c.kind == "approval")
_ATTEMPT = select(mail_t).where(*_OF_ATTEMPT).order_by(mail_t.c.id)
ATTEMPT = {False: straight(_ATTEMPT), True: straight(_ATTEMPT.where(_TENANT))}
# how many of one attempt's approval mails are approved and rejected (not verified: at
# most what counts), for a decision to tell that its round cannot settle yet
_DECIDED = select(func.count().filter(mail_t.c.decision == "approved").label("approved"),
                  func.count().filter(mail_t.c.decision == "rejected").label("rejected")
                  ).where(*_OF_ATTEMPT)
DECIDED = {False: straight(_DECIDED), True: straight(_DECIDED.where(_TENANT))}
SEALED = {here: straight(sql.mail_decision_sealed[here]) for here in (False, True)}
# whether a round could settle with at most so many approvals and rejections
Could = Callable[[int, int], bool]
# what settles a round with its last decision (`record_decision`'s `then`): given the
# attempt's mails as they are with it, the step to take in the same transaction, or None
Settling = Callable[[list[Any]], "Op[Any] | None"]


def _with(row: MailRow, **values: Any) -> MailRow:
    """A mail row with some of its columns' values replaced (a copy)."""
    return SimpleNamespace(**{**row._asdict(), **values})


def _attempt(row: MailRow, tenant: str | None) -> dict[str, Any]:
    """The values of `ATTEMPT` for the attempt of the mail `row`."""
    return {"instance_id": row.instance_id, "circle": row.circle, "epoch": row.epoch,
            "tenant": tenant}


def visible_mail(caller: Caller, kind: str | None = None, now: datetime | None = None):
    """The SQL condition for the mail `caller` may read: their own, and guest messages
    (no addressee) for those who read them. With a `kind` other than guest, only their
    own (so a page of one kind stays the top of ix_mailbox_list). Guest messages are
    their tenant's only (SPEC §12). At `now`, also the approvals of whom they stand in
    for (`substituted_mail`)."""
    mine = mail_t.c.recipient_id == caller.id
    if reads_guest_mail(caller) and kind in (None, "guest"):
        mine = or_(mine, and_(mail_t.c.tenant == caller.tenant, mail_t.c.kind == "guest",
                              mail_t.c.recipient_id.is_(None)))
    if now is not None and kind in (None, "approval"):
        mine = or_(mine, *substituted_mail(caller, now))
    return mine


def substituted_mail(caller: Caller, now: datetime) -> list[Any]:
    """The SQL conditions for the approval mail of the people the caller is the
    substitute of now (SPEC §15): undecided, or decided by the caller for them; of the
    templates the substitution names, if it names some."""
    out = []
    for one in standing(caller, now, any_template=True):
        cond = and_(mail_t.c.recipient_id == one.user_id, mail_t.c.kind == "approval",
                    or_(mail_t.c.decision.is_(None),
                        mail_t.c.decided_by == acting_for(caller.username, one.username)))
        if one.templates is not None:
            cond = and_(cond, exists().where(instances_t.c.id == mail_t.c.instance_id,
                                             instances_t.c.template.in_(one.templates)))
        out.append(cond)
    return out


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

    def insert_mail_batch(self, batch: list[tuple[list[str], Callable[[str, int],
                                                                      dict[str, Any]]]]
                          ) -> None:
        """The mail of several sends (each its recipients and `build`, as `insert_mails`
        takes them) in one transaction, none of them kept once per attempt (urges)."""
        names = list(dict.fromkeys(n for to, _ in batch for n in to))
        if not names:
            return
        now, tenant = self.clock(), self._owner()
        with self.db.begin() as conn:
            users = self.user_ids(conn, names)
            conn.execute(insert(mail_t), [{**build(n, users[n]), "tenant": tenant,
                                           "created_at": now} for to, build in batch
                                          for n in to])
        self._told(users.values())

    def _told(self, user_ids, tenant: str | None = None) -> None:
        """Tell the open inboxes of these people (None: guest messages' readers) of
        `tenant` (default: this store's own) that their mail changed (after the commit;
        `bpflow.store.changes`). The view of every tenant names the rows' tenant."""
        self.changes.publish([mail_change(tenant if tenant is not None else self._owner(),
                                          user_ids)])

    def insert_copies(self, instance_id: str, circle: str | None, to: list[str],
                      build: Callable[[str, int], dict[str, Any]]) -> list[str]:
        """One copy (mail of kind `cc`) per recipient who has none of this instance and
        circle (None: an ad hoc copy) yet, in one transaction; the names it went to. A
        copy sent concurrently is found on a second try (`uq_mailbox_cc`)."""
        for attempt in range(2):
            try:
                return self._insert_copies(instance_id, circle, to, build)
            except IntegrityError as exc:
                if attempt:
                    raise Conflict(N_("the same copy is being sent concurrently")) from exc
        return []

    def _insert_copies(self, instance_id: str, circle: str | None, to: list[str],
                       build: Callable[[str, int], dict[str, Any]]) -> list[str]:
        now = self.clock()
        with self.db.begin() as conn:
            users = self.user_ids(conn, to)
            have = set(conn.execute(select(mail_t.c.recipient_id).where(
                self._here(mail_t), mail_t.c.kind == "cc", mail_t.c.instance_id == instance_id,
                func.coalesce(mail_t.c.circle, "") == (circle or ""),
                mail_t.c.recipient_id.in_(list(users.values())))).scalars())
            sent = [name for name in to if users[name] not in have]
            for name in sent:
                conn.execute(insert(mail_t).values(**build(name, users[name]),
                                                   tenant=self._owner(), created_at=now))
        self._told([users[n] for n in sent])
        return sent

    def copies(self, instance_id: str) -> list[dict[str, Any]]:
        """Who was copied on an instance, oldest first: {"user", "circle", "sent_at",
        "read_at"}."""
        q = (select(users_t.c.username, mail_t.c.circle, mail_t.c.created_at,
                    mail_t.c.read_at)
             .join(users_t, users_t.c.id == mail_t.c.recipient_id)
             .where(self._here(mail_t), mail_t.c.instance_id == instance_id,
                    mail_t.c.kind == "cc")
             .order_by(mail_t.c.created_at, mail_t.c.id))
        with self.reader() as conn:
            return [{"user": r.username, "circle": r.circle, "sent_at": r.created_at,
                     "read_at": r.read_at} for r in conn.execute(q)]

    def read_copies(self, instance_id: str, user_id: int) -> None:
        """The user opened the instance: their unread copies of it are read."""
        with self.db.begin() as conn:
            conn.execute(update(mail_t).where(
                self._here(mail_t), mail_t.c.instance_id == instance_id,
                mail_t.c.recipient_id == user_id, mail_t.c.kind == "cc",
                mail_t.c.read_at.is_(None)).values(read_at=self.clock()))

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
                        sign: Callable[[MailRow], str], asked: MailRow | None = None,
                        by: str | None = None, then: Settling | None = None,
                        could: Could | None = None) -> tuple[bool, MailRow | None]:
        """Store an undecided approval's decision, who took it (`by`: the addressee, or
        "ann for bob") and its signature (`sign(row)` of the row as decided); Conflict
        when someone decided it first, or (`asked`: the mail as its decider read it) when
        it was signed anew meanwhile.

        With `then`, in the same transaction: the approval mails of its attempt, read
        as they are with this decision (none of them changes until it ends: SQLite's
        write lock, PostgreSQL's row locks), are given to `then`, which gives the step
        they settle, or None; that step runs on the instance (the cached copy, else read)
        and is written with it, one commit. True when it was, or there was
        none; False when it could not be (the copy was stale, or the step refused on
        it): the decision is stored and the caller takes the step on its own (`apply`).
        An error of the step's write (a quota) stores nothing. With it, the mail as
        the transaction left it, signed (with `then`; else None: read it again).

        With `asked` and `then`, the decision is signed ahead, over the row `asked` as
        decided, and stored with its signature in one statement; the attempt's mails
        read after it show the row as stored, signed again only if it reads back
        otherwise. With `could` too, the attempt's approvals and rejections are counted
        first: when `could(approved, rejected)` says so many cannot settle the round,
        its mails are not read nor given to `then` (verified decisions are never more
        than the count), only the decided row is read back."""
        now, here = self.clock(), self.tenant is not None
        key = {"id": mail_id, "tenant": self.tenant}
        values = {**key, "signature": asked.signature if asked is not None else None,
                  "decision": decision, "comment": comment or "", "updated_at": now,
                  "read_at": now, "decided_by": by}
        stepped: list[Any] = []  # the step written, and when its transaction began
        ahead = asked is not None and then is not None
        if ahead:
            values["decision_signature"] = sign(_with(
                asked, decision=decision, comment=values["comment"], updated_at=now,
                read_at=now, decided_by=by))

        def work(tx: Tx) -> tuple[MailRow, bool, MailRow | None]:
            began = time.perf_counter()
            if then is not None and tx.locks:  # the attempt's mails held to the end
                for row in tx.rows(MAIL[here], key):
                    tx.rows(ATTEMPT[here], _attempt(row, self.tenant), lock=True)
            if ahead:
                [fresh] = tx.rows(SEALED[here], values) or [None]
            elif tx.run(sql.mail_decision[here, asked is not None], values) == 1:
                [fresh] = tx.rows(MAIL[here], key)
            else:
                fresh = None
            if fresh is None:
                raise Conflict(N_("approval %(id)s was decided concurrently", id=mail_id))
            signature = sign(fresh)  # over the row as it reads back
            if not ahead or signature != fresh.decision_signature:
                tx.run(sql.mail_signed, {"id": mail_id, "decision_signature": signature})
                fresh = _with(fresh, decision_signature=signature)
            if then is None:
                return fresh, True, None
            if could is not None:
                [counted] = tx.rows(DECIDED[here], _attempt(fresh, self.tenant))
                if not could(counted.approved, counted.rejected):
                    return fresh, True, fresh  # cannot settle: the others left unread
            rows = [fresh if r.id == mail_id else r
                    for r in tx.rows(ATTEMPT[here], _attempt(fresh, self.tenant))]
            op = then(rows)
            if op is None:
                return fresh, True, fresh
            write = self._settled_with(tx, fresh.instance_id, op)
            if write is None:
                return fresh, False, fresh
            stepped[:] = [write, began]
            return fresh, True, fresh
        fresh, done, decided = self.driver.transact(work)
        self._told([fresh.recipient_id], fresh.tenant)
        if stepped:
            self._written([stepped[0]], time.perf_counter() - stepped[1])
        return done, decided

    def _settled_with(self, tx: Tx, instance_id: str, op: Op[Any]) -> Any:
        """The write of `op`'s step on the instance, written in `tx`; None when its copy
        was stale (the compare-and-set lost) or the step refused on it."""
        with self._step_span(instance_id):
            try:
                loaded = self._take(instance_id) or self._load(instance_id, tx.connection)
                op(self.engine, loaded.inst)
            except BpflowError:
                return None  # perhaps refused on a stale copy: decided again on its own
            write = self._step_write(loaded, loaded.inst.drain_events())
            return None if tx.save([write]) else write

    def change_round(self, instance_id: str, circle: str, epoch: int,
                     plan: Callable[[list[MailRow]], RoundPlan],
                     sign: Callable[[MailRow], str]) -> list[int]:
        """Change the approval mails of one attempt in one transaction, its rows locked
        from read to write (PostgreSQL `FOR UPDATE`; SQLite's `BEGIN IMMEDIATE` excludes
        writers): `plan(rows)` gives the new values of some rows (by id) and the names
        to send new mail to with how to build it (`insert_mails`), or raises to change
        nothing. A decided row changed gets its decision signed again (`sign`). The ids
        of the new mails."""
        ids, now = [], self.clock()
        attempt = {"instance_id": instance_id, "circle": circle, "epoch": epoch,
                   "tenant": self.tenant}
        with self.db.begin() as conn:
            rows = AlchemyTx(conn).rows(ATTEMPT[self.tenant is not None], attempt, lock=True)
            updates, to, build = plan(rows)
            for mail_id, values in updates:
                conn.execute(update(mail_t).where(mail_t.c.id == mail_id).values(**values))
                fresh = conn.execute(select(mail_t).where(mail_t.c.id == mail_id)).one()
                if fresh.decision is not None:
                    conn.execute(update(mail_t).where(mail_t.c.id == mail_id).values(
                        decision_signature=sign(fresh)))
            if to and build is not None:
                users = self.user_ids(conn, to)
                for name in to:
                    ids.append(conn.execute(insert(mail_t).values(
                        **build(name, users[name]), tenant=self._owner(), created_at=now)
                        .returning(mail_t.c.id)).scalar_one())
        # the round's people see its change (new mail, a closed one) in an open inbox
        if rows:
            self._told([r.recipient_id for r in rows] + [users[n] for n in (to or ())
                                                         if build is not None], rows[0].tenant)
        return ids

    def undo_decision(self, mail_id: int, decision: str) -> None:
        """Take back a decision `record_decision` just stored, whose step the store then
        refused (a tenant's variables quota): the approval is undecided again."""
        with self.db.begin() as conn:
            done = conn.execute(update(mail_t).where(
                self._here(mail_t), mail_t.c.id == mail_id, mail_t.c.decision == decision
            ).values(decision=None, comment=None, decision_signature=None, decided_by=None,
                     updated_at=self.clock()).returning(mail_t.c.recipient_id,
                                                        mail_t.c.tenant)).all()
        if done:
            self._told([r[0] for r in done], done[0][1])

    def mail(self, mail_id: int) -> MailRow | None:
        found = self._rows(MAIL[self.tenant is not None], {"id": mail_id, "tenant": self.tenant})
        return found[0] if found else None

    def attempt_approvals(self, instance_id: str, circle: str, epoch: int) -> list[MailRow]:
        """The approval mails of one attempt of a circle, oldest first."""
        return self._rows(ATTEMPT[self.tenant is not None],
                          {"instance_id": instance_id, "circle": circle, "epoch": epoch,
                           "tenant": self.tenant})

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
        q = select(mail_t).where(visible_mail(caller, kind, self.clock()))
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
                .values(read_at=self.clock()).returning(mail_t.c.recipient_id,
                                                        mail_t.c.tenant)).all()
        if done:
            self._told([r[0] for r in done], done[0][1])
