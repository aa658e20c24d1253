"""Boxes a person answers, through the store (SQLite and PostgreSQL): forms become typed
results, confirmations are accepted or declined, the outer flow's `auth` circle signs in."""

from __future__ import annotations

import json

import pytest

from bpflow.forms import FormError
from engine.errors import BookmarkError, TransitionError
from tests.services.helpers import ROOT, mark, users

# ---------------------------------------------------------------- forms
FORM_FLOW = {"name": "claimform", "circles": [
    {"uri": "claim", "box": {"form": [
        {"name": "amount", "type": "number", "label": "Amount", "required": True},
        {"name": "who", "type": "string", "default": "${user.username}"}]}},
    {"uri": "end", "deps": [["claim"]]}]}


def test_form_values_become_the_typed_result(store, units):
    u = users(store, "bob")["bob"]
    store.put_template(FORM_FLOW)
    inst = store.start("claimform", {}, u)
    with pytest.raises(FormError) as exc:
        units.submit(inst.id, "claim", mark(store, inst.id, "claim"), {"amount": "lots"})
    assert exc.value.errors == {"amount": "Amount must be a number"}
    assert store.get(inst.id).circles["claim"].state == "waiting"  # still ready for a retry
    done = units.submit(inst.id, "claim", mark(store, inst.id, "claim"), {"amount": "42"})
    assert done.circles["claim"].result == {"amount": 42, "who": "bob"}
    assert done.status == "completed"


def test_confirm_accept_and_decline(store, units):
    store.put_template({"name": "terms", "circles": [
        {"uri": "agree", "box": {"confirm": "Accept the terms, ${user.username}?"}}]})
    a, b = store.start("terms", {}, {"username": "x"}), store.start("terms")
    assert units.submit(a.id, "agree", mark(store, a.id, "agree"), {"accept": True}).status \
        == "completed"
    declined = units.confirm(b.id, "agree", mark(store, b.id, "agree"), False, "too long")
    assert declined.circles["agree"].state == "failure"
    assert declined.circles["agree"].reason == "declined: too long"
    c = store.start("terms")
    accepted = units.confirm(c.id, "agree", mark(store, c.id, "agree"), True)
    assert accepted.status == "completed"
    assert accepted.circles["agree"].result == {"accepted": True}


def test_confirming_a_circle_that_asks_for_no_confirmation_is_refused(store, units):
    store.put_template({"name": "note", "circles": [
        {"uri": "write", "box": {"form": [{"name": "text", "type": "string"}]}}]})
    inst = store.start("note")
    with pytest.raises(TransitionError, match="asks for no confirmation"):
        units.confirm(inst.id, "write", mark(store, inst.id, "write"), True)
    assert store.get(inst.id).circles["write"].state == "waiting"



