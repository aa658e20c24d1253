"""The actions bpflow runs on the worker (HTTP, mail, approval requests), through the
store (SQLite and PostgreSQL) and a real local HTTP server."""

from __future__ import annotations

import pytest

from bpflow.actions import HANDLERS
from bpflow.mailbox import Mailbox
from bpflow.store import Store
from bpflow.worker import Worker
from engine.kinds import WORKER_RUN
from tests.services.helpers import approval_flow, drain, http_flow, mark, users


def test_every_kind_the_worker_runs_has_a_handler_and_every_handler_a_kind() -> None:
    """The kinds are declared in `engine.kinds`; the worker's handlers follow them, and so
    do the circles a store hands the worker."""
    assert set(HANDLERS) == WORKER_RUN
    assert Store.__init__.__kwdefaults__["worker_actions"] == WORKER_RUN


# ----------------------------------------------------------------- HTTP
def test_http_success_failure_timeout_refused(store, server):
    store.put_template(http_flow(f"{server.url}/ok", "good"))
    store.put_template(http_flow(f"{server.url}/status/500", "bad"))
    store.put_template(http_flow(f"{server.url}/slow/3", "slow", timeout=0.3))
    store.put_template(http_flow("http://127.0.0.1:9/", "refused"))
    ids = {name: store.start(name, {"n": 7}).id for name in ("good", "bad", "slow", "refused")}
    Worker(store).run_once()
    got = {name: store.get(iid).circles["call"] for name, iid in ids.items()}
    assert got["good"].result == {"ok": True, "echo": {"n": 7}}
    assert "answered HTTP 500" in got["bad"].reason and "server says no" in got["bad"].reason
    assert "timed out after 0.3 s" in got["slow"].reason
    assert "failed" in got["refused"].reason and "Connect" in got["refused"].reason


def test_http_retries_follow_the_list_with_a_key_per_attempt(store, server):
    store.put_template(http_flow(f"{server.url}/status/503", retry=[0.2, 0.3]))
    iid = store.start("call", {"n": 1}).id
    worker = Worker(store)
    drain(worker, lambda: store.get(iid).circles["call"].state == "failure")
    run = store.get(iid).circles["call"]
    assert run.attempts == 3 and "HTTP 503" in run.reason
    keys = server.recorder.keys()
    assert keys == {f"{iid}:call:0": 1, f"{iid}:call:1": 1, f"{iid}:call:2": 1}
    starts = [r for r in server.recorder.requests]
    assert len(starts) == 3
    kinds = [e["kind"] for e in store.history(iid)]
    assert kinds.count("circle_retry_scheduled") == 2 and kinds.count("circle_failed") == 1


def test_form_feeds_the_http_action_through_form_variables(store, units, server):
    store.put_template({"name": "lookup", "circles": [
        {"uri": "ask", "box": {"form": [{"name": "q", "type": "integer", "required": True}],
                               "action": {"type": "http", "method": "POST",
                                          "url": f"{server.url}/ok",
                                          "json": {"q": "${form.q}"}}}}]})
    iid = store.start("lookup").id
    assert Worker(store).run_once() == 0  # nothing to run before the form is sent
    units.submit(iid, "ask", mark(store, iid, "ask"), {"q": "5"})
    Worker(store).run_once()
    assert store.get(iid).circles["ask"].result == {"ok": True, "echo": {"q": 5}}



def test_retries_of_a_form_fed_action_run_on_their_own(store, units, server):
    store.put_template({"name": "lookup", "circles": [
        {"uri": "ask", "retry": [0.1, 0.1],
         "box": {"form": [{"name": "q", "type": "integer"}],
                 "action": {"type": "http", "url": f"{server.url}/status/502",
                            "json": {"q": "${form.q}"}}}}]})
    iid = store.start("lookup").id
    units.submit(iid, "ask", mark(store, iid, "ask"), {"q": 1})
    drain(Worker(store), lambda: store.get(iid).circles["ask"].state == "failure")
    assert store.get(iid).circles["ask"].attempts == 3
    assert len(server.recorder.requests) == 3



# ------------------------------------------------------- mail, approval
def test_mail_unit_sends_an_in_site_message(store):
    people = users(store, "bob", "ann")
    store.put_template({"name": "note", "circles": [
        {"uri": "tell", "box": {"action": {"type": "mail", "to": ["ann"],
                                           "subject": "Hi from ${user.username}",
                                           "body": "see you"}}}]})
    iid = store.start("note", {}, people["bob"]).id
    Worker(store).run_once()
    assert store.get(iid).status == "completed"
    inbox = Mailbox(store).inbox(people["ann"], kind="message")
    assert [(m["subject"], m["sender"]) for m in inbox] == [("Hi from bob", "bob")]


@pytest.mark.parametrize("to,why", [("bob", "cannot approve their own request"),
                                    ("eve", "eve is not an approver"),
                                    ("nobody", "no user named nobody")])
def test_approvals_need_an_approver_other_than_the_requester(store, units, to, why):
    people = users(store, "bob", "eve")
    store.put_template(approval_flow(to, "all"))
    iid = store.start("expense", {}, people["bob"]).id
    units.submit(iid, "claim", mark(store, iid, "claim"), {"amount": 1})
    Worker(store).run_once()
    run = store.get(iid).circles["approve"]
    assert run.state == "failure" and why in run.reason


