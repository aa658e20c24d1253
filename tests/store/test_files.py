"""Uploads in the store (SPEC §15), on SQLite and PostgreSQL: bytes kept once per content
hash (in the database, or in a folder), a form's hold on an upload, tenants kept apart,
unused uploads swept."""

from __future__ import annotations

import hashlib
import os
import stat
from datetime import timedelta

import pytest

FORM = {"name": "f", "circles": [{"uri": "a", "box": {"form": [
    {"name": "doc", "type": "file"}]}}]}


def keep(store, user, content: bytes, name: str = "r.pdf") -> dict:
    return store.add_file(user["id"], user["username"], name, content,
                          hashlib.sha256(content).hexdigest(), "application/pdf")


@pytest.fixture
def people(store):
    store.add_user("alice", "pw-alice-1", ["user"])
    store.add_user("bob", "pw-bob-12", ["user"])
    store.put_template(FORM)
    return store.user("alice"), store.user("bob")


@pytest.mark.parametrize("place", ["database", "folder"])
def test_bytes_are_kept_once_per_hash_and_read_back(store, people, place, tmp_path,
                                                    monkeypatch):
    if place == "folder":
        monkeypatch.setenv("BPFLOW_FILES_DIR", str(tmp_path / "files"))
    alice, bob = people
    one, two = keep(store, alice, b"%PDF-1"), keep(store, bob, b"%PDF-1", "same.pdf")
    assert one["sha256"] == two["sha256"] and one["id"] != two["id"]
    assert store.file_content(store.file(two["id"])) == b"%PDF-1"
    with store.db.connect() as conn:
        blobs = conn.exec_driver_sql("SELECT count(*) FROM file_blobs").scalar()
    if place == "folder":
        assert blobs == 0
        path = tmp_path / "files" / "default" / one["sha256"][:2] / one["sha256"]
        assert path.read_bytes() == b"%PDF-1"
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    else:
        assert blobs == 1
    # one swept, the other still names the bytes: they stay until neither does
    assert store.sweep_files(store.clock() + timedelta(seconds=1), limit=1) == 1
    left = store.file(one["id"]) or store.file(two["id"])
    assert store.file_content(left) == b"%PDF-1"
    assert store.sweep_files(store.clock() + timedelta(seconds=1)) == 1
    assert store.file_content(left) is None


def test_a_form_holds_only_its_uploaders_unused_file(store, people):
    alice, bob = people
    first = store.start("f", {}, alice)
    second = store.start("f", {}, alice)
    mine = keep(store, alice, b"%PDF-mine")
    assert store.bind_file(mine["id"], bob["id"], first.id, "a") is None  # not bob's
    held = store.bind_file(mine["id"], alice["id"], first.id, "a")
    assert held["instance_id"] == first.id and held["circle"] == "a"
    assert store.bind_file(mine["id"], alice["id"], first.id, "a") is not None  # again
    assert store.bind_file(mine["id"], alice["id"], second.id, "a") is None  # another's
    assert [f["id"] for f in store.instance_files(first.id)] == [mine["id"]]
    assert store.instance_files(second.id) == []
    # held: never swept
    assert store.sweep_files(store.clock() + timedelta(days=2)) == 0
    assert store.uploads_since(alice["id"], store.clock() - timedelta(hours=1)) == (1, 9)


def test_another_tenants_upload_is_not_found(store, people):
    alice, _ = people
    acme = store.of(store.add_tenant("acme"))
    acme.add_user("carol", "pw-carol-1", ["user"])
    carol = acme.user("carol")
    theirs = keep(acme, carol, b"%PDF-acme")
    assert store.file(theirs["id"]) is None and acme.file(theirs["id"])["owner"] == "carol"
    ours = keep(store, alice, b"%PDF-acme")  # the same bytes: each tenant its own copy
    assert acme.file(ours["id"]) is None
    with store.db.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM file_blobs").scalar() == 2
    # the worker's view of every tenant sweeps them all
    assert store.of(None).sweep_files(store.clock() + timedelta(seconds=1)) == 2
