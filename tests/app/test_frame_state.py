"""The frame's state (the outer circle): sign-in is the `signin` flow's auth circle;
signing in again continues the same outer flow; failures are limited; the session guard;
each signed-in page's loads, the frame's last."""

from __future__ import annotations

import pytest

from bpflow import auth
from bpflow.auth import verify_token
from bpflow.errors import Unauthorized
from bpflow_app import frame_state
from bpflow_app.frame_state import FrameState, SignInState
from bpflow_app.session import SessionState
from tests.app.helpers import run


@pytest.fixture(autouse=True)
def fresh_limiter(monkeypatch):
    monkeypatch.setattr(auth, "SIGN_IN_FAILURES", auth.SignInLimit(limit=3))


def test_sign_in_form_is_the_auth_circles_form(make_state):
    state = make_state(SignInState)
    state.load()
    assert [(f.name, f.html_type) for f in state.fields] == [("username", "text"),
                                                            ("password", "password")]


def test_sign_in_stores_a_token_and_completes_the_auth_circle(make_state, web_store):
    state = make_state(SignInState)
    run(state.sign_in({"username": "alice", "password": "alice-password"}))
    assert verify_token(state.token).username == "alice"
    inst = web_store.get(state.outer)
    assert inst.template.name == "signin"
    assert inst.circles["auth"].state == "success"
    assert state.signed_in and state.username == "alice" and not state.is_admin


def test_signing_in_again_continues_the_same_outer_flow(make_state):
    first = make_state(SignInState)
    run(first.sign_in({"username": "alice", "password": "alice-password"}))
    again = make_state(SignInState)
    run(again.sign_in({"username": "alice", "password": "alice-password"}))
    assert again.outer == first.outer


def test_wrong_password_is_a_field_error_without_a_token(make_state):
    state = make_state(SignInState)
    run(state.sign_in({"username": "alice", "password": "nope"}))
    assert state.token == ""
    errors = {f.name: f.error for f in state.fields}
    assert errors["password"] == "Wrong username or password"


def test_missing_fields_are_reported_per_field(make_state):
    state = make_state(SignInState)
    run(state.sign_in({"username": "", "password": ""}))
    errors = {f.name: f.error for f in state.fields}
    assert errors == {"username": "Username is required", "password": "Password is required"}


def test_repeated_failures_block_even_the_right_password(make_state):
    state = make_state(SignInState)
    for _ in range(3):
        run(state.sign_in({"username": "alice", "password": "nope"}))
    run(state.sign_in({"username": "alice", "password": "alice-password"}))
    assert state.token == ""
    assert "Too many failed attempts" in state.error


def test_frame_counts_unread_mail_and_finds_the_outer_flow(make_state, web_store):
    sign = make_state(SignInState)
    run(sign.sign_in({"username": "root", "password": "root-password"}))
    from bpflow.mailbox import Mailbox
    Mailbox(web_store).guest_message("Eve", "Hi", "Hello", "1.2.3.4")
    frame = make_state(FrameState, user="root")
    frame.outer = ""
    frame.load()
    assert frame.unread == 1
    assert frame.outer == sign.outer
    assert frame.main_state == "success"  # signed in: the session circle


@pytest.mark.parametrize("name", ["alice", "bob", "root"])  # a user, an approver, an admin
def test_signing_in_starts_no_flow_and_my_flows_lists_none(make_state, web_store, name):
    from bpflow_app.pages.flows_state import FlowsState

    for _ in range(2):
        run(make_state(SignInState).sign_in({"username": name,
                                             "password": f"{name}-password"}))
    rows, total = web_store.list_instances()
    assert total == 1 and rows[0]["template"] == "signin"  # the outer flow, nothing else
    flows = make_state(FlowsState, user=name)
    flows.load()
    assert flows.total == 0 and flows.instances == []  # the outer flow is not a flow of theirs


def test_an_expired_token_signs_out(make_state):
    frame = make_state(FrameState)
    frame.token = "forged.token.value"
    events = run(frame.load())
    assert frame.token == "" and events and frame.ready
    with pytest.raises(Unauthorized):
        frame._caller()


def test_sign_out_forgets_token_and_outer_flow(make_state):
    state = make_state(SessionState, user="alice")
    state.outer = "abc"
    state.sign_out()
    assert state.token == "" and state.outer == "" and not state.signed_in


