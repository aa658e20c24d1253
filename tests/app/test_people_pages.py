"""The pages' part of SPEC §10: admins retire and restore templates (after a confirmation)
and My flows stops offering a retired one; `starters` decide who is offered (and may start)
a template; a double click on Start starts one flow; admins change users' roles (custom
ones too) and disable users after a confirmation, never locking themselves out."""

from __future__ import annotations

from bpflow_app.pages.flows_state import FlowsState
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.pages.users_state import UsersState
from tests.app.helpers import run

PAYOUT = {"name": "payout", "title": "Payout", "starters": ["finance"],
          "circles": [{"uri": "pay", "box": {"confirm": "Pay?"}}]}


def offered(make_state, user: str) -> list[str]:
    state = make_state(FlowsState, user=user)
    state.load()
    return [t.name for t in state.startables]


def count(store, template: str) -> int:
    return store.list_instances(None, template)[1]


# ------------------------------------------------------------- templates page
def test_an_admin_retires_a_template_after_a_confirmation(make_state, web_store):
    assert "reimbursement" in offered(make_state, "alice")
    state = make_state(TemplatesState, user="root")
    run(state.load())
    state.ask("reimbursement", True)
    assert state.asked == "reimbursement" and state.asked_retire
    state.cancel()  # changed their mind
    assert state.asked == "" and not web_store.is_retired("reimbursement")
    state.ask("reimbursement", True)
    run(state.confirm())
    assert state.asked == "" and web_store.is_retired("reimbursement")
    assert {t.name: t.retired for t in state.items}["reimbursement"] is True
    assert "reimbursement" not in offered(make_state, "alice")
    assert "reimbursement" not in offered(make_state, "root")
    state.ask("reimbursement", False)
    run(state.confirm())
    assert not web_store.is_retired("reimbursement")
    assert {t.name: t.retired for t in state.items}["reimbursement"] is False
    assert "reimbursement" in offered(make_state, "alice")


def test_the_flow_signing_in_starts_is_not_offered_for_retirement(make_state, web_store):
    state = make_state(TemplatesState, user="root")
    run(state.load())
    lines = {t.name: t for t in state.items}
    assert not lines["signin"].retirable and lines["order"].retirable
    state.ask("signin", True)
    events = run(state.confirm())
    assert not web_store.is_retired("signin") and "cannot be retired" in str(events)


def test_only_admins_retire_templates(make_state, web_store):
    state = make_state(TemplatesState, user="alice")
    state.ask("order", True)
    run(state.confirm())
    assert not web_store.is_retired("order")


def test_a_retired_template_cannot_be_started_from_an_open_page(make_state, web_store):
    state = make_state(FlowsState, user="alice")
    state.load()
    web_store.retire_template("order")
    events = run(state.start({"__template": "order", "customer": "ACME"}))
    assert count(web_store, "order") == 0
    assert "retired" in str(events)


# ------------------------------------------------------------------ starters
def test_my_flows_offers_a_template_to_its_starters_only(make_state, web_store):
    web_store.put_template(PAYOUT)
    web_store.add_user("fay", "fay-password", ["finance"])
    assert "payout" not in offered(make_state, "alice")
    assert "payout" in offered(make_state, "fay")
    assert "payout" in offered(make_state, "root")  # admins always may
    assert "signin" not in offered(make_state, "fay")
    for example in ("order", "onboarding"):  # the examples for developers: admins only
        assert example not in offered(make_state, "alice")
        assert example in offered(make_state, "root")
    alice = make_state(FlowsState, user="alice")
    alice.load()
    events = run(alice.start({"__template": "payout"}))  # a form sent by hand
    assert count(web_store, "payout") == 0 and "may start" in str(events)
    fay = make_state(FlowsState, user="fay")
    fay.load()
    run(fay.start({"__template": "payout"}))
    assert count(web_store, "payout") == 1


# ----------------------------------------------------------------- double click
def test_a_double_click_on_start_starts_one_flow(make_state, web_store):
    state = make_state(FlowsState, user="root")
    state.load()
    first = run(state.start({"__template": "order", "customer": "ACME"}))
    second = run(state.start({"__template": "order", "customer": "ACME"}))  # queued click
    assert count(web_store, "order") == 1
    iid = web_store.list_instances(None, "order")[0][0]["id"]
    assert f"/flow/{iid}" in str(first) and f"/flow/{iid}" in str(second)
    run(state.start({"__template": "reimbursement"}))  # another template: its own flow
    assert count(web_store, "reimbursement") == 1
    state.load()  # the page shown again: a new start is a new flow
    run(state.start({"__template": "order", "customer": "ACME"}))
    assert count(web_store, "order") == 2


