"""Who may do what: the one place that decides by roles.

A `Caller` is the person behind a request or a page event (from a verified token). The
API's routes, the web app's states, the mailbox and the worker ask the functions here;
nobody else tests role names. What a caller is (`Caller`, the role names, whose guest mail)
and the tokens naming a person in a task (`tokens_of`, `named_in`) are the store's, which
needs them below the services (`bpflow.store.accounts`, `audience`); they are named here
too.

- An instance's user (its starter) and admins may *act* on it: fill its boxes,
  intervene, read it over the API.
- Whoever was sent mail about an instance (an approver) may *follow* it read-only.
- A circle whose action bpflow runs (HTTP, mail, approval, timer, flow, compute) is
  completed or failed by hand only by an admin (an intervention); its form, while not yet
  sent, is the starter's to fill.
- A circle waiting for a signal (`signal` action) is completed by a signal or by its
  bookmark, sent by an admin or an `integration` user (the systems around bpflow); while
  one waits, integration users of its tenant follow the instance (to find the bookmark),
  and may complete or fail its signal circles only.
- Approval mail is decided by its addressee only; guest messages are read by admins.
- Work waiting at a circle is returned to an earlier step by a pending approver of its
  approval, whoever may act on its task, or an admin.
- Templates, users, webhooks, the event feed, migrations and crowds are administered by
  admins; an admin resets the others' passwords, everyone changes their own (with the
  current one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any

from bpflow.errors import Forbidden, NotFound
from bpflow.store.public import (  # who a caller is, and role names: the store's accounts
    ADMIN,
    APPROVER,
    INTEGRATION,
    Caller,
    named_in,
    normal_username,
    reads_guest_mail,
    tokens_of,
)
from bpflow.store.public import DEFAULT_TENANT as DEFAULT_TENANT
from bpflow.store.public import ROLES as ROLES
from bpflow.store.public import USER as USER
from bpflow.store.public import valid_roles as valid_roles
from engine.instance import Instance
from engine.kinds import automatic
from engine.messages import N_
from engine.phase import action_started, approval
from engine.signals import waiting_for


class Sight(Enum):
    """How much of an instance a caller gets to see."""

    NONE = "none"
    FOLLOW = "follow"  # read-only (an approver asked about it)
    ACT = "act"  # fill its boxes, intervene


def is_admin(caller: Caller) -> bool:
    return caller.is_admin


def require_admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden(N_("only admins may do this"))


def may_signal(caller: Caller) -> bool:
    """Send signals (SPEC §11): admins and `integration` users."""
    return caller.is_admin or INTEGRATION in caller.roles


def require_signaller(caller: Caller) -> None:
    if not may_signal(caller):
        raise Forbidden(N_("only admins and integration users may send signals"))


def same_tenant(caller: Caller, inst: Instance) -> bool:
    """Nothing crosses tenants (SPEC §12): every rule below asks this first."""
    return caller.tenant == inst.tenant


def may_act(caller: Caller, inst: Instance) -> bool:
    """Fill an instance's boxes and intervene: its user and admins (of its tenant)."""
    return same_tenant(caller, inst) and (caller.is_admin or inst.user.get("id") == caller.id)


def acting(caller: Caller, inst: Instance) -> Instance:
    """The instance if the caller may act on it; else the 'not found' of what does not
    exist (whether it exists is not for them to learn)."""
    if not may_act(caller, inst):
        raise NotFound(N_("no instance '%(id)s'", id=inst.id))
    return inst


def sight(caller: Caller, inst: Instance, asked: Callable[[], bool]) -> Sight:
    """ACT for its user and admins, FOLLOW for the people it asked (named by a task of
    one of its circles, or sent mail about it: `asked` is only called when it matters) and
    integration users while it waits for a signal, else NONE."""
    if not same_tenant(caller, inst):
        return Sight.NONE
    if may_act(caller, inst):
        return Sight.ACT
    return Sight.FOLLOW if named(caller, inst) or awaited(caller, inst) or asked() \
        else Sight.NONE


