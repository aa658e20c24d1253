"""A real local HTTP server for tests of HTTP actions: it records every request and
answers by path (`/ok`, `/status/500`, `/slow/<seconds>`, `/slow-once/<seconds>`, `/text`,
and `/flaky/...`: HTTP 503 while the recorder's `down` is set, then as `/ok`)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.down = False  # `/flaky/...` answers 503 (a service that is down)

    def keys(self) -> Counter:
        with self.lock:
            return Counter(r["headers"].get("Idempotency-Key") for r in self.requests)

    def seen(self, path: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r["path"] == path)


def _handler(recorder: Recorder):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with recorder.lock:
                recorder.requests.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers), "body": raw})
                count = sum(1 for r in recorder.requests if r["path"] == self.path)
            parts = self.path.strip("/").split("/")
            status, body, ctype = 200, json.dumps({"ok": True, "echo": _json(raw)}), "json"
            if parts[0] == "status" or (parts[0] == "flaky" and recorder.down):
                status = int(parts[1]) if parts[0] == "status" else 503
                body = json.dumps({"error": "server says no"})
            elif parts[0] == "slow" or (parts[0] == "slow-once" and count == 1):
                time.sleep(float(parts[1]))
            elif parts[0] == "text":
                body, ctype = "plain answer", "text"
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if ctype == "json"
                             else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode(errors="replace")


class LocalServer:
    def __init__(self) -> None:
        self.recorder = Recorder()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.recorder))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
