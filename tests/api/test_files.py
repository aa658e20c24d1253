"""Comments and files over HTTP (SPEC §15): uploads sniffed by their content, a `file` form
field holding the uploader's file, downloads only as attachments and only for who sees the
instance, and the hostile families: oversized and disguised files, HTML and SVG, path
tricks in names, another instance's file in a form, a download by someone who cannot see
the instance."""

from __future__ import annotations

import hashlib

import pytest

from bpflow.worker import Worker
from tests.conftest import settled

PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
CLAIM = {"name": "claim", "circles": [
    {"uri": "fill", "box": {"form": [
        {"name": "amount", "type": "number", "required": True},
        {"name": "receipt", "type": "file", "accept": [".pdf", ".png"], "max_bytes": 4096,
         "required": True}]}},
    {"uri": "approve", "deps": [["fill"]],
     "box": {"action": {"type": "approval", "to": "ann", "subject": "claim"}}}]}


@pytest.fixture
def claims(api):
    with api.client("admin") as c:
        assert c.post("/api/templates", json=CLAIM).status_code == 201
    return api


def start(c) -> dict:
    r = c.post("/api/instances", json={"template": "claim"})
    assert r.status_code == 201, r.text
    return r.json()


def upload(c, name: str, content: bytes, **form):
    return c.post("/api/files", files={"file": (name, content, "application/pdf")},
                  data=form)


def submit(c, inst: dict, receipt):
    mark = inst["circles"]["fill"]["bookmark"]
    return c.post(f"/api/instances/{inst['id']}/circles/fill/complete",
                  json={"bookmark": mark, "result": {"amount": 12.5, "receipt": receipt}})


def test_a_receipt_is_uploaded_held_by_the_claim_and_downloaded_by_the_approver(claims):
    with claims.client("alice") as c:
        inst = start(c)
        r = upload(c, "../../etc/Receipt März.pdf", PDF)
        assert r.status_code == 201, r.text
        record = r.json()
        assert record == {"id": record["id"], "name": "Receipt März.pdf", "size": len(PDF),
                          "sha256": hashlib.sha256(PDF).hexdigest(),
                          "type": "application/pdf"}
        # before a form holds it, the uploader alone may download it
        assert c.get(f"/api/files/{record['id']}").status_code == 200
        with claims.client("ann") as other:
            assert other.get(f"/api/files/{record['id']}").status_code == 404
        r = submit(c, inst, record)
        assert r.status_code == 200, r.text
        assert r.json()["circles"]["fill"]["result"]["receipt"] == record
        listed = c.get(f"/api/instances/{inst['id']}/files").json()
        assert [(f["id"], f["owner"], f["uri"]) for f in listed] == [
            (record["id"], "alice", "fill")]
    Worker(claims.store).run_once()  # the approval mail goes to ann
    with claims.client("ann") as c:
        r = c.get(f"/api/files/{record['id']}")
        assert r.status_code == 200 and r.content == PDF
        assert r.headers["content-disposition"].startswith("attachment;")
        assert "filename*=UTF-8''Receipt%20M%C3%A4rz.pdf" in r.headers["content-disposition"]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-type"] == "application/pdf"
    with claims.client("bob") as c:  # does not see the claim
        assert c.get(f"/api/files/{record['id']}").status_code == 404
        assert c.get(f"/api/instances/{inst['id']}/files").status_code == 404


def test_comments_are_written_and_read_by_who_sees_the_instance(claims):
    with claims.client("alice") as c:
        inst = start(c)
        r = c.post(f"/api/instances/{inst['id']}/comments",
                   json={"text": "  <b>receipt</b> attached\r\n", "uri": "fill"})
        assert r.status_code == 201, r.text
        assert r.json()["text"] == "<b>receipt</b> attached"
        assert r.json()["author"] == "alice" and r.json()["uri"] == "fill"
        assert c.post(f"/api/instances/{inst['id']}/comments",
                      json={"text": "whole flow"}).status_code == 201
        assert c.post(f"/api/instances/{inst['id']}/comments",
                      json={"text": "x", "uri": "nowhere"}).status_code == 404
        assert c.post(f"/api/instances/{inst['id']}/comments",
                      json={"text": " \n\u200b "}).status_code == 422
        assert c.post(f"/api/instances/{inst['id']}/comments",
                      json={"text": "x" * 2001}).status_code == 422
        texts = [m["text"] for m in c.get(f"/api/instances/{inst['id']}/comments").json()]
        assert texts == ["<b>receipt</b> attached", "whole flow"]
        one = c.get(f"/api/instances/{inst['id']}/comments", params={"uri": "fill"}).json()
        assert [m["text"] for m in one] == ["<b>receipt</b> attached"]
        history = c.get(f"/api/instances/{inst['id']}/history").json()
        assert [e["actor"] for e in history if e["kind"] == "comment"] == ["alice", "alice"]
    with claims.client("bob") as c:
        assert c.get(f"/api/instances/{inst['id']}/comments").status_code == 404
        assert c.post(f"/api/instances/{inst['id']}/comments",
                      json={"text": "hi"}).status_code == 404
    def added():
        with claims.client("admin") as c:
            feed = c.get("/api/events", params={"types": "comment.added"}).json()
        return [(i["uri"], i["data"]) for i in feed["items"] if i["type"] == "comment.added"]
    assert settled(added, lambda got: len(got) >= 2) == [
            ("fill", {"author": "alice", "text": "<b>receipt</b> attached"}),
            (None, {"author": "alice", "text": "whole flow"})]


