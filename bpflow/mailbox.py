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
from datetime import timedelta
from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.errors import Conflict, Forbidden, NotFound, StorageQuotaExceeded, Tampered
from bpflow.forms import FormError
from bpflow.languages import pick
from bpflow.security import derive
from bpflow.store import Store
from engine.instance import WAITING
from engine.messages import N_, word
from engine.moves import ACTIVE
from engine.phase import Phase, approval, box_phase
from engine.texts import translations

DECISIONS = ("approved", "rejected", "returned")  # an approver's; "withdrawn" is the starter's
CLOSINGS = ("withdrawn", "transferred")  # a mail closed without its addressee's decision
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
            if row.decision not in DECISIONS + CLOSINGS or not row.decision_signature or \
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
               comment: str = "") -> dict[str, Any]:
        """The addressee decides an approval (anyone else: NotFound, as for mail that
        does not exist). Refused, storing nothing and recording why in the instance's
        history: altered mail (Tampered), a decided mail, a request no longer open, an
        instance that cannot move now (suspended, terminated, completed) (Conflict)."""
        if decision not in DECISIONS:
            raise ValueError(N_("decision must be 'approved', 'rejected' or 'returned'"))
        caller = Caller.of(user)
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval" or not access.may_decide(caller,
                                                                          row.recipient_id):
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        problem = self.check(row)
        if problem:
            self._refuse(row, caller, decision, problem)
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=mail_id, why=problem))
        why = self._closed(row) or self._unanswerable(row, decision)
        if why:
            self._refuse(row, caller, decision, why)
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=mail_id, why=why))
        if (row.payload or {}).get("delegated_by"):
            self._answer(row, caller, decision, comment)
            return self.describe(self.store.mail(mail_id))
        if decision == "returned":
            self._send_back(row, caller, comment)
        else:
            self.store.record_decision(mail_id, decision, comment, self._decision_signature)
            try:
                self.settle(row.instance_id, row.circle, by=caller.username)
            except StorageQuotaExceeded:  # the step stored nothing: neither does the mail
                self.store.undo_decision(mail_id, decision)
                raise
        self._confirm(row, caller, decision, comment)
        return self.describe(self.store.mail(mail_id))

    def _send_back(self, row, caller: Caller, comment: str) -> None:
        """The approver returns the request (paper 001's 回退): the circle that asked is
        reset for its people to amend and send again; the attempt's other mails close."""
        self.store.apply(row.instance_id, lambda e, i: e.send_back(
            i, row.circle, "returned", caller.username, comment or None))
        self.store.record_decision(row.id, "returned", comment, self._decision_signature)
        self.close_attempt(row.instance_id, row.circle, row.epoch, "withdrawn")

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
                    "returned": N_("it was already returned"),
                    "transferred": N_("it was transferred to someone else")}.get(
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

    # ------------------------------------------ transfer and delegate (转办, 委派: SPEC §15)
    def transfer(self, mail_id: int, user: Caller | dict[str, Any], to: str,
                 comment: str = "") -> dict[str, Any]:
        """The addressee of a pending approval hands it to `to`, who decides instead: a
        new mail signed over the new list of approvers (every mail of the round is
        signed again over it), the old one closed as `transferred` (with `comment`). 404
        for anyone but the addressee; 403 for a delegate's mail; 409 once it is no longer
        pending; 422 for an unknown or disabled user, the caller, someone who may not
        approve or is asked in this approval already. The new mail."""
        caller = Caller.of(user)
        row = self._handover_mail(mail_id, caller, "transfer")
        person = self._successor(row, caller, to, approver=True)
        name = person["username"]

        def plan(rows):
            mine, approvers = self._open_round(rows, row, name)
            new = [name if a == caller.username else a for a in approvers]
            updates = self._signed_over(rows, new)
            now = self.store.clock()
            updates[mine.id].update(decision="transferred", comment=comment or "",
                                    updated_at=now, read_at=now)
            for r in rows:  # the caller's delegate is asked no more
                if r.decision is None and r.payload.get("delegated_by") == caller.username:
                    updates[r.id].update(decision="withdrawn", comment="", updated_at=now)
            extra = {"approvers": new, "transferred_from": caller.username,
                     "note": comment or ""}
            return list(updates.items()), [name], self._copy_of(mine, extra)
        return self._hand(row, caller, plan, "approval_transferred",
                          {"from": caller.username, "to": name, "comment": comment or ""})

    def delegate(self, mail_id: int, user: Caller | dict[str, Any], to: str,
                 comment: str = "") -> dict[str, Any]:
        """The addressee of a pending approval asks `to` to answer it for them: `to` gets
        a mail of their own (signed, naming who delegated), whose decision comes back as
        an answer the addressee confirms or decides differently; only the addressee's
        decision counts. The addressee's mail is signed again naming the delegate. 404,
        403, 409 and 422 as `transfer`; 409 too while an earlier delegate has not
        answered. The delegate's mail."""
        caller = Caller.of(user)
        row = self._handover_mail(mail_id, caller, "delegate")
        person = self._successor(row, caller, to, approver=False)
        name = person["username"]

        def plan(rows):
            mine, _ = self._open_round(rows, row, name)
            waiting = [r.payload.get("approver") for r in rows if r.decision is None
                       and r.payload.get("delegated_by") == caller.username]
            if waiting:
                raise Conflict(N_("%(user)s has not answered yet", user=waiting[0]))
            payload = {**mine.payload, "delegated_to": name}
            updates = {mine.id: {"payload": payload, "signature": self.sign(payload)}}
            extra = {"delegated_by": caller.username, "note": comment or ""}
            return list(updates.items()), [name], self._copy_of(mine, extra)
        return self._hand(row, caller, plan, "approval_delegated",
                          {"from": caller.username, "to": name, "comment": comment or ""})

    def hand_over_choices(self, mail_id: int, user: Caller | dict[str, Any],
                          how: str) -> list[str]:
        """Whom the caller may transfer (`how` "transfer": approvers) or delegate
        ("delegate": anyone) their pending approval mail to: enabled users of the tenant,
        not the caller, nobody asked in the approval already (a picker's choices; the
        move checks again)."""
        caller = Caller.of(user)
        row = self._handover_mail(mail_id, caller, how)
        asked = {r.payload.get("approver") for r in self.store.attempt_approvals(
            row.instance_id, row.circle, row.epoch)}
        names = self.store.usernames()
        asked.add(self.store.get(row.instance_id).user.get("username"))  # four eyes
        if how == "transfer":
            approvers = {n for role in access.APPROVING for n in self.store.usernames(role)}
            names = [n for n in names if n in approvers]
        return [n for n in names if n != caller.username and n not in asked]

    def pending_mail(self, instance_id: str, circle: str, epoch: int,
                     user: Caller | dict[str, Any]) -> int:
        """The id of the caller's own undecided, intact approval mail of an attempt (one
        they may decide, transfer or delegate), else 0."""
        caller = Caller.of(user)
        for r in self.store.attempt_approvals(instance_id, circle, epoch):
            if r.decision is None and access.may_hand_over(caller, r.recipient_id) and \
                    not (r.payload or {}).get("delegated_by") and self.check(r) is None:
                return int(r.id)
        return 0

    def _handover_mail(self, mail_id: int, caller: Caller, what: str):
        """The caller's pending approval mail to hand over (intact and open), else
        refused (NotFound, Forbidden, Tampered, Conflict) and recorded."""
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval" or not access.may_hand_over(
                caller, row.recipient_id):
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        problem = self.check(row)
        if problem:
            self._refuse(row, caller, what, problem)
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=mail_id, why=problem))
        if row.payload.get("delegated_by"):
            raise Forbidden(N_("%(user)s asked you to answer; only they may hand it on",
                               user=row.payload["delegated_by"]))
        why = self._closed(row)
        if why:
            self._refuse(row, caller, what, why)
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=mail_id, why=why))
        return row

    def _successor(self, row, caller: Caller, to: str, approver: bool) -> dict[str, Any]:
        """The user an approval is handed to (422: unknown or disabled, the caller, one
        who may not approve when they are to decide)."""
        name = str(to or "").strip()
        person = self.store.user(name) if name else None
        if person is None:
            raise FormError({"to": N_("no user named %(name)s", name=name[:100])})
        if person["id"] == caller.id:
            raise FormError({"to": N_("choose someone other than yourself")})
        if approver and not access.may_approve(person["roles"]):
            raise FormError({"to": N_("%(name)s is not an approver", name=person["username"])})
        if person["id"] == self.store.get(row.instance_id).user.get("id"):  # four eyes
            raise FormError({"to": N_("%(user)s cannot approve their own request",
                                      user=person["username"])})
        return person

    def _open_round(self, rows: list[Any], row, name: str) -> tuple[Any, list[str]]:
        """(the caller's mail, the approvers) of a locked round that may be handed on:
        every mail intact, the caller's undecided, the request open, `name` not asked in
        it yet; else refused."""
        mine = next((r for r in rows if r.id == row.id), None)
        if mine is None or any(self.check(r) for r in rows):
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=row.id,
                              why=N_("a mail of its round does not match its signature")))
        why = self._closed(mine)
        terms = signed_terms([r for r in rows if not r.payload.get("delegated_by")])
        if why or terms is None:
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=row.id,
                              why=why or N_("this approval request is no longer open")))
        if any(r.payload.get("approver") == name for r in rows):
            raise FormError({"to": N_("%(name)s is asked in this approval already",
                                      name=name)})
        return mine, terms[1]

    def _signed_over(self, rows: list[Any], approvers: list[str]) -> dict[int, dict[str, Any]]:
        """Every mail of the round signed again over a new list of approvers."""
        out = {}
        for r in rows:
            payload = {**r.payload, "approvers": approvers}
            out[r.id] = {"payload": payload, "signature": self.sign(payload)}
        return out

    def _copy_of(self, mine, extra: dict[str, Any]):
        """How to build the mail handed on: the caller's, to someone else, with `extra`
        (who handed it on, and how) signed with it."""
        keep = {k: v for k, v in mine.payload.items()
                if k not in ("delegated_to", "delegated_by", "transferred_from", "note")}

        def build(name: str, recipient_id: int) -> dict[str, Any]:
            payload = {**keep, "approver": name, "recipient_id": recipient_id, **extra}
            return {"kind": "approval", "sender_id": mine.sender_id,
                    "sender_name": mine.sender_name, "recipient_id": recipient_id,
                    "subject": mine.subject, "body": mine.body, "payload": payload,
                    "signature": self.sign(payload), "instance_id": mine.instance_id,
                    "circle": mine.circle, "epoch": mine.epoch}
        return build

    def _hand(self, row, caller: Caller, plan, kind: str, data: dict[str, Any]
              ) -> dict[str, Any]:
        """Change the round as `plan` says, then record it in the history in a step that
        finds the request still open: a withdrawal that came first closes the new mail
        and the hand-over is refused (409), so it is applied once or not at all."""
        try:
            ids = self.store.change_round(row.instance_id, row.circle, row.epoch, plan,
                                          self._decision_signature)
        except Tampered as exc:
            self._refuse(row, caller, kind, str(exc))
            raise

        new = self.store.mail(ids[0])
        approvers = new.payload.get("approvers") if new is not None else None

        def op(engine, inst):
            run = inst.circles.get(row.circle)
            info = approval(run) if run is not None else None
            if inst.status not in ACTIVE or info is None or run.epoch != row.epoch:
                return False
            engine.record(inst, kind, row.circle, {"mail": row.id, "new_mail": ids[0], **data},
                          caller.username)
            if approvers and info.get("approvers") != approvers:  # whom the page names
                run.pending = {**run.pending, "approval": {**info, "approvers": approvers}}
            return True
        if not self.store.apply(row.instance_id, op):
            self.close_attempt(row.instance_id, row.circle, row.epoch, "withdrawn")
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=row.id,
                              why=N_("this approval request is no longer open")))
        return self.describe(self.store.mail(ids[0]))

    def _unanswerable(self, row, decision: str) -> str | None:
        """Why a delegate may not answer now (the one who delegated decided or handed it
        on), or None; a delegate answers approved or rejected."""
        owner = (row.payload or {}).get("delegated_by")
        if not owner:
            return None
        if decision == "returned":
            return N_("a delegate answers approved or rejected; %(user)s decides",
                      user=owner)
        theirs = self._owner_mail(row)
        if theirs is None or theirs.decision is not None or \
                theirs.payload.get("delegated_to") != row.payload.get("approver"):
            return N_("%(user)s has decided already", user=owner)
        return None

    def _owner_mail(self, row):
        """The intact mail of the addressee who delegated `row`, or None."""
        owner = row.payload.get("delegated_by")
        return next((r for r in self.store.attempt_approvals(row.instance_id, row.circle,
                                                             row.epoch)
                     if r.payload.get("approver") == owner and not r.payload.get(
                         "delegated_by") and self.check(r) is None), None)

    def _answer(self, row, caller: Caller, decision: str, comment: str) -> None:
        """A delegate's answer: stored on their mail, recorded for the one who delegated
        (it counts only once they confirm it)."""
        self.store.record_decision(row.id, decision, comment, self._decision_signature)
        self._record(row, "approval_answered",
                     {"mail": row.id, "for": row.payload["delegated_by"],
                      "decision": decision, "comment": comment or ""}, actor=caller.username)

    def _confirm(self, row, caller: Caller, decision: str, comment: str) -> None:
        """The addressee decides a mail they delegated: the delegate's answer is
        confirmed (or answered differently), and recorded so; a delegate who has not
        answered is asked no more."""
        delegate = (row.payload or {}).get("delegated_to")
        if not delegate:
            return
        theirs = next((r for r in self.store.attempt_approvals(row.instance_id, row.circle,
                                                               row.epoch)
                       if r.payload.get("approver") == delegate and
                       r.payload.get("delegated_by") == caller.username), None)
        if theirs is None:
            return
        if theirs.decision is None:
            self._close([theirs], "withdrawn")
            return
        if theirs.decision in ("approved", "rejected"):
            self._record(row, "approval_confirmed",
                         {"mail": row.id, "delegate": delegate, "answer": theirs.decision,
                          "decision": decision, "confirmed": theirs.decision == decision,
                          "comment": comment or ""}, actor=caller.username)

    def _delegate_answer(self, row) -> dict[str, Any] | None:
        """For a mail its addressee delegated: the delegate and their answer (decision
        None until they answer)."""
        delegate = (row.payload or {}).get("delegated_to") if row.kind == "approval" else None
        if not delegate:
            return None
        for r in self.store.attempt_approvals(row.instance_id, row.circle, row.epoch):
            if r.payload.get("approver") == delegate and \
                    r.payload.get("delegated_by") == row.payload.get("approver"):
                return {"by": delegate, "decision": r.decision if r.decision in (
                    "approved", "rejected") else None, "comment": r.comment or "",
                    "note": r.payload.get("note") or "",
                    "at": r.updated_at.isoformat() if r.updated_at else None}
        return None

    # -------------------------------------------------------------- reading
    def _record(self, row, kind: str, data: dict[str, Any], actor: str | None = None) -> None:
        if row.instance_id:
            try:
                self.store.apply(row.instance_id,
                                 lambda e, i: e.record(i, kind, row.circle, data, actor))
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
                "signature_ok": problem is None, "problem": problem,
                "answer": self._delegate_answer(row) if problem is None else None}

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
