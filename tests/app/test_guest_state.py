"""The guest page's state: a message over the limit is refused with its length said (the
page cuts nothing), and the form's outcome is one toast that "Message sent" replaces."""

from __future__ import annotations

from bpflow.mailbox import GUEST_LIMITS, Mailbox
from bpflow_app.pages.guest_state import TOAST, GuestState
from tests.app.helpers import run


def _toast(events) -> str:
    [event] = [e for e in events if "toast" in str(e)]
    return str(event)


def test_a_message_over_the_limit_is_refused_saying_how_long_it_is(make_state, web_store):
    state = make_state(GuestState)
    body = "x" * (GUEST_LIMITS["body"] + 123)
    run(state.send({"name": "Eve", "subject": "Long", "body": body}))
    assert not state.sent
    assert state.errors == {"body": "Message must be at most 5000 characters (yours has "
                                    "5,123); nothing was sent"}
    assert Mailbox(web_store).inbox(web_store.user("root"), kind="guest") == []


def test_message_sent_replaces_the_please_check_toast(make_state):
    state = make_state(GuestState)
    refused = _toast(run(state.send({"name": "", "subject": "Hi", "body": "x"})))
    assert "Please check the form" in refused and TOAST in refused
    sent = _toast(run(state.send({"name": "Eve", "subject": "Hi", "body": "x"})))
    assert state.sent and state.errors == {}
    assert "Message sent" in sent and TOAST in sent  # the same toast, so the other goes