def test_each_person_and_each_page_has_its_own_key(make_state, web_store):
    alice, carol = make_state(FlowsState, user="alice"), make_state(FlowsState, user="carol")
    for state in (alice, carol):
        state.load()
        run(state.start({"__template": "reimbursement"}))
    assert count(web_store, "reimbursement") == 2
    other_tab = make_state(FlowsState, user="alice")
    other_tab.load()
    run(other_tab.start({"__template": "reimbursement"}))
    assert count(web_store, "reimbursement") == 3


def test_a_start_refused_for_its_inputs_leaves_the_key_for_the_next_try(make_state, web_store):
    state = make_state(FlowsState, user="root")
    state.load()
    run(state.start({"__template": "order", "customer": ""}))
    assert count(web_store, "order") == 0
    run(state.start({"__template": "order", "customer": "ACME"}))
    assert count(web_store, "order") == 1


# ------------------------------------------------------------------- users page
def roles_of(state, name: str) -> str:
    return {u.username: u.roles for u in state.users}[name]


def test_an_admin_adds_a_user_with_custom_roles(make_state, web_store):
    state = make_state(UsersState, user="root")
    run(state.add({"username": "fay", "password": "long-enough", "role": "finance, user"}))
    assert state.errors == {} and roles_of(state, "fay") == "finance, user"
    assert web_store.list_users(role="finance") == ["fay"]
    run(state.add({"username": "gus", "password": "long-enough", "role": "Finance"}))
    assert "Not a role name" in state.errors["role"] and web_store.user("gus") is None
    run(state.add({"username": "gus", "password": "long-enough", "role": " , "}))
    assert state.errors["role"] == "A user needs at least one role"


def test_an_admin_changes_roles_in_a_dialog(make_state, web_store):
    state = make_state(UsersState, user="root")
    state.load()
    state.ask_roles("alice", roles_of(state, "alice"))
    assert state.editing == "alice" and state.new_roles == "user"
    state.set_new_roles("user, finance")
    run(state.save_roles())
    assert state.editing == "" and roles_of(state, "alice") == "finance, user"
    assert web_store.user("alice")["roles"] == ["finance", "user"]
    state.ask_roles("alice", "finance, user")
    state.set_new_roles("finance, Boss")
    run(state.save_roles())
    assert state.editing == "alice" and "Not a role name" in state.roles_error
    state.cancel_roles()
    assert state.editing == "" and web_store.user("alice")["roles"] == ["finance", "user"]


def test_an_admin_cannot_take_away_their_own_admin_role_or_disable_themselves(
        make_state, web_store):
    state = make_state(UsersState, user="root")
    state.load()
    state.ask_roles("root", "admin")
    state.set_new_roles("user")
    run(state.save_roles())
    assert "own admin role" in state.roles_error
    assert web_store.user("root")["roles"] == ["admin"]
    state.set_new_roles("admin, finance")  # more roles are fine
    run(state.save_roles())
    assert web_store.user("root")["roles"] == ["admin", "finance"]
    state.ask_disable("root")
    run(state.confirm_disable())
    assert web_store.user("root") is not None


def test_an_admin_disables_a_user_after_a_confirmation(make_state, web_store):
    state = make_state(UsersState, user="root")
    state.load()
    state.ask_disable("carol")
    assert state.disabling == "carol"
    state.cancel_disable()
    assert web_store.user("carol") is not None
    state.ask_disable("carol")
    run(state.confirm_disable())
    assert state.disabling == "" and web_store.user("carol") is None
    assert {u.username: u.disabled for u in state.users}["carol"] != ""


def test_only_admins_change_roles(make_state, web_store):
    state = make_state(UsersState, user="alice")
    state.ask_roles("alice", "user")
    state.set_new_roles("admin")
    run(state.save_roles())
    state.ask_disable("bob")
    run(state.confirm_disable())
    assert web_store.user("alice")["roles"] == ["user"] and web_store.user("bob") is not None