# --------------------------------------------------- auth and the outer flow
def test_outer_flow_survives_signing_in_again_and_keeps_passwords_out(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    users(store, "bob", "ann:approver")
    assert units.sign_in("bob", "wrong") is None
    inst = units.sign_in("bob", "pw-bob")
    assert inst.circles["auth"].result == {"username": "bob", "roles": ["user"]}
    assert inst.circles["main"].state == "success"  # the session itself, a marker
    again = units.sign_in("bob", "pw-bob")
    assert again.id == inst.id  # the same outer flow, where it was
    assert "signed_in_again" in [e["kind"] for e in store.history(inst.id)]
    dump = json.dumps(store.history(inst.id)) + json.dumps(again.to_dict())
    assert "pw-bob" not in dump


@pytest.mark.parametrize("who", ["bob", "ann:approver", "root:admin"])
def test_signing_in_starts_no_business_flow(store, units, who):
    """Signing in (a user's, an approver's, an admin's) starts the outer flow only, and
    signing in again starts nothing more: business flows are started on purpose."""
    store.import_dir(ROOT / "upload" / "workflow")
    person = users(store, who)[who.split(":")[0]]
    for _ in range(3):
        outer = units.sign_in(person["username"], f"pw-{person['username']}")
        assert set(outer.circles) == {"auth", "main"} and store.engine.ready(outer) == []
    rows, total = store.list_instances(person["id"])
    assert total == 1 and [r["template"] for r in rows] == ["signin"]
    assert store.list_instances()[1] == 1  # nobody's flow was started either


def test_signing_in_continues_the_completed_outer_flow_not_a_terminated_one(store, units):
    """The outer flow completes with the sign-in (its `main` is the session), and later
    sign-ins continue it; only a terminated one is over."""
    store.import_dir(ROOT / "upload" / "workflow")
    bob = users(store, "bob")["bob"]
    dropped = store.start("signin", {}, bob)
    store.apply(dropped.id, lambda e, i: e.abort(i, "closed by an admin"))
    first = units.sign_in("bob", "pw-bob")
    assert first.id != dropped.id and first.status == "completed"
    assert units.sign_in("bob", "pw-bob").id == first.id


def test_auth_form_with_bad_credentials_keeps_the_circle_ready(store, units):
    store.import_dir(ROOT / "upload" / "workflow")
    bob = users(store, "bob")["bob"]
    inst = store.start("signin", {}, bob)
    with pytest.raises(FormError) as exc:
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "bob", "password": "nope"})
    assert exc.value.errors == {"password": "wrong username or password"}
    assert store.engine.ready(store.get(inst.id)) == ["auth"]
    with pytest.raises(BookmarkError):
        units.submit(inst.id, "auth", "0.forged", {"username": "bob", "password": "pw-bob"})



def test_auth_circle_accepts_only_the_owner_and_limits_guessing(store, units):
    from bpflow.auth import SIGN_IN_FAILURES as AUTH_FAILURES
    AUTH_FAILURES.failures.clear()
    store.import_dir(ROOT / "upload" / "workflow")
    people = users(store, "alice", "root:admin")
    inst = store.start("signin", {}, people["alice"])
    with pytest.raises(FormError):  # right password, but not the owner of this flow
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "root", "password": "pw-root"})
    assert "auth_failed" in [e["kind"] for e in store.history(inst.id)]
    for _ in range(10):
        with pytest.raises(FormError):
            units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                         {"username": "alice", "password": "guess"})
    with pytest.raises(FormError, match="too many failed attempts"):
        units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                     {"username": "alice", "password": "pw-alice"})
    AUTH_FAILURES.failures.clear()
    done = units.submit(inst.id, "auth", mark(store, inst.id, "auth"),
                        {"username": "alice", "password": "pw-alice"})
    assert done.circles["auth"].result["username"] == "alice"




def test_signing_in_again_counts_against_the_one_sign_in_limit(store, units):
    """Continuing a running outer flow is a sign-in like any other: a wrong password
    counts, and over the limit even the right password is refused."""
    from bpflow import auth
    from bpflow.errors import RateLimited

    users(store, "bob")
    store.import_dir(ROOT / "upload" / "workflow")
    assert units.sign_in("bob", "pw-bob") is not None  # starts the outer flow
    assert units.sign_in("bob", "wrong") is None
    assert auth.SIGN_IN_FAILURES.blocked("bob") == 0  # one failure so far
    for _ in range(9):
        assert units.sign_in("bob", "wrong") is None
    with pytest.raises(RateLimited) as refused:
        units.sign_in("bob", "pw-bob")
    assert refused.value.retry_after > 0


def test_a_form_that_feeds_an_action_is_sent_once(store, units):
    """Two submissions with the same bookmark: the first stages the form for the action;
    the second, decided on the stored state, is refused (it would replace what the
    action may already be running with)."""
    store.put_template({"name": "ask", "circles": [
        {"uri": "q", "box": {"form": [{"name": "n", "type": "integer"}],
                             "action": {"type": "http", "url": "http://127.0.0.1:9/x"}}}]})
    iid = store.start("ask").id
    bookmark = mark(store, iid, "q")
    units.submit(iid, "q", bookmark, {"n": 1})
    with pytest.raises(TransitionError, match="already sent"):
        units.submit(iid, "q", bookmark, {"n": 2})
    assert store.get(iid).circles["q"].pending == {"form": {"n": 1}}
