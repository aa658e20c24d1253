"""Who may do what (`bpflow.access`): every rule, on instances of the real engine (in
memory for the pure rules) and of the store (SQLite and PostgreSQL) where a rule meets
stored data."""

from __future__ import annotations

import dataclasses

import pytest

from bpflow import access
from bpflow.access import Caller, Sight
from bpflow.errors import Forbidden, NotFound
from engine import kinds
from engine.analysis import analyze, load_template
from engine.instance import Instance
from engine.model import Template, build_flow
from engine.runtime import Engine
from tests.services.helpers import start_approval, users

ENGINE = Engine(b"access-test-key")
URL = "http://127.0.0.1:9/"
TEMPLATE = load_template({"name": "rules", "circles": [
    {"uri": "fill", "box": {"form": [{"name": "x", "type": "string"}]}},
    {"uri": "agree", "box": {"confirm": "Agree?"}},
    {"uri": "ask", "box": {"form": [{"name": "q", "type": "integer"}],
                           "action": {"type": "http", "url": URL}}},
    {"uri": "call", "box": {"action": {"type": "http", "url": URL}}},
    {"uri": "approve", "box": {"action": {"type": "approval", "to": ["ann"]}}},
    {"uri": "tell", "box": {"action": {"type": "mail", "to": ["ann"], "subject": "hi"}}},
    {"uri": "nap", "box": {"action": {"type": "timer", "delay": 60}}},
    {"uri": "end", "deps": [["fill"], ["agree"], ["ask"], ["call"], ["approve"], ["tell"],
                            ["nap"]]},
]})

ADMIN = Caller(1, "root", ("admin",))
OWNER = Caller(2, "bob", ("user",))
OTHER = Caller(3, "eve", ("user",))
APPROVER = Caller(4, "ann", ("approver",))
CALLERS = {"admin": ADMIN, "owner": OWNER, "other": OTHER, "approver": APPROVER}


def instance() -> Instance:
    """An instance of `rules` started by bob, every circle waiting."""
    return ENGINE.start(TEMPLATE, user=OWNER.as_user())


def send_form(inst: Instance, cid: str, values: dict) -> None:
    """The form of an action's circle was sent: its values are staged for the worker."""
    ENGINE.mark_pending(inst, cid, ENGINE.bookmark(inst, cid), {"form": values})


# ---------------------------------------------------------------- Caller
def test_caller_round_trips_through_the_user_record():
    assert Caller.of(OWNER.as_user()) == OWNER
    assert OWNER.as_user() == {"id": 2, "username": "bob", "roles": ["user"]}


def test_caller_of_a_caller_is_that_caller():
    assert Caller.of(ADMIN) is ADMIN


def test_caller_of_a_stored_user_record(store):
    record = users(store, "ann:approver:admin")["ann"]
    caller = Caller.of(record)
    assert (caller.id, caller.username, set(caller.roles)) == \
        (record["id"], "ann", {"approver", "admin"})
    assert caller.is_admin


def test_caller_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        OWNER.roles = ("admin",)  # type: ignore[misc]
    assert not OWNER.is_admin


def test_equal_callers_are_one_key():
    same = Caller(2, "bob", ("user",))
    assert hash(same) == hash(OWNER)
    assert len({OWNER, same, ADMIN}) == 2 and {OWNER: "x"}[same] == "x"


# ------------------------------------------------------------ the admin
@pytest.mark.parametrize("who,admin", [("admin", True), ("owner", False),
                                       ("other", False), ("approver", False)])
def test_only_admins_are_admins(who, admin):
    caller = CALLERS[who]
    assert (caller.is_admin, access.is_admin(caller), access.reads_guest_mail(caller)) == \
        (admin, admin, admin)


def test_require_admin_lets_an_admin_pass():
    access.require_admin(ADMIN)
    access.require_admin(Caller(9, "both", ("user", "admin")))


@pytest.mark.parametrize("who", ["owner", "other", "approver"])
def test_require_admin_refuses_everyone_else(who):
    with pytest.raises(Forbidden):
        access.require_admin(CALLERS[who])


@pytest.mark.parametrize("who,scope", [("admin", None), ("owner", 2), ("other", 3),
                                       ("approver", 4)])
def test_instance_scope_is_everyone_for_admins_else_ones_own(who, scope):
    assert access.instance_scope(CALLERS[who]) == scope


def test_instance_scope_lists_exactly_the_instances_a_caller_may_act_on(store):
    people = users(store, "bob", "eve", "root:admin")
    store.put_template({"name": "note", "circles": [
        {"uri": "w", "box": {"form": [{"name": "x"}]}}]})
    mine = {store.start("note", {}, people["bob"]).id for _ in range(2)}
    theirs = store.start("note", {}, people["eve"]).id
    for name, expected in [("bob", mine), ("eve", {theirs}), ("root", mine | {theirs})]:
        caller = Caller.of(people[name])
        rows, total = store.list_instances(access.instance_scope(caller))
        assert {r["id"] for r in rows} == expected and total == len(expected)
        assert all(access.may_act(caller, store.get(i)) for i in expected)


