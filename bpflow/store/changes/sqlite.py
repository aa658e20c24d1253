"""Changes on an SQLite file, which other processes on the machine may share (a `bpflow
worker`, a command): their writes noticed by the file's `PRAGMA data_version`."""

from __future__ import annotations

import logging
import threading
import time

from bpflow.store.changes.hub import EVERYTHING, Change, Hub

log = logging.getLogger("bpflow.changes")

WATCH_S = 1.0  # how often an SQLite file is checked for other processes' writes
BUSY_S = 5.0  # at most this often "everything" when their writes mix with ours


class SqliteHub(Hub):
    """A hub on an SQLite file, which other processes on the machine may share (a
    `bpflow worker`, a command): while anyone subscribes, one thread per process reads the
    file's `PRAGMA data_version` every WATCH_S seconds (no table is read). When it moved
    and this process published nothing meanwhile, another process wrote: every subscriber
    is told that everything may have changed and checks what it shows. When both happened,
    which writes were whose cannot be told apart: subscribers are told so at most every
    BUSY_S seconds (no page then misses another process's change for longer)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._published = 0  # local publishes so far (the watcher compares)
        self._watching = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new subscriber or the close: look at once
        self.listening.clear()  # set while the watcher knows the file's version

    def publish(self, changes: list[Change]) -> None:
        if changes:
            self._published += 1
            self.deliver(changes)

    def _listen(self) -> None:
        with self._watching:
            if self._watcher is None and not self._stop.is_set():
                self._watcher = threading.Thread(target=self._watch, daemon=True,
                                                 name="bpflow-changes-watch")
                self._watcher.start()
        self._wake.set()  # when not watching yet, a look at once: `heard` is quick

    def _watch(self) -> None:
        import sqlite3
        conn = sqlite3.connect(self.path, check_same_thread=False)
        try:
            version, published, told = None, self._published, 0.0
            look = time.monotonic()  # the next look at the file's version
            while True:
                self._wake.wait(max(0.0, look - time.monotonic()))
                self._wake.clear()
                if self._stop.is_set():
                    break
                if not self.subscribers():
                    version = None
                    self.listening.clear()
                    look = time.monotonic() + WATCH_S
                    continue
                if version is not None and time.monotonic() < look:
                    continue  # a new subscriber while watching already: heard
                look = time.monotonic() + WATCH_S
                now, mine = conn.execute("PRAGMA data_version").fetchone()[0], self._published
                self.listening.set()
                moved = version is not None and now != version
                if moved and (mine == published or time.monotonic() - told >= BUSY_S):
                    told = time.monotonic()
                    self.deliver([EVERYTHING])
                version, published = now, mine
        except sqlite3.Error as exc:
            log.warning("watching %s for other processes' changes stopped: %s",
                        self.path, exc)
        finally:
            conn.close()
            self.listening.clear()
            with self._watching:
                self._watcher = None

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=10)
