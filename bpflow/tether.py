"""Processes that do not outlive the process that started them (Linux).

    python -m bpflow.tether COMMAND [ARG...]

runs COMMAND (exec: same pid) with the kernel asked to send it SIGKILL when its parent
dies (`prctl(PR_SET_PDEATHSIG, SIGKILL)`, kept across exec), whatever kills the parent,
SIGKILL included. `make run-scaled` starts supervisord so, and supervisord starts every
program so (bpflow/scaled.py): nothing of the run outlives its manager.

The request holds from the moment it is made; a parent that died before (between the fork
and the request) is noticed by the parent having changed, and the command is not run.
Elsewhere than on Linux the request is not made and the command runs as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Ask for SIGKILL when the parent dies; False when the parent is already gone (it
    is not `expected_parent`, or, without one, the process was handed to init) or the
    request cannot be made here."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    parent = os.getppid()
    return parent != 1 if expected_parent is None else parent == expected_parent


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    parent = os.getppid()
    if sys.platform.startswith("linux") and not die_with_parent():
        print(f"bpflow.tether: the parent (pid {parent}) is gone; not running {args[0]}",
              file=sys.stderr)
        return 1
    try:
        os.execvp(args[0], args)
    except OSError as exc:
        print(f"bpflow.tether: cannot run {args[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