# ---------------------------------------------------------- acting, sight
@pytest.mark.parametrize("who,allowed", [("admin", True), ("owner", True),
                                         ("other", False), ("approver", False)])
def test_may_act_is_for_the_starter_and_admins(who, allowed):
    assert access.may_act(CALLERS[who], instance()) is allowed


@pytest.mark.parametrize("who", ["admin", "owner"])
def test_acting_gives_the_instance_to_whoever_may_act(who):
    inst = instance()
    assert access.acting(CALLERS[who], inst) is inst


@pytest.mark.parametrize("who", ["other", "approver"])
def test_acting_is_not_found_for_everyone_else(who):
    inst = instance()
    with pytest.raises(NotFound, match=inst.id):
        access.acting(CALLERS[who], inst)


def test_may_act_on_a_stored_instance_follows_its_starter(store):
    people = users(store, "bob", "eve")
    store.put_template({"name": "note", "circles": [
        {"uri": "w", "box": {"form": [{"name": "x"}]}}]})
    inst = store.get(store.start("note", {}, Caller.of(people["bob"]).as_user()).id)
    assert access.may_act(Caller.of(people["bob"]), inst)
    assert not access.may_act(Caller.of(people["eve"]), inst)


@pytest.mark.parametrize("who,asked,seen", [
    ("admin", False, Sight.ACT), ("admin", True, Sight.ACT),
    ("owner", False, Sight.ACT), ("owner", True, Sight.ACT),
    ("other", False, Sight.NONE), ("other", True, Sight.FOLLOW),
    ("approver", False, Sight.NONE), ("approver", True, Sight.FOLLOW),
])
def test_sight_is_act_follow_or_none(who, asked, seen):
    assert access.sight(CALLERS[who], instance(), lambda: asked) is seen


@pytest.mark.parametrize("who", ["admin", "owner"])
def test_sight_does_not_ask_when_the_caller_may_act(who):
    calls = []
    assert access.sight(CALLERS[who], instance(), lambda: calls.append(1) or True) \
        is Sight.ACT
    assert calls == []


def test_sight_asks_once_when_the_caller_may_not_act():
    calls = []
    assert access.sight(OTHER, instance(), lambda: calls.append(1) or False) is Sight.NONE
    assert calls == [1]


def test_an_approver_asked_by_mail_follows_the_instance_and_no_one_else_does(store):
    from bpflow.interactions import Interactions
    iid, people = start_approval(store, Interactions(store), ["ann"], "all")
    inst = store.get(iid)
    seen = {name: access.sight(Caller.of(people[name]), inst,
                               lambda n=name: store.mail_about(people[n]["id"], iid))
            for name in ("bob", "ann", "cid")}
    assert seen == {"bob": Sight.ACT, "ann": Sight.FOLLOW, "cid": Sight.NONE}


# ---------------------------------------------------- driving by hand
@pytest.mark.parametrize("cid,owner_may", [
    ("fill", True),  # a plain form
    ("agree", True),  # a confirmation
    ("ask", True),  # a form that feeds an action, not yet sent
    ("call", False), ("approve", False), ("tell", False), ("nap", False),  # automatic
])
def test_may_drive_a_waiting_circle(cid, owner_may):
    inst = instance()
    assert access.may_drive(OWNER, inst, cid) is owner_may
    assert access.may_drive(ADMIN, inst, cid) is True


def test_a_form_fed_action_is_the_admins_once_its_form_is_sent():
    inst = instance()
    assert access.may_drive(OWNER, inst, "ask")
    send_form(inst, "ask", {"q": 1})
    assert not access.may_drive(OWNER, inst, "ask")
    assert access.may_drive(ADMIN, inst, "ask")


def test_a_form_fed_action_is_the_starters_again_after_a_reset():
    inst = instance()
    send_form(inst, "ask", {"q": 1})
    ENGINE.fail(inst, "ask", ENGINE.bookmark(inst, "ask"), "HTTP 500")
    assert not access.may_drive(OWNER, inst, "ask")  # the failed attempt had begun
    ENGINE.reset(inst, "ask")  # a new attempt: its form waits to be sent again
    assert access.may_drive(OWNER, inst, "ask")


def test_drivable_is_silent_for_what_the_caller_may_drive():
    inst = instance()
    access.drivable(OWNER, inst, "fill")
    access.drivable(ADMIN, inst, "call")


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_drivable_is_not_found_for_an_unknown_circle(who):
    with pytest.raises(NotFound, match="no circle 'nope'"):
        access.drivable(CALLERS[who], instance(), "nope")


@pytest.mark.parametrize("cid,kind", [("call", "http"), ("approve", "approval")])
def test_drivable_forbids_an_automatic_circle_to_a_non_admin(cid, kind):
    with pytest.raises(Forbidden, match=f"runs a {kind} action"):
        access.drivable(OWNER, instance(), cid)


def test_drivable_forbids_a_sent_form_fed_action_to_a_non_admin():
    inst = instance()
    send_form(inst, "ask", {"q": 1})
    with pytest.raises(Forbidden, match="runs a http action"):
        access.drivable(OWNER, inst, "ask")


