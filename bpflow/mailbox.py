"""The mailbox: approval requests signed with HMAC-SHA256, in-site messages, guest notes.

An approval mail carries a payload (instance, circle, attempt, requester, approver,
subject, body, the data shown, quorum) and its signature; a decision is signed over the
mail's signature, so altering either the mail or the decision row breaks a signature.
Deciding re-checks the mail; when the flow re-enters (`settle`) every decided mail of the
attempt is checked again before the quorum is counted, as the seed describes. Altered
mail is refused and the refusal recorded in the instance's history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from bpflow.errors import Conflict, Forbidden, NotFound, RateLimited, Tampered
from bpflow.models import Mail, User
from bpflow.security import derive
from bpflow.store import Store
from engine.instance import WAITING

mail_t = Mail.__table__
users_t = User.__table__
GUEST_LIMITS = {"name": 80, "subject": 200, "body": 5000}
GUEST_RATE = (5, timedelta(minutes=10))  # messages per client per window


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Mailbox:
    def __init__(self, store: Store):
        self.store = store
        self.key = derive(store.secret, "approvals")
        self.guest_key = derive(store.secret, "guest-clients")

    # ------------------------------------------------------------ signatures
    def sign(self, payload: dict[str, Any]) -> str:
        return hmac.new(self.key, canonical(payload), hashlib.sha256).hexdigest()

    def _decision_signature(self, row) -> str:
        return self.sign({"mail": row.id, "signature": row.signature, "decision": row.decision,
                          "comment": row.comment, "decided_at": row.updated_at.isoformat()
                          if row.updated_at else None})

    def check(self, row) -> str | None:
        """Why this approval mail cannot be trusted, or None when it is intact."""
        payload = row.payload or {}
        if not row.signature or not hmac.compare_digest(self.sign(payload), row.signature):
            return "the mail does not match its signature"
        columns = {"instance": row.instance_id, "circle": row.circle, "epoch": row.epoch,
                   "subject": row.subject, "body": row.body, "kind": row.kind,
                   "recipient_id": row.recipient_id, "sender_id": row.sender_id}
        if any(payload.get(k) != v for k, v in columns.items()):
            return "the mail was altered after it was signed"
        if row.decision is not None:
            if row.decision not in ("approved", "rejected") or not row.decision_signature or \
                    not hmac.compare_digest(self._decision_signature(row),
                                            row.decision_signature):
                return "the decision does not match its signature"
        return None

    # -------------------------------------------------------------- sending
    def _user_ids(self, conn, names: list[str]) -> dict[str, int]:
        rows = conn.execute(select(users_t.c.username, users_t.c.id)
                            .where(users_t.c.username.in_(names))).all()
        found = dict(rows)
        missing = [n for n in names if n not in found]
        if missing:
            raise NotFound(f"no user named {', '.join(missing)}")
        return found

    def send(self, kind: str, sender: dict[str, Any], to: list[str], subject: str, body: str,
             *, instance: str | None = None, circle: str | None = None,
             epoch: int | None = None, payload_extra: dict[str, Any] | None = None
             ) -> list[int]:
        """Insert one mail per recipient (idempotent per attempt and recipient)."""
        now = self.store.clock()
        ids = []
        with self.store.db.begin() as conn:
            users = self._user_ids(conn, to)
            for name in to:
                existing = conn.execute(select(mail_t.c.id).where(
                    mail_t.c.instance_id == instance, mail_t.c.circle == circle,
                    mail_t.c.epoch == epoch, mail_t.c.recipient_id == users[name])).scalar() \
                    if instance else None
                if existing is not None:  # a retried worker sends nothing twice
                    ids.append(existing)
                    continue
                payload = {"kind": kind, "instance": instance, "circle": circle, "epoch": epoch,
                           "requester": sender.get("username"), "sender_id": sender.get("id"),
                           "approver": name, "recipient_id": users[name],
                           "subject": subject, "body": body, **(payload_extra or {})}
                try:
                    ids.append(conn.execute(insert(mail_t).values(
                        kind=kind, sender_id=sender.get("id"),
                        sender_name=sender.get("username") or "bpflow", recipient_id=users[name],
                        subject=subject, body=body, payload=payload,
                        signature=self.sign(payload) if kind == "approval" else None,
                        instance_id=instance, circle=circle, epoch=epoch,
                        created_at=now)).inserted_primary_key[0])
                except IntegrityError as exc:
                    raise Conflict("the same request is being sent concurrently") from exc
        return ids

    def guest_message(self, name: str, subject: str, body: str, client: str) -> int:
        """A note from someone without an account; goes to every admin's inbox."""
        fields = {"name": name, "subject": subject, "body": body}
        errors = {k: f"{k} is required" for k, v in fields.items()
                  if not isinstance(v, str) or not v.strip()}
        errors |= {k: f"{k} must be at most {GUEST_LIMITS[k]} characters"
                   for k, v in fields.items() if isinstance(v, str) and len(v) > GUEST_LIMITS[k]}
        if errors:
            from bpflow.forms import FormError
            raise FormError(errors)
        hashed = hmac.new(self.guest_key, client.encode(), hashlib.sha256).hexdigest()
        limit, window = GUEST_RATE
        now = self.store.clock()
        with self.store.db.begin() as conn:
            recent = conn.execute(select(func.count(), func.min(mail_t.c.created_at)).where(
                mail_t.c.kind == "guest", mail_t.c.client == hashed,
                mail_t.c.created_at > now - window)).one()
            if recent[0] >= limit:
                wait = int((recent[1] + window - now).total_seconds()) + 1
                raise RateLimited(f"too many messages; try again in {wait} seconds", wait)
            return conn.execute(insert(mail_t).values(
                kind="guest", sender_name=name.strip(), subject=subject.strip(), body=body,
                client=hashed, created_at=now)).inserted_primary_key[0]

    # ------------------------------------------------------------- deciding
    def decide(self, mail_id: int, user: dict[str, Any], decision: str,
               comment: str = "") -> dict[str, Any]:
        if decision not in ("approved", "rejected"):
            raise ValueError("decision must be 'approved' or 'rejected'")
        row = self._row(mail_id)
        if row is None or row.kind != "approval":
            raise NotFound(f"no approval mail {mail_id}")
        if row.recipient_id != user.get("id"):
            raise Forbidden("only the addressee may decide this approval")
        problem = self.check(row)
        if problem:
            self._record(row, "approval_refused", {"mail": mail_id, "why": problem,
                                                    "by": user.get("username")})
            raise Tampered(f"approval {mail_id} refused: {problem}")
        if row.decision is not None:
            raise Conflict(f"approval {mail_id} was already {row.decision}")
        inst = self.store.get(row.instance_id)
        run = inst.circles.get(row.circle)
        if run is None or run.state != WAITING or run.epoch != row.epoch or not run.pending:
            raise Conflict("this approval request is no longer open")
        now = self.store.clock()
        with self.store.db.begin() as conn:
            done = conn.execute(update(mail_t).where(
                mail_t.c.id == mail_id, mail_t.c.decision.is_(None)).values(
                decision=decision, comment=comment or "", updated_at=now, read_at=now))
            if done.rowcount != 1:
                raise Conflict(f"approval {mail_id} was decided concurrently")
            fresh = conn.execute(select(mail_t).where(mail_t.c.id == mail_id)).one()
            conn.execute(update(mail_t).where(mail_t.c.id == mail_id).values(
                decision_signature=self._decision_signature(fresh)))
        self.settle(row.instance_id, row.circle)
        return self.describe(self._row(mail_id))

    def settle(self, instance_id: str, circle: str) -> str | None:
        """Count the verified decisions of the circle's current attempt against its quorum;
        complete or fail the circle when the outcome is certain."""
        def op(engine, inst):
            run = inst.circles[circle]
            if run.state != WAITING or not run.pending or "approval" not in run.pending:
                return None
            info = run.pending["approval"]
            with self.store._read() as conn:
                rows = conn.execute(select(mail_t).where(
                    mail_t.c.instance_id == instance_id, mail_t.c.circle == circle,
                    mail_t.c.epoch == run.epoch, mail_t.c.kind == "approval")).all()
            decided = []
            for row in rows:
                problem = self.check(row)
                if problem:
                    engine.record(inst, "approval_refused", circle,
                                  {"mail": row.id, "why": problem})
                elif row.decision:
                    decided.append(row)
            verdict = quorum_verdict(info["quorum"], len(info["approvers"]),
                                     [r.decision for r in decided])
            if verdict is None:
                return None
            mark = engine.bookmark(inst, circle)
            decisions = [{"approver": r.payload["approver"], "decision": r.decision,
                          "comment": r.comment} for r in decided]
            if verdict == "approved":
                engine.complete(inst, circle, mark, {"approved": True, "decisions": decisions},
                                actor="approval")
            else:
                why = "; ".join(f"{d['approver']} rejected" + (f": {d['comment']}"
                                                               if d["comment"] else "")
                                for d in decisions if d["decision"] == "rejected")
                engine.fail(inst, circle, mark, f"not approved ({why})", actor="approval")
            return verdict
        return self.store.apply(instance_id, op)

    # -------------------------------------------------------------- reading
    def _row(self, mail_id: int):
        with self.store._read() as conn:
            return conn.execute(select(mail_t).where(mail_t.c.id == mail_id)).first()

    def _record(self, row, kind: str, data: dict[str, Any]) -> None:
        if row.instance_id:
            try:
                self.store.apply(row.instance_id,
                                 lambda e, i: e.record(i, kind, row.circle, data))
            except NotFound:
                pass

    def describe(self, row) -> dict[str, Any]:
        problem = self.check(row) if row.kind == "approval" else None
        return {"id": row.id, "kind": row.kind, "sender": row.sender_name,
                "subject": row.subject, "body": row.body, "payload": row.payload,
                "created_at": row.created_at.isoformat(),
                "updated_at": row.updated_at.isoformat() if row.updated_at else None,
                "read": row.read_at is not None, "decision": row.decision,
                "comment": row.comment, "instance": row.instance_id, "circle": row.circle,
                "signature_ok": problem is None, "problem": problem}

    def inbox(self, user: dict[str, Any], kind: str | None = None, status: str | None = None,
              limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """The user's mail, newest first; admins also see guest messages."""
        mine = mail_t.c.recipient_id == user.get("id")
        if "admin" in user.get("roles", []) and kind in (None, "guest"):
            # (only then: another kind read alone stays the top of ix_mailbox_list)
            mine = or_(mine, and_(mail_t.c.kind == "guest", mail_t.c.recipient_id.is_(None)))
        q = select(mail_t).where(mine)
        if kind:
            q = q.where(mail_t.c.kind == kind)
        if status == "pending":
            q = q.where(mail_t.c.kind == "approval", mail_t.c.decision.is_(None))
        elif status == "decided":
            q = q.where(mail_t.c.decision.is_not(None))
        elif status == "unread":
            q = q.where(mail_t.c.read_at.is_(None))
        q = q.order_by(mail_t.c.created_at.desc(), mail_t.c.id.desc()).limit(limit).offset(offset)
        with self.store._read() as conn:
            return [self.describe(r) for r in conn.execute(q).all()]

    def mark_read(self, mail_id: int, user: dict[str, Any]) -> None:
        row = self._row(mail_id)
        visible = row is not None and (row.recipient_id == user.get("id") or (
            row.kind == "guest" and "admin" in user.get("roles", [])))
        if not visible:
            raise NotFound(f"no mail {mail_id}")
        with self.store.db.begin() as conn:
            conn.execute(update(mail_t).where(mail_t.c.id == mail_id,
                                              mail_t.c.read_at.is_(None))
                         .values(read_at=self.store.clock()))


def quorum_verdict(quorum: Any, approvers: int, decisions: list[str]) -> str | None:
    """'approved', 'rejected' or None (undecided) for the countersign rule."""
    yes = decisions.count("approved")
    no = decisions.count("rejected")
    need = approvers if quorum == "all" else 1 if quorum == "any" else int(quorum)
    if yes >= need:
        return "approved"
    if approvers - no < need:
        return "rejected"
    return None
