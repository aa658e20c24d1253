"""Tenants in the pages (SPEC §12): nothing of another tenant shows anywhere. Two tenants,
`default` (root the admin, alice, bob the approver, fred in finance) and `acme` (acmeadmin,
acmeuser, acmeboss the approver, acmefin in finance), each with flows, approval mail, a
task and a guest message; every role's page states (My flows with its filters and Taking
part, the inbox's counts, lists and Tasks tab, the templates page, the users page, the flow
page, the user picker, the delegate dialog, the frame) list their own tenant's things
only, and the other tenant's ids are not found. The header names a tenant other than
`default`; the guest page of a tenant writes to its admins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from bpflow import backend
from bpflow.auth import issue_token
from bpflow.interactions import OUTER_STATUSES, Interactions
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.tenancy import create_tenant
from bpflow.worker import Worker
from bpflow_app.flowsview import ANY
from bpflow_app.frame_state import FrameState, SignInState
from bpflow_app.pages.flow_state import FlowState
from bpflow_app.pages.flows_state import FlowsState
from bpflow_app.pages.guest_state import GuestState, page_tenant
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.tasks_state import TasksState
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.pages.users_state import UsersState
from tests.app.conftest import SECRET, open_web_store
from tests.app.helpers import run

DEFAULT, ACME = "default", "acme"
ACME_ONLY = {"name": "intake", "title": "Acme intake",
             "circles": [{"uri": "note", "box": {"form": [
                 {"name": "text", "type": "string", "label": "Note", "required": True}]}}]}
DEFAULT_ONLY = ("order", "onboarding")  # imported in default only
BOTH = "reimbursement"  # a template of the same name in both tenants


@dataclass
class World:
    store: Store  # the root store: the tenant default's view
    ids: dict[str, set[str]]  # every instance id of each tenant
    claims: dict[str, str]  # each tenant's reimbursement whose review waits for finance
    drafts: dict[str, str]  # each tenant's reimbursement waiting at its claim form
    users: dict[str, set[str]]  # each tenant's usernames
    templates: dict[str, set[str]]  # each tenant's template names

    def view(self, tenant: str) -> Store:
        return self.store.of(tenant)


def _claim(store: Store, user: str, manager: str, finance: str, work) -> str:
    """A reimbursement of `user`'s, approved by `manager`: its review waits for finance."""
    inst = store.start(BOTH, {}, store.user(user))
    Interactions(store).submit(inst.id, "claim", store.engine.bookmark(inst, "claim"),
                               {"amount": 30, "reason": f"Hotel of {user}",
                                "manager": manager}, user)
    work()
    mail = Mailbox(store).inbox(store.user(manager), kind="approval")[0]
    Mailbox(store).decide(mail["id"], store.user(manager), "approved")
    work()
    assert store.get(inst.id).circles["review"].task["roles"] == ["finance"]
    assert store.usernames("finance") == [finance]
    return inst.id


@pytest.fixture(scope="module")
def _shared(tmp_path_factory) -> Iterator[World]:
    """One two-tenant world for the whole module (it takes seconds to build): the tests
    read it, and what they change is their own (a retirement, a new user, a sign-in)
    or refused."""
    patch = pytest.MonkeyPatch()
    patch.setenv("BPFLOW_SECRET", SECRET)
    store = open_web_store(tmp_path_factory.mktemp("tenants"))
    patch.setattr(backend, "_store", store)
    worker = Worker(store)
    try:
        yield _build(store, lambda: worker.run_once())
    finally:
        patch.undo()
        store.close()


@pytest.fixture
def web_store(_shared, monkeypatch) -> Store:
    """The module's store as the process-wide one (overrides the conftest's new store)."""
    monkeypatch.setenv("BPFLOW_SECRET", SECRET)
    monkeypatch.setattr(backend, "_store", _shared.store)
    return _shared.store


@pytest.fixture
def world(_shared) -> World:
    return _shared


