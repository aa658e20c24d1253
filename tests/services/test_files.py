"""The files service (SPEC §15): the type from the content, safe names, the limits, what a
form's file field may hold, and the worker's sweep of unused uploads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bpflow import files
from bpflow.access import Caller
from bpflow.errors import NotFound, RateLimited
from bpflow.files import FileRefused, TooLarge, safe_name, sniff
from bpflow.worker import Worker

PDF = b"%PDF-1.7\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
ZIP = b"PK\x03\x04" + b"\x00" * 40


@pytest.mark.parametrize("name, expected", [
    ("../../etc/passwd", "passwd"), ("..\\..\\windows\\x.pdf", "x.pdf"),
    ("  .hidden.pdf ", "hidden.pdf"), ("a\u202egpj.exe", "agpj.exe"), ("", "file"),
    ("...", "file"), ("re\u0301sume\u0301.pdf", "résumé.pdf"),
    ("x" * 300 + ".pdf", "x" * 196 + ".pdf"), ("a\x00b\n.txt", "ab.txt"),
])
def test_names_are_cut_to_a_safe_base_name(name, expected):
    assert safe_name(name) == expected


@pytest.mark.parametrize("content, name, mime", [
    (PDF, "r.pdf", "application/pdf"), (PNG, "p.PNG", "image/png"),
    (b"\xff\xd8\xff\xe0" + b"\x00" * 20, "photo.jpeg", "image/jpeg"),
    (b"a,b\n1,2\n", "t.csv", "text/csv"), ("日本語のメモ".encode(), "n.txt", "text/plain"),
    (ZIP, "a.zip", "application/zip"),
])
def test_a_type_is_known_by_its_content_and_agrees_with_the_name(content, name, mime):
    assert sniff(content, name) == mime


@pytest.mark.parametrize("content, name", [
    (PNG, "r.pdf"), (PDF, "p.png"), (ZIP, "r.pdf"), (b"<svg/>", "s.txt"),
    (b"\n <!DOCTYPE html>", "x.csv"), (b"<?xml version='1.0'?>", "x.json"),
    (b"MZ" + b"\x00" * 100, "x.exe"), (b"\x7fELF" + b"\x00" * 100, "x.bin"),
    (b"text", "x.html"), (b"text", "noext"), (b"\xff\xfe\x00", "u.txt"),
])
def test_markup_programs_and_disguised_files_are_refused(content, name):
    with pytest.raises(FileRefused):
        sniff(content, name)


def test_limits_of_size_and_rate(store, monkeypatch):
    store.add_user("ann", "ann-password-1", ["user"])
    ann = Caller.of(store.user("ann"))
    monkeypatch.setenv("BPFLOW_MAX_FILE_BYTES", "100")
    with pytest.raises(TooLarge):
        files.upload(store, ann, "big.pdf", PDF + b"0" * 100)
    monkeypatch.setattr(files, "HOURLY_UPLOADS", 2)
    files.upload(store, ann, "a.pdf", PDF)
    files.upload(store, ann, "b.pdf", PDF)
    with pytest.raises(RateLimited):
        files.upload(store, ann, "c.pdf", PDF)
    monkeypatch.setenv("BPFLOW_MAX_FILE_BYTES", "ten")
    with pytest.raises(ValueError):
        files.max_file_bytes()


def test_the_uploader_alone_fetches_an_unused_upload(store):
    store.add_user("ann", "ann-password-1", ["user"])
    store.add_user("root", "root-password-1", ["admin"])
    ann, root = Caller.of(store.user("ann")), Caller.of(store.user("root"))
    record = files.upload(store, ann, "a.pdf", PDF)
    assert files.fetch(store, ann, record["id"])[1] == PDF
    with pytest.raises(NotFound):
        files.fetch(store, root, record["id"])


def test_the_worker_sweeps_uploads_unused_after_a_day(store):
    store.add_user("ann", "ann-password-1", ["user"])
    ann = Caller.of(store.user("ann"))
    record = files.upload(store, ann, "a.pdf", PDF)
    worker = Worker(store)
    worker.run_duties()
    assert store.file(record["id"]) is not None  # not a day old
    later = store.clock() + files.UNUSED_FOR + timedelta(minutes=1)
    worker.store.clock = lambda: later
    worker.run_duties()  # the sweep waits a minute between two rounds
    assert store.file(record["id"]) is not None
    sweeper = next(d for d in worker.duties if isinstance(d, files.Sweeper))
    sweeper.last = 0.0
    worker.run_duties()
    assert store.file(record["id"]) is None
