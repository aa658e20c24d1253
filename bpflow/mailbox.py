"""The mailbox: approval requests signed with HMAC-SHA256, in-site messages, guest notes.

An approval mail carries a payload (instance, circle, attempt, requester = the sender
shown, approver, approvers, quorum, subject, body, the data shown) and its signature; every
column shown or used must match it. A decision is signed over the mail's signature, so
altering either the mail or the decision row breaks a signature. Deciding re-checks the
mail; in the decision's transaction (unless the attempt's decisions, counted unverified,
are too few to settle anything: `_could_settle`), and when the flow re-enters (`settle`),
every mail of the attempt is checked again and the quorum is counted with the approvers
and quorum the mails were signed with (never the circle's unsigned state); the decision
that settles the round takes its step in that transaction. A mailbox remembers the
signatures it verified, for the very same values only (`_signed`). A refused decision
(altered mail, decided already, a request no longer open, an instance that cannot move)
stores nothing and is recorded in the instance's history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import orjson

from bpflow import access, rounds
from bpflow.access import Caller
from bpflow.catalogs import translate
from bpflow.errors import (
    BpflowError,
    Conflict,
    Forbidden,
    NotFound,
    StorageQuotaExceeded,
    Tampered,
)
from bpflow.forms import FormError
from bpflow.languages import LANGUAGES, pick
from bpflow.security import derive
from bpflow.store import Store
from engine.errors import ReturnTargetError
from engine.instance import WAITING, Instance
from engine.messages import N_, word
from engine.moves import ACTIVE
from engine.phase import Phase, action_extra, approval, box_phase
from engine.runtime import Engine
from engine.tasks import returned_people
from engine.texts import Text, translations

DECISIONS = ("approved", "rejected", "returned")  # an approver's; "withdrawn" is the starter's
# a mail closed without its addressee's decision
CLOSINGS = ("withdrawn", "removed", "transferred")
quorum_verdict = rounds.quorum_verdict
GUEST_LIMITS = {"name": 80, "subject": 200, "body": 5000}
GUEST_RATE = (5, timedelta(minutes=10))  # messages per client per window
VERIFIED_MAX = 20_000  # signatures a mailbox remembers verifying (`Mailbox._signed`)


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def exact(value: Any) -> bytes | None:
    """A JSON value written so that two values give the same text only when they are the
    same value of the same types (1, 1.0 and true differ, as they do in `canonical`; a
    dict's keys sorted), or None for a value that text would not keep exactly (a number
    too large, NaN or infinity, a key that is no string): those are checked whole."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    # orjson writes NaN and infinity as null: a text with a null is kept only when it
    # reads back as the value
    return text if b"null" not in text or orjson.loads(text) == value else None