def _build(root: Store, work) -> World:
    root.add_user("fred", "fred-password", ["user", "finance"])
    acme = create_tenant(root, ACME, "acmeadmin", "acmeadmin-password")
    acme.add_user("acmeuser", "acmeuser-password", ["user"])
    acme.add_user("acmeboss", "acmeboss-password", ["approver"])
    acme.add_user("acmefin", "acmefin-password", ["user", "finance"])
    acme.put_template(_shipped(BOTH))
    acme.put_template(ACME_ONLY)
    claims = {DEFAULT: _claim(root, "alice", "bob", "fred", work),
              ACME: _claim(acme, "acmeuser", "acmeboss", "acmefin", work)}
    drafts = {DEFAULT: root.start(BOTH, {}, root.user("alice")).id,
              ACME: acme.start(BOTH, {}, acme.user("acmeuser")).id}
    root.start("order", {"customer": "Initech"}, root.user("alice"))
    acme.start("intake", {}, acme.user("acmeuser"))
    Mailbox(root).guest_message("Eve", "for default", "hello default", "1.1.1.1")
    Mailbox(acme).guest_message("Eve", "for acme", "hello acme", "1.1.1.1")
    # Sessions: everyone signs in once (the outer flow in their own tenant).
    for name in ("root", "alice", "bob", "fred", "acmeadmin", "acmeuser", "acmeboss",
                 "acmefin"):
        assert Interactions(root).sign_in(name, f"{name}-password") is not None
    ids = {t: {r["id"] for r in root.of(t).list_instances(None, None, None, 1000)[0]}
           for t in (DEFAULT, ACME)}
    assert claims[ACME] in ids[ACME] and claims[ACME] not in ids[DEFAULT]
    return World(root, ids, claims, drafts,
                 {t: {u["username"] for u in root.of(t).list_users()} for t in (DEFAULT, ACME)},
                 {t: set(root.of(t).template_versions()) for t in (DEFAULT, ACME)})


