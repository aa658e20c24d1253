"""Changes on PostgreSQL: every change also sent to the other processes on the same
database and schema with `pg_notify` (gathered, on a connection of its own, right after
the commit), and one `LISTEN` connection per process handing theirs to its subscribers."""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import queue
import threading
import time

from bpflow.store.changes.hub import EVERYTHING, Change, Hub

log = logging.getLogger("bpflow.changes")

CHANNEL = "bpflow_changes"  # followed by the schema's name: `PgHub.channel`
PAYLOAD_MAX = 7000  # bytes of one notification (PostgreSQL's limit is 8000)
IDLE_S = 2.0  # seconds without a change before the sending connection is closed
# at most one notification round trip this often: a change after a quiet spell goes at
# once, a steady stream is gathered. Each is a transaction of the server's (one flow's
# steps on PostgreSQL: every 5 ms cost 60-80 us of each ~0.75 ms step, every 25 ms a
# third of that; bench/RESULTS.md); a page hears of a change at most this much later.
GATHER_S = 0.025
RETRY_S = 2.0  # before the listener connects again after losing its connection


class PgHub(Hub):
    """A hub that also sends its changes to, and receives those of, the other processes
    on the same PostgreSQL database and schema (NOTIFY / LISTEN on `channel`).

    Sending happens on a thread of its own, so a step never waits for it: it gathers the
    changes that arrive together into as few notifications as fit. Each carries this
    hub's origin, so the listener skips what this process delivered already."""

    def __init__(self, conninfo: str) -> None:
        super().__init__()
        self.conninfo = conninfo
        self.origin = f"{os.getpid()}-{id(self):x}"
        self._outbox: queue.SimpleQueue[Change | None] = queue.SimpleQueue()
        self._threads: dict[str, threading.Thread] = {}
        self._stop = threading.Event()
        self._started = threading.Lock()
        self.listening.clear()  # set while the listener's LISTEN holds
        self.listener_pid = 0  # its server process
        self._channel: str | None = None

    def publish(self, changes: list[Change]) -> None:
        if not changes:
            return
        self.deliver(changes)
        if self._stop.is_set():
            return
        if self._start("notify", self._notifier):
            atexit.register(self._flush)
        for change in changes:
            self._outbox.put(change)

    def _listen(self) -> None:
        self._start("listen", self._listener)

    def _start(self, name: str, target) -> bool:
        """Start thread `name` unless it runs already; whether it was started now."""
        if name in self._threads or self._stop.is_set():
            return False
        with self._started:
            if name in self._threads:
                return False
            thread = threading.Thread(target=target, daemon=True,
                                      name=f"bpflow-changes-{name}")
            try:
                thread.start()
            except RuntimeError:  # the interpreter is shutting down
                return False
            self._threads[name] = thread
            return True

    def close(self) -> None:
        self._stop.set()
        self._flush()
        listener = self._threads.get("listen")
        if listener is not None:
            listener.join(timeout=10)

    # ------------------------------------------------------------------ sending
    def _notifier(self) -> None:
        """Send what is published, gathered; the connection is closed after IDLE_S
        seconds with nothing to send (opened again on the next change)."""
        conn, sent = None, 0.0
        while True:
            batch, more = self._drain(IDLE_S if conn is not None else None, sent + GATHER_S)
            if not batch and conn is not None:
                conn.close()  # idle
                conn = None
            if batch:
                conn = self._send(conn, self.payloads(batch))
                sent = time.monotonic()
            if not more:
                break
        if conn is not None:
            conn.close()

    def _send(self, conn, payloads: list[str]):
        import psycopg
        for attempt in range(2):  # a broken connection is opened again once
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.conninfo, autocommit=True)
                    # a notification is a hint, kept nowhere: its transaction need not
                    # wait for the disk, nor make the steps' commits wait behind it
                    conn.execute("SET synchronous_commit TO off")
                conn.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p",
                             (self.channel(conn), payloads))
                return conn
            except psycopg.Error as exc:
                conn = None
                if attempt:
                    log.warning("changes not sent to the other processes: %s", exc)
        return None

    def channel(self, conn) -> str:
        """The channel of this database's schema: installations sharing a database in
        schemas of their own (`-csearch_path`) hear only their own changes. A channel
        is an identifier (63 bytes at most): a long schema name is shortened to its
        digest."""
        if self._channel is None:
            schema = conn.execute("SELECT current_schema()").fetchone()[0] or "public"
            name = f"{CHANNEL}_{schema}"
            if len(name.encode()) > 63 or '"' in name:
                name = f"{CHANNEL}_{hashlib.sha256(schema.encode()).hexdigest()[:32]}"
            self._channel = name
        return self._channel

    def _drain(self, timeout: float | None, gather_until: float) -> tuple[list[Change], bool]:
        """(the changes waiting, up to 1000, after up to `timeout` seconds for the
        first and, once it came, until the monotonic time `gather_until` for more;
        whether to go on: False once the hub closes)."""
        try:
            first = self._outbox.get(timeout=timeout)
        except queue.Empty:
            return [], True
        wait = gather_until - time.monotonic()
        if wait > 0 and first is not None:
            time.sleep(wait)
        batch: list[Change] = []
        while first is not None:
            batch.append(first)
            if len(batch) >= 1000:
                return batch, True
            try:
                first = self._outbox.get_nowait()
            except queue.Empty:
                return batch, True
        return batch, False

    def _flush(self) -> None:
        """Send what is waiting before the process exits (a one-shot command's step
        still reaches the pages)."""
        thread = self._threads.get("notify")
        if thread is not None and thread.is_alive():
            self._outbox.put(None)
            thread.join(timeout=5)

    def payloads(self, changes: list[Change]) -> list[str]:
        """The notifications carrying `changes`, each under PAYLOAD_MAX bytes."""
        out: list[str] = []
        rows: list[str] = []
        size = 0
        for c in changes:
            row = json.dumps([c.instance, c.seq, c.tenant, sorted(c.tokens)],
                             separators=(",", ":"))
            if rows and size + len(row) + 1 > PAYLOAD_MAX - len(self.origin) - 16:
                out.append(self._payload(rows))
                rows, size = [], 0
            rows.append(row)
            size += len(row.encode()) + 1
        if rows:
            out.append(self._payload(rows))
        return out

    def _payload(self, rows: list[str]) -> str:
        return f'{{"o":"{self.origin}","c":[{",".join(rows)}]}}'

    # ---------------------------------------------------------------- receiving
    def _listener(self) -> None:
        """One connection listening for the whole process; after losing it, everything
        may have changed meanwhile (subscribers are told so and re-read)."""
        import psycopg
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f'LISTEN "{self.channel(conn)}"')
                    self.listener_pid = conn.info.backend_pid
                    self.listening.set()
                    if lost:
                        self.deliver([EVERYTHING])
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self.received(note.payload)
            except psycopg.Error as exc:
                self.listening.clear()
                if not lost:
                    log.warning("listening for changes failed (%s); trying again", exc)
                lost = True
                time.sleep(RETRY_S)
        self.listening.clear()

    def received(self, payload: str) -> None:
        """Deliver a notification of another process (ours were delivered already)."""
        try:
            note = json.loads(payload)
            if note["o"] == self.origin:
                return
            changes = [Change(str(iid), seq, tenant, frozenset(tokens))
                       for iid, seq, tenant, tokens in note["c"]]
        except (ValueError, KeyError, TypeError):
            log.warning("a change notification that does not parse: %.200s", payload)
            return
        self.deliver(changes)