# ------------------------------------------------------------------ mail
@pytest.mark.parametrize("who,kind,recipient,allowed", [
    ("owner", "message", 2, True),  # own mail
    ("owner", "approval", 2, True),
    ("admin", "message", 1, True),
    ("owner", "message", 3, False),  # another's mail
    ("admin", "message", 2, False),  # also for an admin
    ("admin", "approval", 4, False),
    ("admin", "guest", None, True),  # guest mail: admins only
    ("owner", "guest", None, False),
    ("approver", "guest", None, False),
    ("admin", "message", None, False),  # no addressee, yet no guest message
])
def test_may_read_mail(who, kind, recipient, allowed):
    assert access.may_read_mail(CALLERS[who], kind, recipient) is allowed


@pytest.mark.parametrize("who,recipient,allowed", [
    ("approver", 4, True), ("owner", 2, True),
    ("approver", 2, False), ("admin", 4, False),  # not even an admin for another
    ("admin", None, False), ("approver", None, False),
])
def test_only_the_addressee_may_decide(who, recipient, allowed):
    assert access.may_decide(CALLERS[who], recipient) is allowed


@pytest.mark.parametrize("roles,allowed", [
    (["approver"], True), (["admin"], True), (["user", "approver"], True),
    (("admin", "user"), True), (["user"], False), ([], False), (["auditor"], False),
])
def test_may_approve_needs_the_approver_or_admin_role(roles, allowed):
    assert access.may_approve(roles) is allowed


# ----------------------------------------------------------------- roles
def test_valid_roles_are_sorted_and_unique():
    assert access.valid_roles(["user", "admin", "user", "approver"]) == \
        ["admin", "approver", "user"]
    assert access.valid_roles(iter(["user"])) == ["user"]


def test_valid_roles_take_custom_role_names():
    assert access.valid_roles(["finance", "user", "team-2_b"]) == ["finance", "team-2_b", "user"]
    assert access.valid_roles(["a" * 40]) == ["a" * 40]


@pytest.mark.parametrize("roles", [["Admin"], [""], ["user", "2fa"], ["fin ance"], ["a" * 41],
                                   ["finance\n"], ["_x"], [None], [3]])
def test_valid_roles_rejects_what_is_no_role_name(roles):
    with pytest.raises(ValueError, match="not a role name"):
        access.valid_roles(roles)


def test_valid_roles_rejects_no_roles():
    with pytest.raises(ValueError):
        access.valid_roles([])


def test_the_store_refuses_a_user_with_invalid_or_no_roles(store):
    for roles in (["Root"], [], ["user", "no way"]):
        with pytest.raises(ValueError, match="role"):
            store.add_user("mallory", "pw", roles)
    assert store.user("mallory") is None


# ----------------------------------------------------------------- starters
@pytest.mark.parametrize("starters, roles, allowed", [
    (None, ("user",), True), (["finance"], ("user",), False), (["finance"], ("finance",), True),
    (["finance", "approver"], ("approver", "user"), True), ([], ("user",), False),
    (["finance"], ("admin",), True), ([], ("admin",), True),
])
def test_may_start_follows_the_starters_and_admins_always_may(starters, roles, allowed):
    body = {"name": "t", "circles": [{"uri": "a"}]}
    if starters is not None:
        body["starters"] = starters
    caller = access.Caller(1, "u", roles)
    assert access.may_start(caller, body) is allowed
    template = analyze(body).template
    assert access.may_start(caller, template) is allowed
    if allowed:
        access.startable(caller, body)
    else:
        with pytest.raises(Forbidden, match="may start 't'"):
            access.startable(caller, template)


def test_an_admin_keeps_their_own_account():
    root = access.Caller(1, "root", ("admin",))
    with pytest.raises(Forbidden):
        access.own_account_kept(root, "root", disable=True)
    with pytest.raises(Forbidden):
        access.own_account_kept(root, "root", ["user"])
    access.own_account_kept(root, "root", ["admin", "finance"])
    access.own_account_kept(root, "bob", ["user"])
    access.own_account_kept(root, "bob", disable=True)


@pytest.mark.parametrize("runner,owner_may", [(None, False), (kinds.WORKER, False),
                                              (kinds.ENGINE, False), (kinds.PERSON, True)])
def test_a_new_kind_is_driven_by_hand_only_when_declared_a_persons(monkeypatch, runner,
                                                                   owner_may):
    """`may_drive` asks the kind's trait (`engine.kinds`): a kind added as automatic, or not
    declared at all, is never its starter's to complete."""
    if runner is not None:
        monkeypatch.setitem(kinds.KINDS, "fax", kinds.Kind("fax", runner))
    flow = build_flow([{"uri": "send", "box": {"action": {"type": "fax"}}}], "dag", "send", {})
    inst = ENGINE.start(Template("faxes", flow, {}, {}), user=OWNER.as_user())
    assert ENGINE.ready(inst) == ["send"]
    assert access.may_drive(OWNER, inst, "send") is owner_may
    assert access.may_drive(ADMIN, inst, "send") is True
