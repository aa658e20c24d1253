"""What `make run-scaled` runs under supervisord (bpflow/scaled.py starts it), and how
their output reaches the console.

- `programs`: each backend and each worker a program of its own (`backend-1`, …,
  `worker-1`, …), started through bpflow.tether so that none outlives supervisord; each
  told its name in `BPFLOW_PROCESS`.
- `config`: supervisord's configuration: in the foreground, its control socket in
  BPFLOW_HOME (for `supervisorctl -c <that file> status`), one log per program; every
  program restarted when it exits, with back-off when it fails to start (supervisord waits
  1 s, 2 s, 3 s, … between tries, up to STARTRETRIES, then leaves it FATAL until
  `supervisorctl start NAME`).
- `Follower`: the console's copy of every log, each line led by its program's name.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

STARTRETRIES = 60  # tries before FATAL, 1 + 2 + … + 60 s ≈ 30 minutes of back-off
STOP_WAIT_S = 10  # what a program gets to stop after SIGTERM before SIGKILL
LOG_BYTES = 20 * 2**20  # a program's log is rotated at this size, 2 old ones kept
SOCKET_PATH_MAX = 100  # a unix socket's path is at most 107 bytes on Linux


@dataclass
class Program:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # how long it must run to count as started; one that exits sooner failed to start
    # (back-off), one that exits later is restarted at once
    startsecs: int = 3


def programs(backends: int, workers: int, port: int, backend_only: bool = False,
             lease: float | None = None, poll: float | None = None) -> list[Program]:
    """The backends (one Granian process each, with one worker process, all on `port`:
    bpflow_app/serve.py) and the `bpflow worker`s."""
    py = sys.executable
    serve = [py, "-m", "bpflow_app.serve", "--port", str(port),
             *(["--backend-only"] if backend_only else [])]
    out = [Program(f"backend-{i + 1}", serve,
                   # requests only: the work is the `bpflow worker`s'
                   {"GRANIAN_WORKERS": "1", "BPFLOW_INPROCESS_WORKER": "0"},
                   # a backend takes about 10 s to start; one that cannot (no database,
                   # a broken app) fails within that
                   startsecs=10)
           for i in range(backends)]
    worker = [py, "-m", "bpflow.cli", "worker"]
    env = {}
    if lease is not None:
        worker += ["--lease", f"{lease:g}"]
        env["BPFLOW_LEASE_SECONDS"] = f"{lease:g}"
    if poll is not None:
        worker += ["--poll", f"{poll:g}"]
    out += [Program(f"worker-{i + 1}", worker, dict(env)) for i in range(workers)]
    for p in out:
        p.env.update(BPFLOW_PROCESS=p.name, PYTHONUNBUFFERED="1")
    return out


def socket_path(home: Path) -> Path:
    """supervisord's control socket: in `home`, or when that path is too long for a unix
    socket, in the temporary folder under a name made from `home`."""
    path = home.resolve() / "supervisor.sock"
    if len(str(path)) <= SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"bpflow-{digest}.sock"


class ConfigError(ValueError):
    """What supervisord's configuration cannot say."""


def _plain(value: str) -> str:
    """A value for supervisord's configuration, which expands `%(...)s` in its values (some
    of them twice): a `%` is refused, not escaped."""
    if "%" in value:
        raise ConfigError(f"supervisord cannot take a '%' in {value!r}: run from a folder "
                          "(and with a BPFLOW_HOME) whose path has none")
    return value


def _command(args: list[str]) -> str:
    return _plain(shlex.join([sys.executable, "-m", "bpflow.tether", *args]))


def _environment(env: dict[str, str]) -> str:
    return ",".join(f'{k}="{_plain(v)}"' for k, v in env.items())