class Mailbox:
    def __init__(self, store: Store):
        self.store = store
        self.key = derive(store.secret, "approvals")
        self.guest_key = derive(store.secret, "guest-clients")
        # what this mailbox verified or signed already, so the mails of a round are not
        # signed again at each of its decisions (`_signed`, `_decision_signature`):
        # (mail id, signature) -> the payload's `exact` text, ("decision", signature) ->
        # the signed values' `exact` text, ("signing", that text) -> its signature
        self._verified: dict[Any, Any] = {}

    # ------------------------------------------------------------ signatures
    def sign(self, payload: dict[str, Any]) -> str:
        return hmac.new(self.key, canonical(payload), hashlib.sha256).hexdigest()

    def _decision_signature(self, row) -> str:
        """The signature of a decision (`_decision_signed`); one signed already by this
        mailbox is remembered, and counts as verified (`_signed`)."""
        signed = _decision_signed(row)
        text = exact(signed)
        if text is None:
            return self.sign(signed)
        signature = self._verified.get(("signing", text))
        if signature is None:
            signature = self.sign(signed)
            self._remember(("signing", text), signature)
            self._remember(("decision", signature), text)
        return signature

    def _remember(self, key: Any, value: Any) -> None:
        if len(self._verified) >= VERIFIED_MAX:
            self._verified.clear()
        self._verified[key] = value

    def _signed(self, key: Any, value: Any, signature: str) -> bool:
        """Whether `signature` is the signature of `value`: HMAC'd the first time, then
        remembered under `key` with the value's `exact` text, and taken as verified when
        the same key comes with the same text (the same value, so the same signature)."""
        text = exact(value)
        if text is not None and self._verified.get((key, signature)) == text:
            return True
        if not hmac.compare_digest(self.sign(value), signature):
            return False
        if text is not None:
            self._remember((key, signature), text)
        return True

    def check(self, row) -> str | None:
        """Why this approval mail cannot be trusted, or None when it is intact."""
        payload = row.payload or {}
        if not row.signature or not self._signed(row.id, payload, row.signature):
            return N_("the mail does not match its signature")
        signed = payload.get
        if (signed("instance"), signed("circle"), signed("epoch"), signed("subject"),
                signed("body"), signed("kind"), signed("recipient_id"),
                signed("sender_id")) != (row.instance_id, row.circle, row.epoch, row.subject,
                                         row.body, row.kind, row.recipient_id, row.sender_id) \
                or row.sender_name != (signed("requester") or "bpflow"):
            return N_("the mail was altered after it was signed")
        if row.decision is not None:
            if row.decision not in DECISIONS + CLOSINGS or not row.decision_signature or \
                    not self._signed("decision", _decision_signed(row),
                                     row.decision_signature):
                return N_("the decision does not match its signature")
        return None

    # -------------------------------------------------------------- sending
    def send(self, kind: str, sender: dict[str, Any], to: list[str], subject: Any, body: Any,
             *, instance: str | None = None, circle: str | None = None,
             epoch: int | None = None, payload_extra: dict[str, Any] | None = None
             ) -> list[int]:
        """Insert one mail per recipient (idempotent per attempt and recipient; without an
        `epoch`, as urges, every call sends its own). A subject
        or body given in several languages (`{"en": ..., "zh-CN": ...}`, a template's
        `Text`) is written in each recipient's language (`users.language`), else
        English, else the first given (`languages.pick`); the mail signed is the one
        they read."""
        build = self._builder(kind, sender, self._languages(to, subject, body), subject,
                              body, instance, circle, epoch, payload_extra)
        attempt = ({"instance_id": instance, "circle": circle, "epoch": epoch}
                   if instance and epoch is not None else None)  # urges: each one sent
        return self.store.insert_mails(to, build, attempt)

    def send_batch(self, kind: str, sender: dict[str, Any],
                   sends: list[dict[str, Any]]) -> None:
        """Several sends of unsigned mail (urges: `to`, `subject`, `body`, `instance`,
        `circle` each) in one transaction."""
        self.store.insert_mail_batch([
            (s["to"], self._builder(kind, sender,
                                    self._languages(s["to"], s["subject"], s["body"]),
                                    s["subject"], s["body"], s.get("instance"),
                                    s.get("circle"), None, None))
            for s in sends])

    def copy(self, sender: dict[str, Any], to: list[str], subject: Any, body: Any, *,
             instance: str, circle: str | None = None,
             payload_extra: dict[str, Any] | None = None) -> list[str]:
        """A copy (mail of kind `cc`, SPEC §15) to each of `to` who has none of this
        instance and circle (None: ad hoc) yet; the names it went to."""
        build = self._builder("cc", sender, self._languages(to, subject, body), subject,
                              body, instance, circle, None, payload_extra)
        return self.store.insert_copies(instance, circle, to, build)

    def _builder(self, kind: str, sender: dict[str, Any], languages: dict[str, str | None],
                 subject: Any, body: Any, instance: str | None, circle: str | None,
                 epoch: int | None, payload_extra: dict[str, Any] | None):
        """How `send` makes one recipient's mail: `build(name, recipient_id)`."""
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
        return build

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
        row = self.store.mail(mail_id)
        deciding = self._decider(Caller.of(user), row)
        if row is None or row.kind != "approval" or deciding is None:
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        caller = deciding  # the addressee, or their substitute as "ann for bob"
        decided = None  # the mail as the decision's transaction left it
        for _ in range(3):  # again on the new terms when signers were added or removed
            problem = self.check(row)
            if problem:
                self._refuse(row, caller, decision, problem)
                raise Tampered(N_("approval %(id)s refused: %(why)s", id=mail_id, why=problem))
            delegated = bool((row.payload or {}).get("delegated_by"))
            why = self._closed(row) or self._unanswerable(row, decision) or (
                None if delegated else self._turn(row))
            if why:
                self._refuse(row, caller, decision, why)
                raise Conflict(N_("approval %(id)s refused: %(why)s", id=mail_id, why=why))
            if delegated:  # a delegate's answer: its owner confirms it
                self._answer(row, caller, decision, comment)
                return self.describe(self.store.mail(mail_id))
            if decision == "returned":
                self._send_back(row, caller, comment, to)
                break
            try:  # the step it settles, if any, goes with it (a quota refusing it: neither)
                settled, decided = self.store.record_decision(
                    mail_id, decision, comment, self._decision_signature,
                    asked=row, by=caller.username,
                    then=partial(self._settling, row, caller.username),
                    could=self._could_settle(row))
            except Conflict:
                fresh = self.store.mail(mail_id)
                if fresh is None or fresh.decision is not None or \
                        fresh.signature == row.signature:
                    raise
                row = fresh  # re-signed meanwhile: decided on the round as it is now
                continue
            try:
                if not settled:  # not in its transaction: on the instance as stored
                    self.settle(row.instance_id, row.circle, by=caller.username)
            except StorageQuotaExceeded:  # the step stored nothing: neither does the mail
                self.store.undo_decision(mail_id, decision)
                raise
            if _ordered_round(row):
                self.advance(row.instance_id, row.circle, row.epoch)
            break
        else:  # its round changed at every try
            raise Conflict(N_("approval %(id)s was decided concurrently", id=mail_id))
        self._confirm(row, caller, decision, comment)
        return self.describe(decided if decided is not None else self.store.mail(mail_id))

    def _decider(self, caller: Caller, row) -> Caller | None:
        """Who decides this mail for the caller (`access.deciding_as`: its addressee, or
        their substitute recorded as "ann for bob"), None when they may not."""
        if row is None:
            return None
        return access.deciding_as(caller, row.recipient_id,
                                  lambda: self.store.peek(row.instance_id).template.name)

    def _send_back(self, row, caller: Caller, comment: str, to: str | None = None) -> None:
        """The approver returns the request (paper 001's 回退; SPEC §15's 驳回 to `to`):
        the circle that asked (or `to`) is reset for its people to amend and send again,
        who are told why in a mail; the attempt's other mails close."""
        inst, back = send_back_step(self.store, row.instance_id, row.circle, caller,
                                    comment, to)
        self.store.record_decision(row.id, "returned", comment, self._decision_signature,
                                   by=caller.username)
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
                    "returned": N_("it was already returned"),
                    "transferred": N_("it was transferred to someone else")}.get(
                row.decision, N_("it was already %(decision)s", decision=row.decision))
        inst = self.store.current(row.instance_id)
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
        approver whose decision is being taken, or else the newest decision's approver.
        While the mails, read first, settle nothing, no step is taken: whoever decides
        later reads every decision recorded before theirs."""
        if self._unsettled(instance_id, circle):
            return None

        def op(engine, inst):
            run = inst.circles[circle]
            if inst.status not in ACTIVE or run.state != WAITING or approval(run) is None:
                return None
            rows = self.store.attempt_approvals(instance_id, circle, run.epoch)
            return self._count(engine, inst, circle, rows, [self.check(r) for r in rows], by)
        return self.store.apply(instance_id, op)

    def _settling(self, row, by: str, rows: list[Any]):
        """What `settle` does, in the transaction of the decision on `row`, given the
        mails of its attempt as they are with it (`rows`; `record_decision`'s `then`):
        None when they settle nothing (all intact, no verdict), else the step counting
        them. A step that finds the request no longer open is refused, and `settle`
        decides on the instance as stored."""
        problems = [self.check(r) for r in rows]
        if not any(problems):
            terms = signed_terms(rows)
            if terms is None or rounds.verdict(terms[0], terms[1],
                                               _ordered(rows, terms[1])) is None:
                return None

        def op(engine, inst):
            run = inst.circles.get(row.circle)
            if inst.status not in ACTIVE or run is None or run.state != WAITING or \
                    approval(run) is None or run.epoch != row.epoch:
                raise Conflict(N_("this approval request is no longer open"))
            return self._count(engine, inst, row.circle, rows, problems, by)
        return op

    def _could_settle(self, row) -> Callable[[int, int], bool] | None:
        """For the round of an intact mail counted by number (not "any", not in an
        order, every addressee once): whether so many approvals and rejections could
        give its verdict. Its verified decisions are never more than the mails hold, and
        more of either only brings a verdict nearer, so a count of them that gives none
        means no decision's check can (`record_decision`'s `could`). None: no such test."""
        terms = signed_terms([row])
        if terms is None or _ordered_round(row) or terms[0] == "any":
            return None
        quorum, seats = terms
        names = [n for chain in seats for n in chain]
        if len(set(names)) != len(names):
            return None
        return lambda yes, no: rounds.quorum_verdict(
            quorum, len(seats), ["approved"] * yes + ["rejected"] * no) is not None

    def _count(self, engine: Engine, inst: Instance, circle: str, rows: list[Any],
               problems: list[str | None], by: str | None) -> str | None:
        """In a step: count the decisions of the attempt's mails `rows` (`problems`: why
        each cannot be trusted, recorded, or None) against the quorum the intact ones
        were signed with; complete or fail the circle once the outcome is certain (its
        verdict)."""
        intact = []
        for row, problem in zip(rows, problems, strict=True):
            if problem:
                engine.record(inst, "approval_refused", circle, {"mail": row.id, "why": problem})
            else:
                intact.append(row)
        terms = signed_terms(intact)
        if terms is None:
            return None
        quorum, seats = terms
        approvers = {n for chain in seats for n in chain}
        decided = sorted((r for r in intact if r.decision in ("approved", "rejected")
                          and r.payload["approver"] in approvers),
                         key=lambda r: (r.updated_at or r.created_at, r.id))
        # the verdict as `_settling` reads it first: the two never disagree
        verdict = rounds.verdict(quorum, seats, _ordered(intact, seats))
        if verdict is None:
            return None
        newest = max(decided, key=lambda r: (r.updated_at, r.id), default=None)
        actor = by or (newest.payload["approver"] if newest else "approval")
        conclude(engine, inst, circle, verdict,
                 [{"approver": r.payload["approver"], "decision": r.decision,
                   "comment": r.comment} for r in decided], actor)
        return verdict

    # ------------------------------------------------------- the round (SPEC §15)
    def _turn(self, row) -> str | None:
        """Why the addressee of this (open) mail may not decide yet: under "sequence", or
        with signers added before them, the people before them decide first."""
        payload = row.payload or {}
        if not _ordered_round(row):
            return None
        rows = [r for r in self.store.attempt_approvals(row.instance_id, row.circle, row.epoch)
                if self.check(r) is None]
        terms = signed_terms(rows)
        if terms is None:
            return N_("this approval request is no longer open")
        quorum, seats = terms
        decided = _decided(rows, seats)
        if payload.get("approver") in rounds.asked(quorum, seats, decided):
            return None
        return N_("%(who)s decide first", who=", ".join(rounds.waiting(quorum, seats, decided)))

    def advance(self, instance_id: str | None, circle: str | None,
                epoch: int | None = None) -> list[int]:
        """Send the round's mail to whoever is asked by now and has none yet (the next in a
        sequence, the addressee after the signers added before them) in the attempt
        `epoch` (None: the current one). The worker asks again on re-entry, so a mail
        not sent (the process died) is sent later."""
        if instance_id is None or circle is None:
            return []
        if epoch is None:
            run = self.store.get(instance_id).circles.get(circle)
            if run is None:
                return []
            epoch = run.epoch
        rows = self.store.attempt_approvals(instance_id, circle, epoch)
        if not any(_ordered_round(r) for r in rows) or not self._due(rows):
            return []
        mail = self._round_mail(instance_id, circle)
        if mail is None:
            return []

        def plan(locked):
            if not self._due(locked):
                return [], [], None
            return [], self._due(locked), mail(signed_terms(locked))
        return self.store.change_round(instance_id, circle, epoch, plan,
                                       self._decision_signature)

    def _due(self, rows: list[Any]) -> list[str]:
        """Who is asked by now and has no mail of the attempt, when its mails are intact
        and the round is not settled."""
        if any(self.check(r) for r in rows):
            return []
        terms = signed_terms(rows)
        if terms is None:
            return []
        quorum, seats = terms
        decided = _decided(rows, seats)
        if rounds.verdict(quorum, seats, _ordered(rows, seats)) is not None:
            return []
        have = {r.payload.get("approver") for r in rows}
        return [n for n in rounds.asked(quorum, seats, decided) if n not in have]

    def _round_mail(self, instance_id: str, circle: str):
        """How to write the round's mail for someone asked later (the circle's approval
        rendered again, in each recipient's language; the data shown as first sent):
        `make(terms)` gives `build(name, recipient_id)`; None when the circle no longer
        waits for approval."""
        inst = self.store.get(instance_id)
        run = inst.circles.get(circle)
        if inst.status not in ACTIVE or run is None or approval(run) is None:
            return None
        action = inst.template.plan.nodes[circle].circle.box.action or {}
        try:
            shown = self.store.engine.render(inst, circle, action, action_extra(run))
        except BpflowError:
            shown = action
        subject = shown.get("subject") or f"Approve {circle}"
        body = shown.get("body", "")
        first = self.store.attempt_approvals(instance_id, circle, run.epoch)
        data = (first[0].payload or {}).get("data") if first else None
        approvers = [str(a) for a in (approval(run) or {}).get("approvers", [])]
        epoch = run.epoch

        def make(terms) -> Any:
            quorum, seats = terms
            names = [n for chain in seats for n in chain]
            return self._builder("approval", inst.user,
                                 self._languages(sorted(set(names + approvers)), subject,
                                                 body),
                                 subject, body, instance_id, circle, epoch,
                                 {"data": data, **rounds.terms(quorum, seats)})
        return make

    def round_of(self, instance_id: str, circle: str, epoch: int) -> dict[str, Any] | None:
        """Where an attempt's round stands, for the approval card: the quorum, the seats,
        who decided (and how, with their comment and time), who is asked and has not
        decided (`waiting`), who comes later (`later`), how many approvals are needed and
        given, and each addressee's mail id. None when its mails disagree or were
        altered."""
        rows = self.store.attempt_approvals(instance_id, circle, epoch)
        intact = [r for r in rows if self.check(r) is None]
        terms = signed_terms(intact) if len(intact) == len(rows) else None
        if terms is None:
            return None
        quorum, seats = terms
        decided = _decided(intact, seats)
        asked = rounds.asked(quorum, seats, decided)
        approvers = [n for chain in seats for n in chain]
        done = [{"approver": r.payload["approver"], "decision": r.decision,
                 "comment": r.comment or "",
                 "at": r.updated_at.isoformat() if r.updated_at else None}
                for r in sorted(intact, key=lambda r: (r.updated_at or r.created_at, r.id))
                if r.decision is not None]
        return {"quorum": quorum, "seats": seats, "approvers": approvers, "decisions": done,
                "waiting": rounds.waiting(quorum, seats, decided),
                "later": [n for n in approvers if n not in asked and n not in decided],
                "needed": rounds.needed(quorum, len(seats)),
                "approved": sum(rounds.seat_outcome(c, decided) == "approved" for c in seats),
                "seats_count": len(seats),
                "verdict": rounds.verdict(quorum, seats, _ordered(intact, seats)),
                "mails": {r.payload["approver"]: r.id for r in intact}}

    # ------------------------------------------------ add and remove signers (加签, 减签)
    def add_signers(self, mail_id: int, user: Caller | dict[str, Any], names: list[str],
                    where: str, comment: str = "") -> dict[str, Any]:
        """The addressee of a pending approval asks more people (SPEC §15): `before` them
        (the added decide first, then the mail comes back), `after` them (their approval
        is recorded and the added approve too) or `with` them (new seats of the round:
        the quorum counts over the new list). Every mail of the round is signed again
        over the new list. 404 for anyone but the addressee; 409 once it is decided or
        the round is settled; 422 for an unknown or disabled user, one who may not
        approve, the flow's starter, someone asked already."""
        caller = Caller.of(user)
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval" or not access.may_add_signers(
                caller, row.recipient_id):
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        if where not in rounds.PLACES:
            raise FormError({"where": N_("where must be 'before', 'after' or 'with'")})
        names = list(dict.fromkeys(str(n).strip() for n in names))
        inst = self._open(row, caller, "signers_added")
        self._people(names, inst, caller)
        mail = self._round_mail(row.instance_id, row.circle)
        if mail is None:
            raise Conflict(N_("this approval request is no longer open"))
        now = self.store.clock()

        def plan(rows):
            mine, quorum, seats = self._round(rows, mail_id)
            if caller.username not in rounds.asked(quorum, seats, _decided(rows, seats)):
                raise Conflict(N_("%(who)s decide first", who=", ".join(
                    rounds.waiting(quorum, seats, _decided(rows, seats)))))
            asked_before = {r.payload.get("approver") for r in rows}
            again = [n for n in names if n in asked_before or
                     any(n in chain for chain in seats)]
            if again:
                raise FormError({"users": N_("%(name)s is asked in this approval already",
                                             name=", ".join(again))})
            new = rounds.add(seats, caller.username, names, where, quorum)
            if sum(len(c) for c in new) > rounds.MAX_SIGNERS:
                raise FormError({"users": N_("an approval asks at most %(n)s people",
                                             n=rounds.MAX_SIGNERS)})
            updates = self._resign(rows, quorum, new)
            decided = _decided(rows, new)
            if where == "after":
                updates[mine.id].update(decision="approved", comment=comment or "",
                                        updated_at=now, read_at=now)
                decided[caller.username] = "approved"
            have = {r.payload.get("approver") for r in rows}
            to = [n for n in rounds.asked(quorum, new, decided) if n not in have]
            return list(updates.items()), to, mail((quorum, new))
        self._change(row, caller, plan)
        self._record(row, "approval_signers_added",
                     {"mail": mail_id, "users": names, "where": where, "comment": comment,
                      "by": caller.username}, actor=caller.username)
        if where == "after":
            self.settle(row.instance_id, row.circle, by=caller.username)
        self.advance(row.instance_id, row.circle, row.epoch)
        return self.describe(self.store.mail(mail_id))

    def remove_signers(self, mail_id: int, user: Caller | dict[str, Any], names: list[str],
                       comment: str = "") -> dict[str, Any]:
        """The flow's starter or an admin takes addressees who have not decided out of a
        pending approval (`mail_id`: any mail of its round); their mail closes as
        `removed` and the round is counted over the list left. 404 for who may not see
        the flow, 403 for who sees it and may not; 409 once the round is settled; 422
        for a name not asked, one who decided, or a list left too short."""
        caller = Caller.of(user)
        row = self.store.mail(mail_id)
        if row is None or row.kind != "approval" or row.instance_id is None:
            raise NotFound(N_("no approval mail %(id)s", id=mail_id))
        try:
            inst = self.store.get(row.instance_id)
        except NotFound:
            raise NotFound(N_("no approval mail %(id)s", id=mail_id)) from None
        access.require_signers_removal(caller, inst, row.recipient_id)
        names = list(dict.fromkeys(str(n).strip() for n in names))
        if not names:
            raise FormError({"users": N_("name at least one user")})
        self._open(row, caller, "signers_removed")
        now = self.store.clock()
        mail = self._round_mail(row.instance_id, row.circle)
        if mail is None:
            raise Conflict(N_("this approval request is no longer open"))

        def plan(rows):
            _, quorum, seats = self._round(rows, mail_id, mine_open=False)
            decided = _decided(rows, seats)
            listed = {n for chain in seats for n in chain}
            unknown = [n for n in names if n not in listed]
            if unknown:
                raise FormError({"users": N_("%(name)s is not asked in this approval",
                                             name=", ".join(unknown))})
            done = [n for n in names if n in decided]
            if done:
                raise FormError({"users": N_("%(name)s has decided already",
                                             name=", ".join(done))})
            new = rounds.remove(seats, names)
            if not new:
                raise FormError({"users": N_("at least one addressee must remain")})
            problem = rounds.quorum_problem(quorum, len(new))
            if problem:
                raise FormError({"users": problem})
            updates = self._resign(rows, quorum, new)
            for r in rows:
                if r.decision is None and r.payload.get("approver") in names:
                    updates[r.id].update(decision="removed", comment=comment or "",
                                         updated_at=now, read_at=now)
            have = {r.payload.get("approver") for r in rows}
            to = [n for n in rounds.asked(quorum, new, decided) if n not in have]
            return list(updates.items()), to, mail((quorum, new))
        self._change(row, caller, plan)
        self._record(row, "approval_signers_removed",
                     {"mail": mail_id, "users": names, "comment": comment,
                      "by": caller.username}, actor=caller.username)
        self.settle(row.instance_id, row.circle, by=caller.username)
        self.advance(row.instance_id, row.circle, row.epoch)
        return {"removed": names, "round": self.round_of(row.instance_id, row.circle,
                                                          row.epoch)}

    def _open(self, row, caller: Caller, what: str):
        """The instance of an approval mail whose round may change now (intact, the
        request open), else refused (Tampered, Conflict) and recorded."""
        problem = self.check(row)
        if problem:
            self._refuse(row, caller, what, problem)
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=row.id, why=problem))
        why = self._closed(row) if what == "signers_added" else self._closed_round(row)
        if why:
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=row.id, why=why))
        return self.store.get(row.instance_id)

    def _closed_round(self, row) -> str | None:
        """`_closed` for the round rather than one mail (a decided mail's round may be
        open still)."""
        if row.decision is None:
            return self._closed(row)
        inst = self.store.get(row.instance_id)
        run = inst.circles.get(row.circle)
        if inst.status not in ACTIVE or run is None or run.epoch != row.epoch or \
                approval(run) is None:
            return N_("this approval request is no longer open")
        return None

    def _people(self, names: list[str], inst, caller: Caller) -> None:
        """Refuse (422) signers who cannot be added: none named, unknown or disabled,
        not approvers, the flow's starter, the caller."""
        if not names or any(not n for n in names):
            raise FormError({"users": N_("name at least one user")})
        for name in names:
            person = self.store.user(name)
            if person is None:
                raise FormError({"users": N_("no user named %(name)s", name=name)})
            if person["id"] == inst.user.get("id"):
                raise FormError({"users": N_("%(user)s cannot approve their own request",
                                             user=name)})
            if not access.may_approve(person["roles"]):
                raise FormError({"users": N_("%(name)s is not an approver", name=name)})
            if person["id"] == caller.id:
                raise FormError({"users": N_("%(user)s is asked already", user=name)})

    def _round(self, rows: list[Any], mail_id: int, mine_open: bool = True):
        """(the mail, quorum, seats) of a locked round that may change: every mail intact,
        the mail undecided (`mine_open`), the round not settled; else refused."""
        mine = next((r for r in rows if r.id == mail_id), None)
        if mine is None:
            raise Conflict(N_("this approval request is no longer open"))
        if any(self.check(r) for r in rows):
            raise Tampered(N_("approval %(id)s refused: %(why)s", id=mail_id,
                              why=N_("a mail of its round does not match its signature")))
        if mine_open and mine.decision is not None:
            raise Conflict(N_("approval %(id)s refused: %(why)s", id=mail_id,
                              why=self._closed(mine)))
        terms = signed_terms(rows)
        if terms is None:
            raise Conflict(N_("this approval request is no longer open"))
        quorum, seats = terms
        if rounds.verdict(quorum, seats, _ordered(rows, seats)) is not None:
            raise Conflict(N_("this approval request is no longer open"))
        return mine, quorum, seats

    def _resign(self, rows: list[Any], quorum: Any, seats: rounds.Seats
                ) -> dict[int, dict[str, Any]]:
        """Every mail of the round signed over the new list (its decision, if any, signed
        again by the store)."""
        new = rounds.terms(quorum, seats)
        out = {}
        for r in rows:
            payload = {k: v for k, v in r.payload.items() if k != "seats"} | new
            out[r.id] = {"payload": payload, "signature": self.sign(payload)}
        return out

    def _change(self, row, caller: Caller, plan) -> None:
        """Run a change of the round; a tampered round is recorded as refused."""
        try:
            self.store.change_round(row.instance_id, row.circle, row.epoch, plan,
                                    self._decision_signature)
        except Tampered as exc:
            self._refuse(row, caller, "signers", str(exc))
            raise

    def _unsettled(self, instance_id: str, circle: str) -> bool:
        """Whether the circle's current attempt, its intact mails read now, has no verdict
        (or there is nothing to settle): `settle` then takes no step. Altered mail is for
        the step to record."""
        inst = self.store.get(instance_id)
        run = inst.circles.get(circle)
        if inst.status not in ACTIVE or run is None or run.state != WAITING or \
                approval(run) is None:
            return True
        rows = self.store.attempt_approvals(instance_id, circle, run.epoch)
        if any(self.check(r) for r in rows):
            return False
        terms = signed_terms(rows)
        return terms is None or rounds.verdict(terms[0], terms[1],
                                               _ordered(rows, terms[1])) is None
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
            mine, (quorum, seats) = self._open_round(rows, row, name)
            renamed = [[name if n == caller.username else n for n in chain] for chain in seats]
            terms = rounds.terms(quorum, renamed)
            updates = self._resign(rows, quorum, renamed)
            now = self.store.clock()
            updates[mine.id].update(decision="transferred", comment=comment or "",
                                    updated_at=now, read_at=now)
            for r in rows:  # the caller's delegate is asked no more
                if r.decision is None and r.payload.get("delegated_by") == caller.username:
                    updates[r.id].update(decision="withdrawn", comment="", updated_at=now)
            extra = {**terms, "transferred_from": caller.username, "note": comment or ""}
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

    def _open_round(self, rows: list[Any], row, name: str
                    ) -> tuple[Any, tuple[Any, rounds.Seats]]:
        """(the caller's mail, (quorum, seats)) of a locked round that may be handed on:
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
        return mine, terms

    def _copy_of(self, mine, extra: dict[str, Any]):
        """How to build the mail handed on: the caller's, to someone else, with `extra`
        (who handed it on, and how) signed with it."""
        keep = {k: v for k, v in mine.payload.items()
                if k not in ("delegated_to", "delegated_by", "transferred_from", "note",
                             *(("seats",) if "approvers" in extra else ()))}

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

        handed = self.store.mail(ids[0])
        approvers = handed.payload.get("approvers") if handed is not None else None

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
                "comment": row.comment, "decided_by": row.decided_by,
                "instance": row.instance_id, "circle": row.circle,
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


def _decision_signed(row) -> dict[str, Any]:
    """What a decision's signature is over: the mail (its id and signature), the
    decision, its comment, when and by whom it was taken."""
    signed = {"mail": row.id, "signature": row.signature, "decision": row.decision,
              "comment": row.comment, "decided_at": row.updated_at.isoformat()
              if row.updated_at else None}
    if getattr(row, "decided_by", None) is not None:  # kept since substitutes decide
        signed["by"] = row.decided_by
    return signed


def _ordered_round(row) -> bool:
    """Whether a mail's round asks people in an order (a sequence, or signers added before
    or after someone): only then may someone have to wait, or be asked later."""
    payload = row.payload or {}
    return payload.get("quorum") == "sequence" or "seats" in payload


def _decided(rows: list[Any], seats: rounds.Seats) -> dict[str, str]:
    """The decisions (approved, rejected) of the round's addressees."""
    listed = {n for chain in seats for n in chain}
    return {r.payload["approver"]: r.decision for r in rows
            if r.decision in ("approved", "rejected") and r.payload.get("approver") in listed}


