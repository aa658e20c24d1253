"""Returning work to an earlier step (SPEC §15, 驳回/退回): where the work waiting at a
circle may go back to, and the return itself, for the REST API and the pages alike.

A pending approval is returned through its approver's mail (`Mailbox.decide`, decision
"returned", which closes the attempt's mails); a task by whoever may act on it. Who may is
`access.may_return`, asked inside the step; the reset, the history (actor, comment) and
the tasks coming back with their answers are the engine's (`engine.tasks.send_back`);
the mail telling their people why is the mailbox's (`Mailbox.tell_returned`).
"""

from __future__ import annotations

from typing import Any

from bpflow import access
from bpflow.access import Caller
from bpflow.errors import Forbidden, NotFound
from bpflow.languages import pick
from bpflow.mailbox import Mailbox, send_back_step
from bpflow.moves.steps import visible
from bpflow.store import Store
from engine.instance import Instance
from engine.messages import N_
from engine.phase import approval
from engine.runtime import Engine
from engine.tasks import START, first_circles


def open_mail(store: Store, caller: Caller, inst: Instance, uri: str) -> Any:
    """The caller's undecided approval mail of the circle's current attempt, or None."""
    run = inst.circles[uri]
    if approval(run) is None:
        return None
    return next((m for m in store.attempt_approvals(inst.id, uri, run.epoch)
                 if m.recipient_id == caller.id and m.decision is None), None)


def _allowed(store: Store, caller: Caller, inst: Instance, uri: str) -> None:
    if uri not in inst.circles:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
    if not access.may_return(caller, inst, uri,
                             lambda: open_mail(store, caller, inst, uri) is not None):
        raise Forbidden(N_("only a pending approver of circle '%(uri)s', or whoever may act"
                           " on its task, may return it", uri=uri))


def return_targets(store: Store, caller: Caller, iid: str, uri: str,
                   lang: str | None = None) -> list[dict[str, str]]:
    """Where the work waiting at `uri` may be returned to, for the person returning it:
    `{"to", "description"}` for each succeeded circle upstream, then `@start` (described
    by the first circles), described in `lang` when given."""
    visible(store, caller, iid)
    inst = store.get(iid)
    _allowed(store, caller, inst, uri)
    return described_targets(store.engine, inst, uri, lang)


def described_targets(engine: Engine, inst: Instance, uri: str,
                      lang: str | None = None) -> list[dict[str, str]]:
    """`return_targets`' list once the caller may see it (a draft's sandbox too, SPEC
    §16): each target (`engine.tasks.return_targets`) with its step's description in
    `lang` (else as written), its uri where it has none."""
    nodes = inst.template.plan.nodes

    def words(cid: str) -> str:
        text = nodes[cid].circle.description
        return (pick(text, lang) if lang else str(text or "")) or cid.rsplit(".", 1)[-1]
    return [{"to": to, "description": ", ".join(words(c) for c in first_circles(inst))
             if to == START else words(to)}
            for to in engine.return_targets(inst, uri)]


def return_work(store: Store, caller: Caller, iid: str, uri: str, to: str | None = None,
                comment: str = "") -> Instance:
    """Return the work waiting at `uri` to `to` (a succeeded circle upstream, `@start`;
    default the circles right before it) with a comment: by its approver's mail for a
    pending approval, else as one step checked inside. Returns the instance after it."""
    visible(store, caller, iid)
    inst = store.get(iid)
    if uri not in inst.circles:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=uri))
    mailbox = Mailbox(store)
    mail = open_mail(store, caller, inst, uri)
    if mail is not None:
        mailbox.decide(mail.id, caller, "returned", comment, to)
        return store.get(iid)
    run = inst.circles[uri]

    def check(current: Instance) -> None:
        _allowed(store, caller, current, uri)
    inst, back = send_back_step(store, iid, uri, caller, comment, to, check)
    if approval(run) is not None:  # an admin's intervention: nobody is asked any more
        mailbox.close_attempt(iid, uri, run.epoch, "withdrawn")
    mailbox.tell_returned(inst, uri, back, caller, comment)
    return inst