# name: (file name, content, form fields, status, words of the detail)
HOSTILE = {
    "html": ("note.pdf", b"<!DOCTYPE html><script>alert(1)</script>", {}, 422, "HTML"),
    "html as text": ("note.txt", b"  <html><body>hi</body></html>", {}, 422, "HTML"),
    "svg": ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>', {}, 422,
            "SVG"),
    "svg after a comment": ("logo.png", b"<!-- x --><svg onload='x'/>", {}, 422, "SVG"),
    "xml": ("data.txt", b'<?xml version="1.0"?><a/>', {}, 422, "XML"),
    "png called pdf": ("receipt.pdf", PNG, {}, 422, "image/png"),
    "pdf called png": ("receipt.png", PDF, {}, 422, "application/pdf"),
    "executable": ("tool.pdf", b"MZ" + b"\x90" * 200, {}, 422, "not accepted"),
    "no extension": ("../../etc/passwd", b"root:x:0:0", {}, 422, "could not be recognised"),
    "binary text": ("notes.txt", b"abc\x00def", {}, 422, "could not be recognised"),
    "empty": ("empty.pdf", b"", {}, 422, "empty"),
    "type the field refuses": ("notes.txt", b"plain words", {"field": "receipt"}, 422,
                               "accepted types"),
    "over the field's size": ("big.pdf", PDF + b"0" * 5000, {"field": "receipt"}, 422,
                              "larger than 4096"),
    "field of a flow not seen": ("r.pdf", PDF, {"field": "receipt", "who": "bob"}, 404,
                                 "no instance"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_uploads_are_refused_and_kept_nowhere(claims, name):
    filename, content, form, status, words = HOSTILE[name]
    form = dict(form)  # the table is shared by the databases' runs
    who = form.pop("who", "alice")
    with claims.client("alice") as c:
        inst = start(c)
    fields = {"instance": inst["id"], "uri": "fill", **form} if form.get("field") else {}
    with claims.client(who) as c:
        r = upload(c, filename, content, **fields)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    with claims.store.db.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM files").scalar() == 0


def test_an_upload_over_the_limit_is_413(claims, monkeypatch):
    with claims.client("alice") as c:
        r = upload(c, "huge.pdf", PDF + b"0" * (10 << 20))
    assert r.status_code == 413
    assert "larger than" in r.json()["detail"]


def test_a_form_holds_only_the_submitters_own_unused_upload(claims):
    with claims.client("alice") as c:
        first, second = start(c), start(c)
        record = upload(c, "r.pdf", PDF).json()
        assert submit(c, first, record).status_code == 200
        # the same file in another instance's form: refused, the form not sent
        r = submit(c, second, record)
        assert r.status_code == 422 and "you uploaded for this flow" in r.text
        # a made-up id, a record without one, text
        for bad in ({"id": "0" * 32}, {"name": "r.pdf"}, "../etc/passwd"):
            assert submit(c, second, bad).status_code == 422
    with claims.client("bob") as c:
        bobs = upload(c, "b.pdf", PDF).json()
    with claims.client("alice") as c:  # bob's upload in alice's form
        assert submit(c, second, bobs).status_code == 422
        png = upload(c, "r.png", PNG).json()
        txt = upload(c, "r.txt", b"just text").json()
        r = submit(c, second, txt)  # kept as an upload, not accepted by the field
        assert r.status_code == 422 and "accepted types" in r.text
        assert submit(c, second, png["id"]).status_code == 200  # the id alone will do


def test_a_download_names_a_safe_file_and_never_an_inline_page(claims):
    with claims.client("alice") as c:
        record = upload(c, "..\\..\\a\u202e; inline.txt", b"plain").json()
        assert record["name"] == "a; inline.txt"
        r = c.get(f"/api/files/{record['id']}")
    cd = r.headers["content-disposition"]
    assert cd == "attachment; filename=\"a_ inline.txt\"; filename*=UTF-8''a%3B%20inline.txt"
    assert r.headers["content-type"].startswith("text/plain")
    assert "sandbox" in r.headers["content-security-policy"]
    with claims.client("alice") as c:
        assert c.get("/api/files/not-an-id").status_code == 422
        assert c.get("/api/files/" + "0" * 32).status_code == 404


def test_unused_uploads_are_swept_after_a_day(claims):
    from datetime import timedelta

    from bpflow.files import UNUSED_FOR
    store = claims.store
    with claims.client("alice") as c:
        inst = start(c)
        held = upload(c, "r.pdf", PDF).json()
        loose = upload(c, "s.pdf", PDF + b" ").json()
        assert submit(c, inst, held).status_code == 200
    assert store.sweep_files(store.clock() - UNUSED_FOR) == 0  # too young
    assert store.sweep_files(store.clock() + timedelta(seconds=1)) == 1
    assert store.file(loose["id"]) is None and store.file(held["id"]) is not None
    with store.db.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM file_blobs").scalar() == 1
