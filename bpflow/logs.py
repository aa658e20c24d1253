"""How bpflow's processes log (SPEC §14a): every line names its process, and the HTTP
clients' line per request stays out unless asked for. The one set-up, used by `bpflow
worker` and the web backend.

- A process's name: `BPFLOW_PROCESS` when set (`{pid}` in it is replaced by the process
  id, for processes that share one environment, as a server's worker processes do), else
  `<kind>-<pid>` in log lines (`worker-4242`, `backend-4243`) and `<host>:<pid>` in a
  backend's answers (`X-Bpflow-Backend`, `bpflow.api.hot`).
- Lines: `<time> <process> <LEVEL> <logger>: <message>` on stderr; bpflow's own loggers
  from INFO, other libraries' from WARNING; `httpx` and `httpcore` (every HTTP action and
  webhook delivery would be a line) from INFO too when `BPFLOW_LOG_HTTP=1`.
- `BPFLOW_LOG_FORMAT=json`: one JSON object a line instead (SPEC §18): `time`, `process`,
  `level`, `logger`, `message`, and `instance` and `circle` on every line about one
  (given as `extra=`, or named in the message as "instance ID" and "circle URI").
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import sys

PROCESS_ENV = "BPFLOW_PROCESS"
HTTP_ENV = "BPFLOW_LOG_HTTP"
HTTP_LOGGERS = ("httpx", "httpcore")
FORMAT = "%(asctime)s {process} %(levelname)s %(name)s: %(message)s"
FORMAT_ENV = "BPFLOW_LOG_FORMAT"
NAMED = {"instance": re.compile(r"\binstance '?([0-9a-f]{32})\b"),
         "circle": re.compile(r"\bcircle '?([A-Za-z0-9_.\-]+)")}


class JsonLines(logging.Formatter):
    """One JSON object a line, with the instance and circle a line is about."""

    def __init__(self, process: str):
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line = {"time": self.formatTime(record), "process": self.process,
                "level": record.levelname, "logger": record.name, "message": message}
        for key, pattern in NAMED.items():
            value = getattr(record, key, None)
            if value is None and (found := pattern.search(message)):
                value = found.group(1)
            if value is not None:
                line[key] = str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def process_name(default: str) -> str:
    """This process's name: `BPFLOW_PROCESS` ({pid} replaced by the process id), else
    `default`."""
    named = os.environ.get(PROCESS_ENV, "").strip()
    return named.replace("{pid}", str(os.getpid())) if named else default


def process_label(kind: str) -> str:
    """This process's name in its log lines (`kind`: `worker`, `backend`)."""
    return process_name(f"{kind}-{os.getpid()}")


def backend_name() -> str:
    """The backend process's name in its answers: `host:pid` unless named."""
    return process_name(f"{socket.gethostname()}:{os.getpid()}")


class _Lines(logging.StreamHandler):
    """The handler `setup` puts on the root logger (once, however often it is called),
    writing to whatever `sys.stderr` is when a line is written."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup(kind: str) -> str:
    """Log lines of this process on stderr, each naming it; returns its label."""
    label = process_label(kind)
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _Lines)), None)
    if handler is None:
        handler = _Lines()
        root.addHandler(handler)
    handler.setFormatter(JsonLines(label) if os.environ.get(FORMAT_ENV) == "json" else
                         logging.Formatter(FORMAT.format(process=label.replace("%", "%%"))))
    root.setLevel(logging.WARNING)
    logging.getLogger("bpflow").setLevel(logging.INFO)
    http = logging.INFO if os.environ.get(HTTP_ENV, "") == "1" else logging.WARNING
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(http)
    return label
