"""One backend process of `make run-scaled` (bpflow/scaled.py), and the frontend build
they serve.

    python -m bpflow_app.serve --port PORT [--backend-only]
    python -m bpflow_app.serve --build --port PORT

Serving, this is `reflex run --env prod --backend-only --backend-port PORT` (Reflex's
production server, Granian, with `GRANIAN_WORKERS` worker processes), with two changes:

- several of these processes share PORT: Granian opens its listening socket with
  SO_REUSEPORT on Linux, so the kernel spreads new connections over every process
  listening there, and one that dies leaves the port to the others. Reflex's own check
  that the port is free is skipped;
- without `--backend-only` it also serves the frontend as `reflex run --single-port`
  does (the pages, from the build in .web/), without building it: `--build` builds it
  once beforehand, for PORT (a build names the port its pages talk to), and exits.

Each Granian worker process is tied to the Granian process that forked it (bpflow.tether):
it gets SIGKILL when that one dies, however it dies.
"""

from __future__ import annotations

import argparse
import os
import sys

from bpflow import tether


def _patch_reflex(*, mount_frontend: bool, build_only: bool) -> None:
    """What differs from Reflex's own `run` (reflex 0.10, pinned in pyproject.toml)."""
    from reflex.utils import exec as rx_exec
    from reflex.utils import processes

    # the port is shared on purpose (SO_REUSEPORT); Reflex would refuse a port in use
    processes.handle_port = lambda service_name, port, auto_increment: port
    run_backend_prod = rx_exec.run_backend_prod

    if build_only:  # nothing runs: Reflex's "App running" and "app stopped" would mislead
        rx_exec.notify_app_running = lambda: None
        rx_exec.notify_frontend = lambda url, backend_present: None
        processes.atexit_handler = lambda: None

    def run_backend(host, port, loglevel, mount_frontend_compiled_app=False):
        if build_only:
            return
        # forked workers (Granian's) die with the process that forked them
        os.register_at_fork(after_in_child=tether.die_with_parent)
        run_backend_prod(host, port, loglevel, mount_frontend)

    rx_exec.run_backend_prod = run_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bpflow_app.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend-only", action="store_true",
                        help="the API and the event socket, not the pages")
    parser.add_argument("--build", action="store_true",
                        help="build the frontend for PORT and exit")
    parser.add_argument("--loglevel", default="info")
    args = parser.parse_args(argv)
    _patch_reflex(mount_frontend=not args.backend_only, build_only=args.build)
    from reflex.reflex import cli

    port = str(args.port)
    if args.build:  # what `reflex run --single-port` does before it serves
        command = ["run", "--env", "prod", "--single-port", "--frontend-port", port,
                   "--backend-port", port]
    else:
        command = ["run", "--env", "prod", "--backend-only", "--backend-port", port]
    return cli.main([*command, "--loglevel", args.loglevel], prog_name="reflex",
                    standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main())