def awaited(caller: Caller, inst: Instance) -> bool:
    """Whether the caller may send signals and a circle of the instance waits for one
    (its tenancy is the caller's to check)."""
    return may_signal(caller) and any(waiting_for(run) is not None
                                      for run in inst.circles.values())


def seeing(caller: Caller, inst: Instance, asked: Callable[[], bool]) -> Instance:
    """The instance if the caller may see it; else the 'not found' of what does not exist."""
    if sight(caller, inst, asked) is Sight.NONE:
        raise NotFound(N_("no instance '%(id)s'", id=inst.id))
    return inst


def named(caller: Caller, inst: Instance) -> bool:
    """Whether a task of the instance (open or done) names the caller, as a candidate, by
    one of their roles, or as its assignee."""
    mine = set(tokens_of(caller.username, caller.roles))
    return any(run.task is not None and not mine.isdisjoint(named_in(run.task))
               for run in inst.circles.values())


def candidate(caller: Caller, task: Mapping[str, Any]) -> bool:
    """Whether a task's candidates include the caller (by name or by role)."""
    return caller.username in task["users"] or not set(caller.roles).isdisjoint(task["roles"])


def may_drive(caller: Caller, inst: Instance, cid: str) -> bool:
    """Whether the caller may complete or fail circle `cid` by hand. A person's task is
    its assignee's, or while nobody holds it its candidates' (completing claims it); what
    bpflow runs, and what an approver decides, is an admin's intervention; admins may
    always intervene (in their tenant)."""
    if not same_tenant(caller, inst):
        return False
    if caller.is_admin:
        return True
    box = inst.template.plan.nodes[cid].circle.box
    if box.action_type == "signal":  # the outside world's, by its bookmark
        return may_signal(caller)
    run = inst.circles[cid]
    task = run.task
    if task is not None and not action_started(run):
        holder = task["assignee"]
        return holder == caller.username if holder else candidate(caller, task)
    if not may_act(caller, inst):
        return False
    if not automatic(box.action_type):  # a person's box (a form, a confirmation, sign-in)
        return True
    return bool(box.form) and not action_started(run)


def drivable(caller: Caller, inst: Instance, cid: str) -> None:
    """`may_drive`, or the reason why not (NotFound for a circle that does not exist)."""
    node = inst.template.plan.nodes.get(cid)
    if node is None:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=cid))
    if may_drive(caller, inst, cid):
        return
    task = inst.circles[cid].task
    if task is not None and not action_started(inst.circles[cid]):
        holder = task["assignee"]
        raise Forbidden(N_("circle '%(uri)s' is %(user)s's task", uri=cid, user=holder)
                        if holder else
                        N_("circle '%(uri)s' waits for %(whom)s", uri=cid, whom=describe(task)))
    raise Forbidden(N_("circle '%(uri)s' runs a %(kind)s action; only an admin may complete or"
                       " fail it by hand", uri=cid, kind=node.circle.box.action_type))


def describe(task: Mapping[str, Any]) -> str:
    """Whom a task waits for, in words: "bob, carol or someone in finance"."""
    who = list(task["users"]) + [N_("someone in %(role)s", role=r) for r in task["roles"]]
    if not who:
        return N_("nobody")
    some = who[0]
    for one in who[1:-1]:
        some = N_("%(some)s, %(one)s", some=some, one=one)
    return some if len(who) == 1 else N_("%(some)s or %(last)s", some=some, last=who[-1])


def may_claim(caller: Caller, task: Mapping[str, Any]) -> bool:
    """A candidate claims a task nobody holds (admins too)."""
    return task["assignee"] is None and (caller.is_admin or candidate(caller, task))


def may_unclaim(caller: Caller, task: Mapping[str, Any]) -> bool:
    """Its assignee gives a task back (or an admin takes it from them)."""
    return task["assignee"] is not None and (caller.is_admin
                                             or task["assignee"] == caller.username)


