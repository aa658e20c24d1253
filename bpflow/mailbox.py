"""The mailbox: approval requests signed with HMAC-SHA256, in-site messages, guest notes.

An approval mail carries a payload (instance, circle, attempt, requester = the sender
shown, approver, approvers, quorum, subject, body, the data shown) and its signature; every
column shown or used must match it. A decision is signed over the mail's signature, so
altering either the mail or the decision row breaks a signature. Deciding re-checks the
mail; when the flow re-enters (`settle`) every mail of the attempt is checked again and
the quorum is counted with the approvers and quorum the mails were signed with (never
the circle's unsigned state). A refused decision (altered mail, decided already, a
request no longer open, an instance that cannot move) stores nothing and is recorded in
the instance's history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.catalogs import translate
from bpflow.errors import Conflict, NotFound, StorageQuotaExceeded, Tampered
from bpflow.forms import FormError
from bpflow.languages import LANGUAGES, pick
from bpflow.security import derive
from bpflow.store import Store
from engine.errors import ReturnTargetError
from engine.instance import WAITING, Instance
from engine.messages import N_, word
from engine.moves import ACTIVE
from engine.phase import Phase, approval, box_phase
from engine.tasks import returned_people
from engine.texts import Text, translations

DECISIONS = ("approved", "rejected", "returned")  # an approver's; "withdrawn" is the starter's
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
            return N_("the mail does not match its signature")
        columns = {"instance": row.instance_id, "circle": row.circle, "epoch": row.epoch,
                   "subject": row.subject, "body": row.body, "kind": row.kind,
                   "recipient_id": row.recipient_id, "sender_id": row.sender_id}
        if any(payload.get(k) != v for k, v in columns.items()) or \
                row.sender_name != (payload.get("requester") or "bpflow"):
            return N_("the mail was altered after it was signed")
        if row.decision is not None:
            if row.decision not in DECISIONS + ("withdrawn",) or not row.decision_signature or \
                    not hmac.compare_digest(self._decision_signature(row),
                                            row.decision_signature):
                return N_("the decision does not match its signature")
        return None

    # -------------------------------------------------------------- sending
    def send(self, kind: str, sender: dict[str, Any], to: list[str], subject: Any, body: Any,
             *, instance: str | None = None, circle: str | None = None,
             epoch: int | None = None, payload_extra: dict[str, Any] | None = None
             ) -> list[int]:
        """Insert one mail per recipient (idempotent per attempt and recipient). A subject
        or body given in several languages (`{"en": ..., "zh-CN": ...}`, a template's
        `Text`) is written in each recipient's language (`users.language`), else
        English, else the first given (`languages.pick`); the mail signed is the one
        they read."""
        languages = self._languages(to, subject, body)

        def build(name: str, recipient_id: int) -> dict[str, Any]:
            lang = languages.get(name)
            subject_text, body_text = pick(subject, lang), pick(body, lang)
            payload = {"kind": kind, "instance": instance, "circle": circle, "epoch": epoch,
                       "requester": sender.get("username"), "sender_id": sender.get("id"),
                       "approver": name, "recipient_id": recipient_id,
                       "subject": subject_text, "body": body_text, **(payload_extra or {})}
            return {"kind": kind, "sender_id": sender.get("id"),
                    "sender_name": sender.get("username") or "bpflow",
                    "recipient_id": recipient_id, "subject": subject_text, "body": body_text,
                    "payload": payload,
                    "signature": self.sign(payload) if kind == "approval" else None,
                    "instance_id": instance, "circle": circle, "epoch": epoch}
        attempt = ({"instance_id": instance, "circle": circle, "epoch": epoch}
                   if instance else None)
        return self.store.insert_mails(to, build, attempt)

    def _languages(self, to: list[str], *texts: Any) -> dict[str, str | None]:
        """The language of each recipient, when one of `texts` is translated (else none
        is needed): their choice, or None (English)."""
        if all(translations(t) is None for t in texts):
            return {}
        out: dict[str, str | None] = {}
        for name in to:
            person = self.store.user(name)
            out[name] = person.get("language") if person else None
        return out

    def guest_message(self, name: str, subject: str, body: str, client: str) -> int:
        """A note from someone without an account; goes to every admin's inbox."""
        fields = {"name": name, "subject": subject, "body": body}
        errors = {k: N_("%(field)s is required", field=k) for k, v in fields.items()
                  if not isinstance(v, str) or not v.strip()}
        errors |= {k: N_("%(field)s must be at most %(n)s characters", field=k,
                         n=GUEST_LIMITS[k])
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
               comment: str = "", to: str | None = None) -> dict[str, Any]:
        """The addressee decides an approval (anyone else: NotFound, as for mail that
        does not exist). Refused, storing nothing and recording why in the instance's
        history: altered mail (Tampered), a decided mail, a request no longer open, an
        instance that cannot move now (suspended, terminated, completed) (Conflict).
        A return goes back to `to` (SPEC §15: a succeeded circle upstream, or "@start";
        default the circle that asked; ReturnTargetError for another)."""
        if decision not in DECISIONS:
            raise ValueError(N_("decision must be 'approved', 'rejected' or 'returned'"))
        if to is not None and decision != "returned":
            raise ReturnTargetError(N_("'to' goes with the decision 'returned' only"))
        caller = Caller.of(user)
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval" or not access.may_decide(caller,
                                                                          row.recipient_id):
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        problem = self.check(row)
        if problem:
            self._refuse(row, caller, decision, problem)
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=mail_id, why=problem))
        why = self._closed(row)
        if why:
            self._refuse(row, caller, decision, why)
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=mail_id, why=why))
        if decision == "returned":
            self._send_back(row, caller, comment, to)
        else:
            self.store.record_decision(mail_id, decision, comment, self._decision_signature)
            try:
                self.settle(row.instance_id, row.circle, by=caller.username)
            except StorageQuotaExceeded:  # the step stored nothing: neither does the mail
                self.store.undo_decision(mail_id, decision)
                raise
        return self.describe(self.store.mail(mail_id))

    def _send_back(self, row, caller: Caller, comment: str, to: str | None = None) -> None:
        """The approver returns the request (paper 001's 回退; SPEC §15's 驳回 to `to`):
        the circle that asked (or `to`) is reset for its people to amend and send again,
        who are told why in a mail; the attempt's other mails close."""
        inst, back = send_back_step(self.store, row.instance_id, row.circle, caller,
                                    comment, to)
        self.store.record_decision(row.id, "returned", comment, self._decision_signature)
        self.close_attempt(row.instance_id, row.circle, row.epoch, "withdrawn")
        self.tell_returned(inst, row.circle, back, caller, comment)

    def tell_returned(self, inst: Instance, cid: str, back: list[str], caller: Caller,
                      comment: str) -> None:
        """A mail (kind `message`) to the people of each task sent back: who sent it back,
        from which step, and why, in each reader's language."""
        sender = {"id": caller.id, "username": caller.username}
        nodes = inst.template.plan.nodes
        for target in back:
            def step(lang: str, uri: str) -> str:
                return pick(nodes[uri].circle.description, lang) or uri.rsplit(".", 1)[-1]
            subject = Text({lang: translate(lang, N_("Sent back: %(step)s"),
                                            step=step(lang, target)) for lang in LANGUAGES})
            body = Text({lang: translate(
                lang, N_("%(who)s sent “%(step)s” back to you from “%(source)s”: "
                         "“%(comment)s”. Open the flow: your answers are filled in; amend "
                         "them and send it again.") if comment else
                N_("%(who)s sent “%(step)s” back to you from “%(source)s”. Open the flow: "
                   "your answers are filled in; amend them and send it again."),
                who=caller.username, step=step(lang, target), source=step(lang, cid),
                comment=comment) for lang in LANGUAGES})
            for person in returned_people(inst, [target]):
                try:
                    self.send("message", sender, [person], subject, body, instance=inst.id,
                              circle=target, epoch=inst.circles[target].epoch)
                except NotFound:
                    pass  # a name that is no (enabled) user: the flow page still says why

    def close_attempt(self, instance_id: str, circle: str, epoch: int, why: str) -> None:
        """Close the undecided approval mails of one attempt (signed like a decision): the
        request was withdrawn or sent back, so nobody is asked any more."""
        self._close(self.store.attempt_approvals(instance_id, circle, epoch), why)

    def close_instance(self, instance_id: str) -> None:
        """Close every undecided approval mail of an aborted instance: nobody is asked
        about a flow that is over."""
        self._close(self.store.open_approvals(instance_id), "withdrawn")

    def _close(self, mails: list[Any], why: str) -> None:
        for mail in mails:
            if mail.decision is None:
                try:
                    self.store.record_decision(mail.id, why, "", self._decision_signature)
                except Conflict:
                    pass  # decided meanwhile: that decision stands (and no longer counts)

    def _closed(self, row) -> str | None:
        """Why a decision on this (intact) approval mail cannot be taken now, or None."""
        if row.decision is not None:
            return {"approved": N_("it was already approved"),
                    "rejected": N_("it was already rejected"),
                    "returned": N_("it was already returned")}.get(
                row.decision, N_("it was already %(decision)s", decision=row.decision))
        inst = self.store.get(row.instance_id)
        if inst.status not in ACTIVE:
            return N_("the instance is %(status)s", status=word(inst.status))
        run = inst.circles.get(row.circle)
        if run is None or run.epoch != row.epoch or box_phase(
                inst.template.plan.nodes[row.circle].circle.box, run) is not Phase.APPROVAL:
            return N_("this approval request is no longer open")
        return None

    def _refuse(self, row, caller: Caller, decision: str, why: str) -> None:
        self._record(row, "approval_refused", {"mail": row.id, "why": why,
                                                "by": caller.username, "decision": decision})

    def settle(self, instance_id: str, circle: str, by: str | None = None) -> str | None:
        """Count the verified decisions of the circle's current attempt against the quorum
        its mails were signed with; complete or fail the circle when the outcome is
        certain (and the instance can move). The history names who decided: `by`, the
        approver whose decision is being taken, or else the newest decision's approver."""
        def op(engine, inst):
            run = inst.circles[circle]
            if inst.status not in ACTIVE or run.state != WAITING or approval(run) is None:
                return None
            intact = []
            for row in self.store.attempt_approvals(instance_id, circle, run.epoch):
                problem = self.check(row)
                if problem:
                    engine.record(inst, "approval_refused", circle,
                                  {"mail": row.id, "why": problem})
                else:
                    intact.append(row)
            terms = signed_terms(intact)
            if terms is None:
                return None
            quorum, approvers = terms
            decided = [r for r in intact if r.decision and r.payload["approver"] in approvers]
            verdict = quorum_verdict(quorum, len(approvers), [r.decision for r in decided])
            if verdict is None:
                return None
            mark = engine.bookmark(inst, circle)
            newest = max(decided, key=lambda r: (r.updated_at, r.id), default=None)
            actor = by or (newest.payload["approver"] if newest else "approval")
            decisions = [{"approver": r.payload["approver"], "decision": r.decision,
                          "comment": r.comment} for r in decided]
            if verdict == "approved":
                engine.complete(inst, circle, mark, {"approved": True, "decisions": decisions},
                                actor=actor)
            else:
                why = "; ".join(f"{d['approver']} rejected" + (f": {d['comment']}"
                                                               if d["comment"] else "")
                                for d in decisions if d["decision"] == "rejected")
                engine.fail(inst, circle, mark, f"not approved ({why})", actor=actor)
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
            raise NotFound(N_("no mail %(id)s", id=mail_id))
        self.store.mark_mail_read(mail_id)


def send_back_step(store: Store, instance_id: str, cid: str, caller: Caller, comment: str,
                   to: str | None, check: Callable[[Instance], None] | None = None
                   ) -> tuple[Instance, list[str]]:
    """Return the work waiting at `cid` (one durable step; `check` asks who may, on the
    instance as the step sees it): the instance as it left it and the tasks it sent
    back, ready again with why."""
    back: list[str] = []

    def op(engine, inst: Instance) -> Instance:
        if check is not None:
            check(inst)
        changed = engine.send_back(inst, cid, "returned", caller.username, comment or None, to)
        back[:] = [n for n in changed if n != cid
                   and (inst.circles[n].task or {}).get("returned", {}).get("step") == cid]
        return inst
    inst = store.apply(instance_id, op)
    return inst, back


def signed_terms(rows: list[Any]) -> tuple[Any, list[str]] | None:
    """The quorum and the approvers the intact mails of one attempt were signed with;
    None when there are none, or they disagree."""
    terms = {canonical([r.payload.get("quorum"), r.payload.get("approvers")]) for r in rows}
    if len(terms) != 1:
        return None
    quorum, approvers = json.loads(terms.pop())
    if quorum is None or not isinstance(approvers, list) or not approvers:
        return None
    return quorum, approvers


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
