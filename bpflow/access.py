"""Who may do what: the one place that decides by roles.

A `Caller` is the person behind a request or a page event (from a verified token). The
API's routes, the web app's states, the mailbox and the worker ask the functions here;
nobody else tests role names. What a caller is (`Caller`, the role names, whose guest mail)
and the tokens naming a person in a task (`tokens_of`, `named_in`) are the store's, which
needs them below the services (`bpflow.store.accounts`, `audience`); they are named here
too.

- An instance's user (its starter) and admins may *act* on it: fill its boxes,
  intervene, read it over the API.
- Whoever was sent mail about an instance (an approver, someone copied or urged) may
  *follow* it read-only.
- Its starter, an admin or one of its assignees copies people on it; its starter or an
  admin urges the people it waits for.
- A circle whose action bpflow runs (HTTP, mail, approval, timer, flow, compute) is
  completed or failed by hand only by an admin (an intervention); its form, while not yet
  sent, is the starter's to fill.
- A circle waiting for a signal (`signal` action) is completed by a signal or by its
  bookmark, sent by an admin or an `integration` user (the systems around bpflow); while
  one waits, integration users of its tenant follow the instance (to find the bookmark),
  and may complete or fail its signal circles only.
- Approval mail is decided by its addressee only, who may transfer it (someone else
  decides) or delegate it (someone else answers, the addressee confirms); a task's
  assignee likewise transfers or delegates it; guest messages are read by admins.
- Substitutes (SPEC §15): a user names their own, an admin anyone's of their tenant;
  while it is active, work addressed to the user by name (a task naming them as a
  candidate or held by them, their approval mail) is also the substitute's, as if it were
  the user's, recorded as "ann for bob". One hop only: whom ann stands in for is never
  passed on to ann's own substitute.
- Whoever sees an instance comments on it and downloads the files its forms hold; an
  upload no form holds yet is its uploader's alone.
- Work waiting at a circle is returned to an earlier step by a pending approver of its
  approval, whoever may act on its task, or an admin.
- A draft is its author's (admins see every draft of their tenant); whoever sees it tries
  it in a sandbox, an instance no other rule here reaches.
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
    Standing,
    acting_for,
    named_in,
    normal_username,
    reads_guest_mail,
    standing,
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
from engine.runtime import utcnow
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
    """Nothing crosses tenants (SPEC §12), and a sandbox (a draft tried in the designer,
    SPEC §16) is driven through `bpflow.sandbox` alone (`may_try`), by nobody as an
    instance: every rule below asks this first."""
    return caller.tenant == inst.tenant and not inst.sandbox


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
    mine.update(t for who in stands_in(caller, inst.template.name)
                for t in tokens_of(who.username, ()))
    return any(run.task is not None and not mine.isdisjoint(named_in(run.task))
               for run in inst.circles.values())


def candidate(caller: Caller, task: Mapping[str, Any], template: str | None = None) -> bool:
    """Whether a task's candidates include the caller (by name or by role), or someone
    named in it the caller stands in for (of the instance's `template`)."""
    return caller.username in task["users"] or not set(caller.roles).isdisjoint(
        task["roles"]) or substitute_for(caller, task["users"], template) is not None


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
        holder, template = task["assignee"], inst.template.name
        return holder == caller.username or substitute_for(caller, [holder], template) \
            is not None if holder else candidate(caller, task, template)
    if not may_act(caller, inst):
        return False
    if not automatic(box.action_type):  # a person's box (a form, a confirmation, sign-in)
        return True
    return bool(box.form) and not action_started(run)


def answering(caller: Caller, inst: Instance, cid: str) -> bool:
    """Whether the caller answers circle `cid`'s task for its assignee, who delegated it
    to them (委派): they fill its form or confirmation, which comes back to the assignee."""
    run = inst.circles.get(cid)
    return run is not None and run.task is not None and same_tenant(caller, inst) and \
        not action_started(run) and may_answer(caller, run.task)


def may_fill(caller: Caller, inst: Instance, cid: str) -> bool:
    """Whether the caller may send circle `cid`'s box (and so gets its bookmark): who may
    drive it, or its delegate answering."""
    return may_drive(caller, inst, cid) or answering(caller, inst, cid)


def drivable(caller: Caller, inst: Instance, cid: str, answer: bool = False) -> None:
    """`may_drive` (or with `answer`, `answering`: sending a form a delegate answers),
    or the reason why not (NotFound for a circle that does not exist)."""
    node = inst.template.plan.nodes.get(cid)
    if node is None:
        raise NotFound(N_("instance has no circle '%(uri)s'", uri=cid))
    if may_drive(caller, inst, cid) or (answer and answering(caller, inst, cid)):
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


def may_claim(caller: Caller, task: Mapping[str, Any], template: str | None = None) -> bool:
    """A candidate claims a task nobody holds (admins too; a substitute for a candidate
    named in it, of the instance's `template`)."""
    return task["assignee"] is None and (caller.is_admin or candidate(caller, task, template))


def may_unclaim(caller: Caller, task: Mapping[str, Any]) -> bool:
    """Its assignee gives a task back (or an admin takes it from them)."""
    return task["assignee"] is not None and (caller.is_admin
                                             or task["assignee"] == caller.username)


def may_transfer(caller: Caller, task: Mapping[str, Any], to: Caller) -> bool:
    """Transfer (转办, `/assign`): the assignee hands the task to another candidate; an
    admin to anyone (of their tenant)."""
    if to.tenant != caller.tenant:
        return False
    if caller.is_admin:
        return True
    return task["assignee"] == caller.username and candidate(to, task)


def may_delegate(caller: Caller, task: Mapping[str, Any], to: Caller) -> bool:
    """Delegate (委派, SPEC §15): the assignee asks someone else of their tenant to answer
    the task for them (the answer comes back to them to confirm), while nobody else is
    asked."""
    return to.tenant == caller.tenant and task["assignee"] == caller.username and \
        to.username != caller.username and not task.get("delegate")


def may_answer(caller: Caller, task: Mapping[str, Any]) -> bool:
    """The delegate of a task answers it (the form, or the confirmation) for its
    assignee."""
    delegate = task.get("delegate") or {}
    return delegate.get("to") == caller.username and delegate.get("answer") is None


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


def may_fetch_upload(caller: Caller, tenant: str, owner_id: int) -> bool:
    """Download an upload no form holds yet: its uploader only (once a form holds it,
    whoever sees that instance)."""
    return caller.tenant == tenant and caller.id == owner_id


def may_copy(caller: Caller, inst: Instance) -> bool:
    """Copy people on an instance (SPEC §15, 抄送): its starter, an admin, or someone who
    holds (or held) one of its tasks. Whoever is copied follows it read-only (they were
    sent mail about it: `sight`'s `asked`)."""
    return may_act(caller, inst) or same_tenant(caller, inst) and any(
        run.task is not None and run.task.get("assignee") == caller.username
        for run in inst.circles.values())


def may_urge(caller: Caller, inst: Instance) -> bool:
    """Urge the people an instance waits for (SPEC §15, 催办): its starter or an admin."""
    return may_act(caller, inst)


def instance_scope(caller: Caller) -> int | None:
    """Whose instances the caller lists and counts: their own (a user id), or everyone's
    (None) for admins."""
    return None if caller.is_admin else caller.id


def may_read_mail(caller: Caller, kind: str, recipient_id: int | None) -> bool:
    """Mail addressed to the caller (and approvals addressed to whom they stand in for
    now); guest messages (no addressee) for admins."""
    if recipient_id is not None:
        return recipient_id == caller.id or kind == "approval" and any(
            s.user_id == recipient_id for s in standing(caller, utcnow(), any_template=True))
    return kind == "guest" and reads_guest_mail(caller)


def may_decide(caller: Caller, recipient_id: int | None) -> bool:
    """Only the addressee decides an approval (or their substitute: `deciding_as`)."""
    return recipient_id is not None and recipient_id == caller.id


def may_add_signers(caller: Caller, recipient_id: int | None) -> bool:
    """Add signers to a pending approval (加签, SPEC §15): its addressee."""
    return may_decide(caller, recipient_id)


def require_signers_removal(caller: Caller, inst: Instance, recipient_id: int | None) -> None:
    """Remove signers of a pending approval (减签, SPEC §15): the flow's starter or an
    admin; its addressee (who sees the flow) is forbidden, anyone else told it does not
    exist."""
    if may_act(caller, inst):
        return
    if same_tenant(caller, inst) and recipient_id is not None and recipient_id == caller.id:
        raise Forbidden(N_("only the flow's starter or an admin may remove signers"))
    raise NotFound(N_("no approval mail"))
def may_hand_over(caller: Caller, recipient_id: int | None) -> bool:
    """Transfer or delegate an approval mail (转办, 委派; SPEC §15): its addressee."""
    return may_decide(caller, recipient_id)


APPROVING = (APPROVER, ADMIN)  # the roles of those who can be asked for an approval
def deciding_as(caller: Caller, recipient_id: int | None,
                template: Callable[[], str | None]) -> Caller | None:
    """Who decides an approval mail addressed to `recipient_id`: the caller when it is
    theirs; when they stand in for its addressee now (for the instance's template, asked
    of `template()` only then), the caller recorded as "ann for bob" (SPEC §15: it counts
    as the addressee's decision); else None (they may not)."""
    if may_decide(caller, recipient_id):
        return caller
    if recipient_id is None or not any(s.user_id == recipient_id for s in caller.stands_for):
        return None
    for one in stands_in(caller, template()):
        if one.user_id == recipient_id:
            return Caller(caller.id, acting_for(caller.username, one.username), caller.roles,
                          caller.tenant, caller.generation)
    return None


def may_approve(roles: Iterable[str]) -> bool:
    """Whether a user with these roles can be asked for an approval."""
    return bool(set(APPROVING) & set(roles))


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


# ------------------------------------------------------------------ substitutes (SPEC §15)
SUBSTITUTE_TEMPLATES_MAX = 50  # templates one substitution may name


def stands_in(caller: Caller, template: str | None) -> list[Standing]:
    """Whom the caller stands in for now, for work of `template`: one hop only (whom
    they stand in for is theirs alone, never their own substitute's)."""
    return standing(caller, utcnow(), template) if caller.stands_for else []


def substitute_for(caller: Caller, names: Iterable[str | None],
                   template: str | None) -> str | None:
    """The first of `names` (usernames a task names) the caller stands in for now, for
    work of `template`; None when none."""
    if not caller.stands_for:
        return None
    mine = {s.username for s in stands_in(caller, template)}
    return next((n for n in names if n in mine), None)


def mail_ids(caller: Caller, template: str | None) -> list[int]:
    """Whose mail about an instance of `template` lets the caller follow it: theirs, and
    that of whom they stand in for now."""
    return [caller.id, *(s.user_id for s in stands_in(caller, template))]


def may_set_substitute(caller: Caller, username: str) -> bool:
    """A user names (or clears) their own substitute; an admin anyone's of their tenant
    (the store looks the name up in the admin's tenant only)."""
    return caller.is_admin or normal_username(username) == caller.username


def substitute_settable(caller: Caller, username: str) -> None:
    """`may_set_substitute`, or Forbidden saying why not."""
    if not may_set_substitute(caller, username):
        raise Forbidden(N_("only admins may set another user's substitute"))


def substitute_refusal(user: str, to: str, to_enabled: bool, chain: Iterable[str]) -> str | None:
    """Why `to` cannot be `user`'s substitute, or None: an unknown or disabled account,
    the user themselves, or a cycle (`chain`: `to`'s substitute, theirs, and so on)."""
    if not to_enabled:
        return N_("no user '%(name)s' (or the account is disabled)", name=to)
    if to == user:
        return N_("a user cannot be their own substitute")
    if user in chain:
        return N_("%(to)s's substitutes lead back to %(user)s: substitutes may not form a"
                  " cycle", to=to, user=user)
    return None


# ------------------------------------------------------------------ designing (SPEC §16)
DESIGNER = "designer"  # the role of those who design templates in the browser (and admins)


def may_design(caller: Caller) -> bool:
    """Design templates (drafts, publishing them): admins and users of the role
    `designer`."""
    return caller.is_admin or DESIGNER in caller.roles


def require_designer(caller: Caller) -> None:
    if not may_design(caller):
        raise Forbidden(N_("only admins and designers may design templates"))


def may_see_draft(caller: Caller, tenant: str, author_id: int) -> bool:
    """A draft is its author's; the admins of its tenant see (and delete) them all.
    Someone else's draft is not found (no existence leak)."""
    return may_design(caller) and caller.tenant == tenant and (
        caller.id == author_id or caller.is_admin)


def draft_changeable(caller: Caller, author_id: int) -> None:
    """Only its author saves or publishes a draft (an admin who sees it: Forbidden)."""
    if caller.id != author_id:
        raise Forbidden(N_("only its author may change or publish a draft"))


def drafts_scope(caller: Caller) -> int | None:
    """Whose drafts a caller lists: their own (their id), or every author's (None) for
    an admin."""
    require_designer(caller)
    return None if caller.is_admin else caller.id


def may_try(caller: Caller, tenant: str, author_id: int) -> bool:
    """Try a draft in a sandbox (SPEC §16: start it, drive its circles, delete it):
    whoever sees the draft, its author and the admins of its tenant."""
    return may_see_draft(caller, tenant, author_id)