def config(home: Path, cwd: Path, progs: list[Program], password: str) -> str:
    """supervisord's configuration for `progs`, run from `cwd`, its files in `home`:
    supervisord.pid, the control socket (owner only, and `password` asked of
    supervisorctl: the file holding it must be the owner's only), logs/<name>.log for
    supervisord and each program. Every program gets supervisord's environment plus its
    own."""
    home = home.resolve()
    logs = home / "logs"
    sock = _plain(str(socket_path(home)))
    lines = [
        "; written by bpflow/scaled.py (make run-scaled) at each start: edits are lost",
        "[supervisord]",
        "nodaemon=true",
        "silent=true",  # its own log goes to logs/supervisord.log, shown by the launcher
        f"logfile={_plain(str(logs / 'supervisord.log'))}",
        f"logfile_maxbytes={LOG_BYTES}",
        "logfile_backups=2",
        f"pidfile={_plain(str(home / 'supervisord.pid'))}",
        f"childlogdir={_plain(str(logs))}",
        f"directory={_plain(str(cwd))}",
        "identifier=bpflow",
        # as root, say so: supervisord warns at every start that it keeps root otherwise
        *([f"user={pwd.getpwuid(0).pw_name}"] if os.geteuid() == 0 else []),
        "",
        "[unix_http_server]",
        f"file={sock}",
        "chmod=0700",
        "username=bpflow",
        f"password={_plain(password)}",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{sock}",
        "username=bpflow",
        f"password={_plain(password)}",
    ]
    for p in progs:
        lines += [
            "",
            f"[program:{p.name}]",
            f"command={_command(p.command)}",
            f"directory={_plain(str(cwd))}",
            f"environment={_environment(p.env)}",
            "autostart=true",
            "autorestart=true",
            f"startsecs={p.startsecs}",
            f"startretries={STARTRETRIES}",
            "stopsignal=TERM",
            f"stopwaitsecs={STOP_WAIT_S}",
            # the program leads its own process group (Granian's worker is in it)
            "stopasgroup=true",
            "killasgroup=true",
            "redirect_stderr=true",
            f"stdout_logfile={_plain(str(logs / f'{p.name}.log'))}",
            f"stdout_logfile_maxbytes={LOG_BYTES}",
            "stdout_logfile_backups=2",
        ]
    return "\n".join(lines) + "\n"


class Follower:
    """The lines added to some log files, each led by its name: `pump` prints what was
    written since the last call (from the files' ends at creation), a rotated or
    truncated file read again from its start."""

    def __init__(self, files: dict[str, Path], out=None) -> None:
        self.files = files
        self.out = out or sys.stdout
        self.width = max(map(len, files), default=0)
        self.at: dict[str, tuple[int, int]] = {}  # name → (inode, offset)
        self.partial: dict[str, bytes] = {}
        for name, path in files.items():
            try:
                st = path.stat()
                self.at[name] = (st.st_ino, st.st_size)
            except OSError:
                self.at[name] = (0, 0)

    def pump(self, final: bool = False) -> int:
        """Print the new whole lines (with `final`, a last unfinished one too); how many."""
        shown = 0
        for name, path in self.files.items():
            try:
                st = path.stat()
            except OSError:
                continue
            inode, offset = self.at[name]
            if st.st_ino != inode or st.st_size < offset:
                offset = 0
            if st.st_size == offset:
                continue
            with path.open("rb") as f:
                f.seek(offset)
                data = self.partial.pop(name, b"") + f.read(st.st_size - offset)
            self.at[name] = (st.st_ino, st.st_size)
            *lines, rest = data.split(b"\n")
            if rest and final:
                lines.append(rest)
            elif rest:
                self.partial[name] = rest
            for line in lines:
                text = line.decode(errors="replace").rstrip("\r")
                self.out.write(f"{name:<{self.width}} | {text}\n")
            shown += len(lines)
        if shown:
            self.out.flush()
        return shown


def supervisor_command(name: str) -> Path:
    """supervisord or supervisorctl beside this Python (the package `supervisor`)."""
    return Path(sys.executable).with_name(name)

