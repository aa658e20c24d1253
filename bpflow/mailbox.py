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

from bpflow import access
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound, Tampered
from bpflow.forms import FormError
from bpflow.security import derive
from bpflow.store import Store
from engine.instance import WAITING
from engine.phase import Phase, approval, box_phase

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
    def send(self, kind: str, sender: dict[str, Any], to: list[str], subject: str, body: str,
             *, instance: str | None = None, circle: str | None = None,
             epoch: int | None = None, payload_extra: dict[str, Any] | None = None
             ) -> list[int]:
        """Insert one mail per recipient (idempotent per attempt and recipient)."""
        def build(name: str, recipient_id: int) -> dict[str, Any]:
            payload = {"kind": kind, "instance": instance, "circle": circle, "epoch": epoch,
                       "requester": sender.get("username"), "sender_id": sender.get("id"),
                       "approver": name, "recipient_id": recipient_id,
                       "subject": subject, "body": body, **(payload_extra or {})}
            return {"kind": kind, "sender_id": sender.get("id"),
                    "sender_name": sender.get("username") or "bpflow",
                    "recipient_id": recipient_id, "subject": subject, "body": body,
                    "payload": payload,
                    "signature": self.sign(payload) if kind == "approval" else None,
                    "instance_id": instance, "circle": circle, "epoch": epoch}
        attempt = ({"instance_id": instance, "circle": circle, "epoch": epoch}
                   if instance else None)
        return self.store.insert_mails(to, build, attempt)

    def guest_message(self, name: str, subject: str, body: str, client: str) -> int:
        """A note from someone without an account; goes to every admin's inbox."""
        fields = {"name": name, "subject": subject, "body": body}
        errors = {k: f"{k} is required" for k, v in fields.items()
                  if not isinstance(v, str) or not v.strip()}
        errors |= {k: f"{k} must be at most {GUEST_LIMITS[k]} characters"
                   for k, v in fields.items() if isinstance(v, str) and len(v) > GUEST_LIMITS[k]}
        if errors:
            raise FormError(errors)
        hashed = hmac.new(self.guest_key, client.encode(), hashlib.sha256).hexdigest()
        limit, window = GUEST_RATE
        return self.store.insert_guest_mail(
            {"sender_name": name.strip(), "subject": subject.strip(), "body": body}, hashed,
            limit, window)

    # ------------------------------------------------------------- deciding
    def decide(self, mail_id: int, user: Caller | dict[str, Any], decision: str,
               comment: str = "") -> dict[str, Any]:
        if decision not in ("approved", "rejected"):
            raise ValueError("decision must be 'approved' or 'rejected'")
        caller = Caller.of(user)
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval":
            raise NotFound(f"no approval mail {mail_id}")
        if not access.may_decide(caller, row.recipient_id):
            raise Forbidden("only the addressee may decide this approval")
        problem = self.check(row)
        if problem:
            self._record(row, "approval_refused", {"mail": mail_id, "why": problem,
                                                    "by": caller.username})
            raise Tampered(f"approval {mail_id} refused: {problem}")
        if row.decision is not None:
            raise Conflict(f"approval {mail_id} was already {row.decision}")
        inst = self.store.get(row.instance_id)
        run = inst.circles.get(row.circle)
        if run is None or run.epoch != row.epoch or box_phase(
                inst.template.plan.nodes[row.circle].circle.box, run) is not Phase.APPROVAL:
            raise Conflict("this approval request is no longer open")
        self.store.record_decision(mail_id, decision, comment, self._decision_signature)
        self.settle(row.instance_id, row.circle)
        return self.describe(self.store.mail(mail_id))

    def settle(self, instance_id: str, circle: str) -> str | None:
        """Count the verified decisions of the circle's current attempt against its quorum;
        complete or fail the circle when the outcome is certain."""
        def op(engine, inst):
            run = inst.circles[circle]
            info = approval(run) if run.state == WAITING else None
            if info is None:
                return None
            rows = self.store.attempt_approvals(instance_id, circle, run.epoch)
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

    def inbox(self, user: Caller | dict[str, Any], kind: str | None = None,
              status: str | None = None, limit: int = 50, offset: int = 0
              ) -> list[dict[str, Any]]:
        """The user's mail, newest first; admins also see guest messages."""
        rows = self.store.mail_page(Caller.of(user), kind, status, limit, offset)
        return [self.describe(r) for r in rows]

    def mark_read(self, mail_id: int, user: Caller | dict[str, Any]) -> None:
        row = self.store.mail(mail_id)
        if row is None or not access.may_read_mail(Caller.of(user), row.kind, row.recipient_id):
            raise NotFound(f"no mail {mail_id}")
        self.store.mark_mail_read(mail_id)


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
