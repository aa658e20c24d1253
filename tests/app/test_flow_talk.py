"""The flow page's comments and files (SPEC §15): the thread written and read by whoever
sees the flow, about the whole flow or a selected step; a `file` field's upload target,
accepted types and size limit; the files its forms hold, for the approver too."""

from __future__ import annotations

import hashlib

from bpflow import files
from bpflow.access import Caller
from bpflow_app.pages.flow_state import FlowState
from tests.app.helpers import run

PDF = b"%PDF-1.4\n%%EOF\n"
CLAIM = {"name": "claim", "circles": [
    {"uri": "fill", "description": "Fill in the claim", "box": {"form": [
        {"name": "receipt", "type": "file", "accept": [".pdf"], "max_bytes": 2_000_000,
         "required": True}]}},
    {"uri": "approve", "deps": [["fill"]],
     "box": {"action": {"type": "approval", "to": "bob", "subject": "claim"}}}]}


def _open(make_state, store, user, iid):
    state = make_state(FlowState, user=user, path=f"/flow/{iid}")
    state.load()
    return state


def test_a_comment_thread_for_whoever_sees_the_flow(make_state, web_store):
    web_store.put_template(CLAIM)
    inst = web_store.start("claim", {}, web_store.user("alice"))
    alice = _open(make_state, web_store, "alice", inst.id)
    assert alice.comments == []
    run(alice.send_comment({"text": "<i>first</i>"}))
    alice.select("fill")
    run(alice.send_comment({"text": "about the step", "about_step": "on"}))
    assert [(c.author, c.step, c.text) for c in alice.comments] == [
        ("alice", "", "<i>first</i>"), ("alice", "Fill in the claim", "about the step")]
    run(alice.send_comment({"text": "   "}))  # refused with a toast: nothing added
    assert len(alice.comments) == 2
    alice.set_tab("history")
    assert "alice commented: “<i>first</i>”" in [h.text for h in alice.history]
    carol = _open(make_state, web_store, "carol", inst.id)  # does not see it
    assert carol.missing and carol.comments == []
    run(carol.send_comment({"text": "let me in"}))
    assert len(web_store.history(inst.id, ("comment",))) == 2


def test_a_file_field_uploads_to_its_circle_and_the_approver_sees_the_file(
        make_state, web_store, work):
    web_store.put_template(CLAIM)
    inst = web_store.start("claim", {}, web_store.user("alice"))
    alice = _open(make_state, web_store, "alice", inst.id)
    [field] = alice.boxes[0].fields
    assert (field.type, field.upload, field.accept, field.limit) == (
        "file", f"{inst.id}/fill/receipt", ".pdf", "2.0 MB")
    record = files.upload(web_store, Caller.of(web_store.user("alice")), "r.pdf", PDF)
    box = alice.boxes[0]
    run(alice.submit({"__circle": "fill", "__bookmark": box.bookmark,
                      "receipt": record["id"]}))
    assert [(f.name, f.owner, f.step, f.size) for f in alice.files] == [
        ("r.pdf", "alice", "Fill in the claim", "15 B")]
    assert web_store.get(inst.id).circles["fill"].result["receipt"]["sha256"] == \
        hashlib.sha256(PDF).hexdigest()
    work()  # bob is asked to approve: he sees the flow and its file
    bob = _open(make_state, web_store, "bob", inst.id)
    assert [f.id for f in bob.files] == [record["id"]]