def _shipped(name: str) -> Any:
    return json.loads((backend.TEMPLATES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def page(world, make_state):
    """`page(StateClass, user, tenant, path="/")`: the state as `user` of `tenant` sees it."""

    def make(cls, user: str, tenant: str, path: str = "/"):
        state = make_state(cls, path=path)
        state.token = issue_token(world.view(tenant).user(user))
        return state

    return make


# Each role of each tenant: (user, tenant, admin?).
ROLES = [("root", DEFAULT, True), ("alice", DEFAULT, False), ("bob", DEFAULT, False),
         ("fred", DEFAULT, False), ("acmeadmin", ACME, True), ("acmeuser", ACME, False),
         ("acmeboss", ACME, False), ("acmefin", ACME, False)]
APPROVERS = {"bob", "acmeboss"}
FINANCE = {"fred", "acmefin"}
OTHER = {DEFAULT: ACME, ACME: DEFAULT}


def test_the_world_has_both_tenants_apart(world):
    assert world.users == {DEFAULT: {"alice", "bob", "carol", "fred", "root"},
                           ACME: {"acmeadmin", "acmeboss", "acmefin", "acmeuser"}}
    assert world.templates[ACME] == {"signin", BOTH, "intake"}
    assert set(DEFAULT_ONLY) | {"signin", BOTH} <= world.templates[DEFAULT]
    assert "intake" not in world.templates[DEFAULT]
    assert not world.ids[DEFAULT] & world.ids[ACME]


@pytest.mark.parametrize("user,tenant,admin", ROLES)
def test_my_flows_shows_only_the_tenants_flows(world, page, user, tenant, admin):
    other = OTHER[tenant]
    flows = page(FlowsState, user, tenant)
    flows.load()
    own = world.ids[tenant]
    assert {i.id for i in flows.instances} <= own
    assert {i.id for i in flows.taking_part} <= own
    assert set(flows.templates) - {ANY} <= world.templates[tenant]
    assert {s.name for s in flows.startables} <= world.templates[tenant]
    if tenant == ACME:
        assert "intake" in {s.name for s in flows.startables}
        assert not {s.name for s in flows.startables} & set(DEFAULT_ONLY)
    else:
        assert "intake" not in {s.name for s in flows.startables}
    # The filters: another tenant's only template is no choice; its ids match nothing.
    for name in world.templates[other] - world.templates[tenant]:
        flows.set_template(name)
        assert flows.template == ANY
    for iid in world.ids[other]:
        flows.set_query(iid)
        assert flows.instances == [] and flows.total == 0
    flows.clear_filters()
    for status in ("running", "completed", "failed"):
        flows.set_status(status)
        assert {i.id for i in flows.instances} <= own
    flows.clear_filters()
    flows.set_template(BOTH)  # the same name in both: only this tenant's
    assert {i.id for i in flows.instances} <= own
    expected = {"alice": 2, "acmeuser": 2}.get(user, 0)  # their reimbursements
    assert flows.total == expected
    # Taking part: the people the claims asked (approval, finance's task).
    part = {i.id for i in flows.taking_part}
    assert part == ({world.claims[tenant]} if user in APPROVERS | FINANCE else set())


@pytest.mark.parametrize("user,tenant,admin", ROLES)
def test_the_inbox_counts_and_lists_only_the_tenants_mail_and_tasks(world, page, user,
                                                                    tenant, admin):
    inbox = page(MailState, user, tenant)
    run(inbox.load())
    tasks = page(TasksState, user, tenant)
    tasks.load()
    own = world.ids[tenant]
    mails = {}
    for kind in ("approval", "message", "guest"):
        run(inbox.show(kind))
        mails[kind] = list(inbox.mails)
        assert {m.instance for m in inbox.mails if m.instance} <= own
        assert inbox.total == len(inbox.mails)
    guests = [m.subject for m in mails["guest"]]
    assert guests == ([f"for {tenant}"] if admin else [])
    assert inbox.unread["guest"] == (1 if admin else 0)
    approvals = {m.instance for m in mails["approval"]}
    assert approvals == ({world.claims[tenant]} if user in APPROVERS else set())
    run(inbox.show("tasks"))
    run(tasks.show("tasks"))
    assert inbox.kind == "tasks" and tasks.shown
    listed = {t.instance for which in ("me", "candidate") for t in tasks.tasks[which]}
    assert listed <= own
    if user in FINANCE:
        assert listed == {world.claims[tenant]}
    elif user in ("alice", "acmeuser"):  # their own forms (the claim waiting for them)
        assert world.drafts[tenant] in listed and world.claims[tenant] not in listed
    else:
        assert listed == set()
    assert tasks.task_count == len(listed)
    frame = page(FrameState, user, tenant)
    frame.load()
    assert frame.unread == sum(inbox.unread.values()) and frame.main_state == "success"


@pytest.mark.parametrize("user,tenant,admin", ROLES)
def test_another_tenants_mail_and_tasks_are_not_found(world, page, user, tenant, admin):
    other = OTHER[tenant]
    root_of_other = "root" if other == DEFAULT else "acmeadmin"
    theirs = Mailbox(world.view(other)).inbox(world.view(other).user(root_of_other))
    assert theirs  # the guest message at least
    inbox = page(MailState, user, tenant)
    run(inbox.load())
    for mail in theirs:
        run(inbox.toggle(mail["id"]))
        events = run(inbox.decide(mail["id"], "approved"))
        assert "toast" in str(events)
    assert Mailbox(world.view(other)).inbox(world.view(other).user(root_of_other)) == theirs
    claim = world.claims[other]
    tasks = page(TasksState, user, tenant)
    tasks.load()
    run(tasks.claim(claim, "review"))
    assert world.view(other).get(claim).circles["review"].task["assignee"] is None
    tasks.ask_hand(claim, "review", "review", "transfer")
    assert tasks.people == [] and tasks.handing == ""


@pytest.mark.parametrize("user,tenant,admin", ROLES)
def test_the_flow_page_of_another_tenants_flow_is_not_found(world, page, user, tenant,
                                                            admin):
    for iid in world.ids[OTHER[tenant]]:
        flow = page(FlowState, user, tenant, path=f"/flow/{iid}")
        flow.load()
        assert flow.missing and flow.boxes == [] and flow.nodes == []
        flow.set_tab("history")
        assert flow.history == []
        run(flow.claim("review"))
        flow.ask_control("abort")
        assert flow.ask == ""
    claim = world.claims[OTHER[tenant]]
    assert world.store.of(OTHER[tenant]).get(claim).circles["review"].task["assignee"] is None


@pytest.mark.parametrize("tenant,user", [(DEFAULT, "alice"), (ACME, "acmeuser")])
def test_the_user_picker_offers_the_tenants_people_only(world, page, tenant, user):
    flow = page(FlowState, user, tenant, path=f"/flow/{world.drafts[tenant]}")
    flow.load()
    [box] = [b for b in flow.boxes if b.cid == "claim"]
    manager = {f.name: f for f in box.fields}["manager"]
    approvers = {DEFAULT: ["bob"], ACME: ["acmeboss"]}[tenant]
    assert manager.options == approvers
    # A name of the other tenant is no account here.
    stranger = {DEFAULT: "acmeboss", ACME: "bob"}[tenant]
    run(flow.submit({"__circle": "claim", "__bookmark": box.bookmark, "amount": "5",
                     "reason": "Taxi", "manager": stranger}))
    assert "manager" in flow._errors.get("claim", {})
    assert world.view(tenant).get(world.drafts[tenant]).circles["claim"].state == "waiting"


@pytest.mark.parametrize("tenant,admin", [(DEFAULT, "root"), (ACME, "acmeadmin")])
def test_an_admins_delegate_dialog_offers_the_tenants_people_only(world, page, tenant,
                                                                  admin):
    inbox = page(TasksState, admin, tenant)
    inbox.ask_hand(world.claims[tenant], "review", "review", "transfer")
    assert set(inbox.people) == world.users[tenant]  # anyone of theirs, nobody else
    inbox.set_hand_to(next(iter(world.users[OTHER[tenant]])))
    run(inbox.hand())  # a name of the other tenant's (a forged choice) is refused
    assert world.view(tenant).get(world.claims[tenant]).circles["review"].task[
        "assignee"] is None


def test_an_acme_admin_may_hand_a_task_to_acmes_people(world, page):
    inbox = page(TasksState, "acmeadmin", ACME)
    inbox.ask_hand(world.claims[ACME], "review", "review", "transfer")
    assert inbox.people  # acmeadmin, acmeuser (nobody holds the task)


@pytest.mark.parametrize("tenant,admin", [(DEFAULT, "root"), (ACME, "acmeadmin")])
def test_the_templates_page_shows_the_tenants_templates(world, page, tenant, admin):
    state = page(TemplatesState, admin, tenant)
    run(state.load())
    assert {t.name for t in state.items} == world.templates[tenant]
    chosen = state.name
    for name in world.templates[OTHER[tenant]] - world.templates[tenant]:
        events = run(state.choose(name, 1))
        assert state.name == chosen and "toast" in str(events)
    # The same name in both: this tenant's versions, statistics and drawing.
    run(state.choose(BOTH, 1))
    own_total = sum(state.statuses.values())
    assert own_total == sum(1 for i in world.ids[tenant]
                            if world.view(tenant).get(i).template.name == BOTH)
    # Retiring acts on this tenant's template only.
    state.ask(BOTH, True)
    run(state.confirm())
    assert world.view(tenant).is_retired(BOTH)
    assert not world.view(OTHER[tenant]).is_retired(BOTH)
    world.view(tenant).restore_template(BOTH)  # the module's world is shared


def test_an_uploaded_template_stays_in_its_tenant(world, page):
    state = page(TemplatesState, "acmeadmin", ACME)
    run(state.load())
    run(state.paste({"body": json.dumps({**ACME_ONLY, "name": "acme-only"})}))
    assert "acme-only" in {t.name for t in state.items}
    assert "acme-only" in world.view(ACME).template_versions()
    assert "acme-only" not in world.store.template_versions()


@pytest.mark.parametrize("tenant,admin", [(DEFAULT, "root"), (ACME, "acmeadmin")])
def test_admins_administer_their_tenants_users_only(world, page, tenant, admin):
    users = page(UsersState, admin, tenant)
    users.load()
    assert {u.username for u in users.users} == world.users[tenant]
    stranger = {DEFAULT: "acmeuser", ACME: "bob"}[tenant]
    run(users.disable(stranger))
    assert world.view(OTHER[tenant]).user(stranger) is not None  # still enabled
    roles = world.view(OTHER[tenant]).user(stranger)["roles"]
    users.ask_roles(stranger, "admin")
    run(users.save_roles())
    assert world.view(OTHER[tenant]).user(stranger)["roles"] == roles and users.roles_error
    run(users.add({"username": f"new-{tenant}", "password": "long-enough-pw", "role": "user"}))
    assert world.view(tenant).user(f"new-{tenant}") is not None
    assert world.view(OTHER[tenant]).user(f"new-{tenant}") is None


def test_signing_in_enters_the_users_tenant_and_the_header_names_it(world, page,
                                                                    make_state):
    for user, tenant, shown in (("acmeadmin", ACME, "acme"), ("root", DEFAULT, "")):
        state = make_state(SignInState)
        state.load()
        run(state.sign_in({"username": user, "password": f"{user}-password"}))
        assert state.token and state.error == ""
        assert state.organisation == shown and state.username == user
        outer = world.view(tenant).get(state.outer)
        assert outer.tenant == tenant and outer.user["username"] == user


def test_the_guest_page_of_a_tenant_writes_to_its_admins(world, make_state):
    assert page_tenant("/guest") == DEFAULT and page_tenant("/guest/acme") == ACME
    assert page_tenant("/app/guest/acme/") == ACME
    before = {t: len(Mailbox(world.view(t)).inbox(world.view(t).user(a), kind="guest"))
              for t, a in ((DEFAULT, "root"), (ACME, "acmeadmin"))}
    state = make_state(GuestState, path="/guest/acme")
    state.load()
    assert state.org == ACME and not state.unknown
    run(state.send({"name": "Gus", "subject": "to acme", "body": "hi"}))
    assert state.sent
    acme = Mailbox(world.view(ACME)).inbox(world.view(ACME).user("acmeadmin"), kind="guest")
    assert len(acme) == before[ACME] + 1 and acme[0]["subject"] == "to acme"
    default = Mailbox(world.store).inbox(world.store.user("root"), kind="guest")
    assert len(default) == before[DEFAULT]
    # /guest is default's, even after the acme page in the same tab.
    state.router = make_state(GuestState, path="/guest").router
    state.load()
    assert state.org == DEFAULT and not state.unknown and not state.sent


@pytest.mark.parametrize("path", ["/guest/nowhere", "/guest/Not%20A%20Name", "/guest/-x"])
def test_an_unknown_tenants_guest_page_says_so(world, make_state, path):
    state = make_state(GuestState, path=path)
    state.load()
    assert state.unknown and state.org
    events = run(state.send({"name": "Gus", "subject": "lost", "body": "hi"}))
    assert not state.sent and "no such organisation" in str(events)


def test_the_frame_forgets_an_outer_flow_of_another_tenant(world, page):
    root_outer = world.store.latest_instance("signin", world.store.user("root")["id"],
                                             OUTER_STATUSES)
    acme = world.view(ACME)
    own = acme.latest_instance("signin", acme.user("acmeadmin")["id"], OUTER_STATUSES)
    assert root_outer and own and root_outer != own
    frame = page(FrameState, "acmeadmin", ACME)
    frame.outer = root_outer  # this browser's last session was root's
    frame.load()
    assert frame.outer == own and frame.main_state == "success"