def may_delegate(caller: Caller, task: Mapping[str, Any], to: Caller) -> bool:
    """The assignee hands the task to another candidate; an admin to anyone (of their
    tenant)."""
    if to.tenant != caller.tenant:
        return False
    if caller.is_admin:
        return True
    return task["assignee"] == caller.username and candidate(to, task)


def may_return(caller: Caller, inst: Instance, cid: str, approver: Callable[[], bool]) -> bool:
    """Send the work waiting at circle `cid` back to an earlier step (SPEC §15, 驳回): for
    an approval, a pending approver of it (`approver`, asked only then: their mail of the
    attempt is undecided); for a task, whoever may act on it (its assignee, else its
    candidates: `may_drive`); admins (in their tenant) always."""
    if not same_tenant(caller, inst):
        return False
    if caller.is_admin:
        return True
    if approval(inst.circles[cid]) is not None:
        return approver()
    return inst.circles[cid].task is not None and may_drive(caller, inst, cid)


def may_withdraw(caller: Caller, inst: Instance) -> bool:
    """The starter (or an admin) takes back a pending approval or task."""
    return may_act(caller, inst)


def instance_scope(caller: Caller) -> int | None:
    """Whose instances the caller lists and counts: their own (a user id), or everyone's
    (None) for admins."""
    return None if caller.is_admin else caller.id


def may_read_mail(caller: Caller, kind: str, recipient_id: int | None) -> bool:
    """Mail addressed to the caller; guest messages (no addressee) for admins."""
    if recipient_id is not None:
        return recipient_id == caller.id
    return kind == "guest" and reads_guest_mail(caller)


def may_decide(caller: Caller, recipient_id: int | None) -> bool:
    """Only the addressee decides an approval."""
    return recipient_id is not None and recipient_id == caller.id


def may_approve(roles: Iterable[str]) -> bool:
    """Whether a user with these roles can be asked for an approval."""
    return bool({APPROVER, ADMIN} & set(roles))


def may_start(caller: Caller, template: Mapping[str, Any] | Any) -> bool:
    """Whether the caller may start a template (its body, or a Template with `body`):
    admins always; anyone signed in when it names no `starters`; else those having one
    of the roles it names."""
    body = template if isinstance(template, Mapping) else getattr(template, "body", {})
    starters = body.get("starters")
    return caller.is_admin or starters is None or bool(set(starters) & set(caller.roles))


def startable(caller: Caller, template: Mapping[str, Any] | Any) -> None:
    """`may_start`, or Forbidden saying who may."""
    if not may_start(caller, template):
        body = template if isinstance(template, Mapping) else getattr(template, "body", {})
        starters = ", ".join(body.get("starters") or ())
        raise Forbidden(N_("only %(roles)s may start '%(name)s'", roles=starters,
                           name=body.get("name", "")) if starters else
                        N_("only admins may start '%(name)s'", name=body.get("name", "")))


def own_account_kept(caller: Caller, username: str, roles: Iterable[str] | None = None,
                     disable: bool = False) -> None:
    """An admin may not lock themselves out: disabling their own account or taking away
    their own admin role is Forbidden."""
    if username != caller.username:
        return
    if disable:
        raise Forbidden(N_("you cannot disable your own account"))
    if roles is not None and caller.is_admin and ADMIN not in set(roles):
        raise Forbidden(N_("you cannot take away your own admin role"))


def may_reset_password(caller: Caller, username: str) -> bool:
    """Give someone a new password without knowing theirs: admins, for the others of their
    tenant (the store looks the name up in the admin's tenant only). Their own they change
    with their current password, as everyone does."""
    return caller.is_admin and normal_username(username) != caller.username


def password_resettable(caller: Caller, username: str) -> None:
    """`may_reset_password`, or Forbidden saying why not."""
    require_admin(caller)
    if not may_reset_password(caller, username):
        raise Forbidden(N_("change your own password with your current password"))