def _ordered(rows: list[Any], seats: rounds.Seats) -> list[tuple[str, str]]:
    """The round's decisions in the order they were taken."""
    listed = {n for chain in seats for n in chain}
    return [(r.payload["approver"], r.decision)
            for r in sorted(rows, key=lambda r: (r.updated_at or r.created_at, r.id))
            if r.decision in ("approved", "rejected") and r.payload.get("approver") in listed]


def conclude(engine: Engine, inst: Instance, circle: str, verdict: str,
             decisions: list[dict[str, Any]], actor: str | None) -> None:
    """An approval's outcome, in the step: "approved" completes the circle with the
    decisions, "rejected" fails it saying who rejected and why (settled mail, and a
    sandbox's decision, SPEC §16)."""
    mark = engine.bookmark(inst, circle)
    if verdict == "approved":
        engine.complete(inst, circle, mark, {"approved": True, "decisions": decisions},
                        actor=actor)
        return
    why = "; ".join(f"{d['approver']} rejected" + (f": {d['comment']}" if d["comment"] else "")
                    for d in decisions if d["decision"] == "rejected")
    engine.fail(inst, circle, mark, f"not approved ({why})", actor=actor)


def send_back_step(store: Store, instance_id: str, cid: str, caller: Caller, comment: str,
                   to: str | None, check: Callable[[Instance], None] | None = None
                   ) -> tuple[Instance, list[str]]:
    """Return the work waiting at `cid` (one durable step; `check` asks who may, on the
    instance as the step sees it, and may ready it: a sandbox's approval is asked
    there): the instance as it left it and the tasks it sent back, ready again with
    why."""
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


def signed_terms(rows: list[Any]) -> tuple[Any, rounds.Seats] | None:
    """The quorum and the seats the intact mails of one attempt were signed with; None
    when there are none, or they disagree."""
    terms = set()
    for r in rows:
        term = [r.payload.get("quorum"), r.payload.get("approvers"), r.payload.get("seats")]
        terms.add(exact(term) or canonical(term))
    if len(terms) != 1:
        return None
    quorum, approvers, seats = orjson.loads(terms.pop())
    if quorum is None or not isinstance(approvers, list) or not approvers:
        return None
    return quorum, rounds.seats_of(approvers, seats)
