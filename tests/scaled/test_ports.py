"""The servers of these tests start on a free port chosen again when it was taken between
its choice and the server's bind (`tests/servers.py`, `started`)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests import servers


def http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def test_a_port_taken_before_the_server_binds_is_chosen_again(monkeypatch, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], servers.free_port()])
        monkeypatch.setattr(servers, "free_port", lambda: next(ports))
        log = tmp_path / "server.log"
        base, process = servers.started(http_server, {}, log, paths=("/",))
        try:
            assert base != f"http://127.0.0.1:{taken.getsockname()[1]}"
            assert servers.answers(base + "/")
        finally:
            servers.stop(process)


def test_a_server_failing_for_another_reason_fails_at_once(monkeypatch, tmp_path: Path):
    tries = []
    monkeypatch.setattr(servers, "free_port", lambda: tries.append(1) or 1)  # not ours
    with pytest.raises(pytest.fail.Exception):
        servers.started(lambda port: [sys.executable, "-c", "raise SystemExit(3)"], {},
                        tmp_path / "server.log", paths=("/",))
    assert len(tries) == 1
