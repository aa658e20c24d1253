"""How bpflow's processes log: a `bpflow worker`'s every line names its process, HTTP
calls make no line of their own unless asked for (`BPFLOW_LOG_HTTP=1`), and the names a
process goes by."""

from __future__ import annotations

import logging
import os
import socket

import httpx
import pytest

from bpflow import logs
from bpflow.store import Store
from tests.conftest import SECRET, sqlite_database
from tests.services.helpers import http_flow
from tests.services.test_worker import run_worker_process, stop, wait_until


def worker_lines(tmp_path, server, **env: str) -> tuple[int, list[str]]:
    """A `bpflow worker` process run until it has made an HTTP call: its pid and the
    lines it wrote on stderr."""
    url = sqlite_database(tmp_path / "bpflow.db")
    store = Store(url, secret=SECRET)
    try:
        store.put_template(http_flow(f"{server.url}/ok"))
        iid = store.start("call", {"n": 1}).id
        worker = run_worker_process(url, "--poll", "0.05", **env)
        try:
            wait_until(lambda: store.get(iid).status == "completed", 30, "the HTTP action")
        finally:
            stop(worker)
    finally:
        store.close()
    assert worker.stderr is not None
    return worker.pid, worker.stderr.read().decode().splitlines()


def test_a_worker_names_itself_in_every_line_and_leaves_http_calls_out(tmp_path, server):
    pid, lines = worker_lines(tmp_path, server, BPFLOW_PROCESS="", BPFLOW_LOG_HTTP="")
    assert any("bpflow.worker: worker" in line and "started" in line for line in lines)
    assert all(f" worker-{pid} " in line for line in lines), lines
    assert not [line for line in lines if "HTTP Request" in line]


@pytest.fixture
def set_up(monkeypatch):
    """`logs.setup` in this process; what it changed is put back after the test (the
    autouse `_logging_put_back` of tests/conftest.py)."""
    monkeypatch.delenv(logs.PROCESS_ENV, raising=False)
    monkeypatch.delenv(logs.HTTP_ENV, raising=False)
    return logs.setup


def test_http_calls_are_logged_when_asked(set_up, monkeypatch, capsys, server):
    set_up("worker")
    httpx.get(f"{server.url}/ok")
    assert "HTTP Request" not in capsys.readouterr().err
    monkeypatch.setenv(logs.HTTP_ENV, "1")
    label = set_up("worker")
    httpx.get(f"{server.url}/ok")
    assert f" {label} INFO httpx: HTTP Request: GET {server.url}/ok " in capsys.readouterr().err


def test_a_process_is_named_by_its_kind_and_id_unless_named(monkeypatch):
    monkeypatch.delenv(logs.PROCESS_ENV, raising=False)
    pid = os.getpid()
    assert logs.process_label("backend") == f"backend-{pid}"
    assert logs.backend_name() == f"{socket.gethostname()}:{pid}"
    monkeypatch.setenv(logs.PROCESS_ENV, " api-east ")
    assert logs.process_label("backend") == logs.backend_name() == "api-east"


@pytest.mark.parametrize("label", ["100%", "{kind}", "a%(name)s"])
def test_any_label_is_written_as_it_is(set_up, monkeypatch, capsys, label):
    monkeypatch.setenv(logs.PROCESS_ENV, label)
    assert set_up("worker") == label
    assert set_up("worker") == label  # set up again: still one line each
    logging.getLogger("bpflow.test").info("hello")
    assert capsys.readouterr().err.count(f" {label} INFO bpflow.test: hello\n") == 1


def test_json_lines_name_the_instance_and_circle_they_are_about(set_up, monkeypatch, capsys):
    monkeypatch.setenv(logs.FORMAT_ENV, "json")
    label = set_up("worker")
    iid = "0123456789abcdef0123456789abcdef"
    log = logging.getLogger("bpflow.test")
    log.warning("instance %s circle %s: result dropped", iid, "pay.check")
    log.info("given", extra={"instance": iid, "circle": "a"})
    log.info("nothing about an instance")
    import json
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(x["process"], x["level"], x["logger"]) for x in lines] == [
        (label, "WARNING", "bpflow.test"), (label, "INFO", "bpflow.test"),
        (label, "INFO", "bpflow.test")]
    assert [(x.get("instance"), x.get("circle")) for x in lines] == [
        (iid, "pay.check"), (iid, "a"), (None, None)]
    assert lines[0]["message"] == f"instance {iid} circle pay.check: result dropped"