def test_without_a_token_the_frame_is_ready_for_the_sign_in_form_and_says_nothing(make_state):
    frame = make_state(FrameState)
    assert not frame.ready  # the loading screen until the session is known
    assert run(frame.load()) == []
    assert frame.ready and frame.unread == 0


def test_page_loads_find_nobody_signed_in_quietly(make_state):
    """A page's on_load runs before anyone signs in: it shows nothing and says nothing
    (the frame's load, after it, explains an expired token once)."""
    from bpflow_app.pages.flow_state import FlowState
    from bpflow_app.pages.flows_state import FlowsState
    from bpflow_app.pages.mail_state import MailState
    from bpflow_app.pages.tasks_state import TasksState
    from bpflow_app.pages.templates_state import TemplatesState
    from bpflow_app.pages.users_state import UsersState

    for cls in (MailState, TasksState, FlowsState, FlowState, TemplatesState, UsersState):
        for token in ("", "forged.token.value"):
            state = make_state(cls, path="/flow/x")
            state.token = token
            assert run(state.load()) == [], cls
            assert state.token == token
    inbox = make_state(MailState)
    run(inbox.load())
    assert inbox.mails == [] and inbox.loading  # still its loading state
    tasks = make_state(TasksState)
    tasks.load()
    assert tasks.tasks == {"me": [], "candidate": []} and tasks.loading


def test_each_signed_in_page_loads_on_the_server_and_the_frame_last():
    """The page's loads, then the frame's; the approval dialogs of the flow page and the
    inbox put back closed after them (not as `on_mount` events the server handled before
    the page's data)."""
    import bpflow_app.bpflow_app  # noqa: F401  (registers the pages)
    from bpflow_app.pages.flow_state import FlowState
    from bpflow_app.pages.flows_state import FlowsState
    from bpflow_app.pages.mail_state import MailState
    from bpflow_app.pages.return_state import ReturnState
    from bpflow_app.pages.signers_state import SignersState
    from bpflow_app.pages.tasks_state import TasksState

    dialogs = (SignersState.close, ReturnState.cancel_return)
    assert frame_state.loads_for("/inbox") == (MailState.load, TasksState.load,
                                               FrameState.load, *dialogs)
    assert frame_state.loads_for("/flow/[id]") == (FlowState.load, FrameState.load, *dialogs)
    assert frame_state.loads_for("/flows") == (FlowsState.load, FrameState.load)
    assert frame_state.loads_for("/404") == (FrameState.load,)
    assert set(frame_state.PAGE_LOADS) == {"/flows", "/flow/[id]", "/inbox", "/templates",
                                           "/users", "/webhooks", "/account", "/substitute",
                                           "/design", "/design/[name]", "/audit",
                                           "/operations"}


def test_a_new_session_loads_the_page_it_comes_up_on(make_state, web_store):
    """Signing in on a page (or in another tab) changes the session without a page load:
    the frame shows the loading screen until `catch_up` loaded the page for it, so no one
    sees data loaded for a former session."""
    import bpflow_app.bpflow_app  # noqa: F401  (registers the pages)
    from bpflow.auth import issue_token
    from bpflow_app.pages.mail_state import MailState
    from bpflow_app.pages.return_state import ReturnState
    from bpflow_app.pages.signers_state import SignersState
    from bpflow_app.pages.tasks_state import TasksState

    inbox = [MailState.load, TasksState.load, FrameState.load, SignersState.close,
             ReturnState.cancel_return]
    sign = make_state(SignInState, path="/inbox")
    events = run(sign.sign_in({"username": "bob", "password": "bob-password"}))
    assert len(events) == 1  # the toast: the page's loads come with the frame
    frame = make_state(FrameState, path="/inbox")
    frame.token = sign.token
    assert frame.loaded_for != frame.session_key
    assert run(frame.catch_up()) == inbox
    frame.load()
    assert frame.loaded_for == frame.session_key != ""
    assert run(frame.catch_up()) == []  # loaded for this session: nothing to do
    frame.token = issue_token(web_store.user("carol"))  # another tab signed someone else in
    assert frame.loaded_for != frame.session_key
    assert run(frame.catch_up()) == inbox
    frame.token = ""
    assert run(frame.catch_up()) == []  # nobody signed in: the sign-in form


def test_turning_a_page_with_an_expired_session_signs_out(make_state):
    from bpflow_app.pages.flows_state import FlowsState

    state = make_state(FlowsState)
    state.token = "forged.token.value"
    assert run(state.turn(1)) and state.token == ""
