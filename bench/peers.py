"""bpflow against its peers in the same run (`make bench`): SpiffWorkflow and DBOS.

Engine core, in memory, no database: a parallel split of N circles, a join depending on
all of them (AND) and a person's task (a form), N = 4, 20, 50, 200. Each engine starts a
workflow, runs it to the person's task, completes that and runs it to its end; the figure
is the CPU time of this process per workflow (the work is all in memory and one thread;
on a shared machine, wall time would also count the time other processes held the CPUs).
bpflow: `engine/` with the template loaded once. SpiffWorkflow, its spec built once, two
ways: from BPMN XML (start, parallel gateway, N none intermediate events, parallel
gateway, user task, end; a BPMN `task` would be manual) and from its core specs in Python
(`Simple` split, N `Simple`, `Join`, a manual `Simple`; only up to `--core-max` circles:
one workflow of 200 took 49 s in development).

Durable steps: a chain of 10 people's tasks, one step = completing the ready task and
making the state durable, starts not counted. bpflow: `durable_transitions.durable_rate`
(the Store, one SQLite transaction a step, WAL, synchronous=FULL). SpiffWorkflow: the BPMN
chain of 10 user tasks, each step running the task and the engine steps after it,
serializing the workflow with its `BpmnWorkflowSerializer` and writing it to its row in
SQLite + COMMIT (WAL, synchronous=FULL). DBOS: workflows of `--dbos-steps` steps, each
step a durable checkpoint (its own transaction), on SQLite (WAL, synchronous=FULL, a
temporary folder) and on PostgreSQL (its own database `bench_dbos`); each round runs in its
own process (DBOS is a process-wide singleton with background threads). On PostgreSQL,
bpflow is `durable_transitions.py --url ... --json` in the database `bench_bpflow`, and
both run twice a round: one flow at a time, then `--flows` at once (bpflow's `--flows`,
DBOS's workflows on a thread pool). Beside them, the raw commit rate of the disk and of
the server in the same round (one-row UPDATE + COMMIT).

Engine-core figures are medians of `--rounds` rounds, durable ones of `--durable-rounds`;
in each round bpflow runs first, then each peer. Exit status 0 when every target measured
is met.

    .venv/bin/python bench/peers.py [--rounds 5] [--sizes 4,20,50,200] [--core-max 50]
        [--durable-rounds 3] [--transitions 1000] [--dbos-steps 100] [--flows 16]
        [--parts core,durable,dbos] [--pg postgresql://...] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine.analysis import load_template  # noqa: E402
from engine.model import Template  # noqa: E402
from engine.runtime import Engine  # noqa: E402

KEY = b"bench-key-of-at-least-32-bytes-0123456"
CHAIN = 10  # people's tasks in the durable chain (as durable_transitions.STEPS)
PG = "postgresql://postgres@127.0.0.1:5432"
TARGET_CORE_RATIO = 20.0  # bpflow at least 20x faster than SpiffWorkflow at N = 20
TARGET_SCALE = 12.0  # bpflow's time at N = 200 at most 12x its time at N = 20
TARGET_DBOS_PG = 4.0  # bpflow durable steps on PostgreSQL at least 4x DBOS's


# ------------------------------------------------------------------ engine core
def split_template(n: int) -> dict[str, Any]:
    """N circles in parallel, a join depending on all of them, a person's form."""
    return {"name": "split", "circles": [
        *({"uri": f"c{i}"} for i in range(n)),
        {"uri": "join", "deps": [[f"c{i}"] for i in range(n)]},
        {"uri": "form", "deps": [["join"]],
         "box": {"form": [{"name": "v", "type": "integer"}]}}]}


def bpflow_run(engine: Engine, template: Template) -> None:
    """One workflow: start, run to the person's task, complete it."""
    inst = engine.start(template)
    [cid] = engine.ready(inst)
    engine.complete(inst, cid, engine.bookmark(inst, cid), {"v": 1})
    if inst.status != "completed":
        raise RuntimeError(f"bpflow's split ended {inst.status}")


def bpmn_xml(process: str, body: list[str]) -> bytes:
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"'
        ' id="d" targetNamespace="http://bpmn.io/schema/bpmn">',
        f'<bpmn:process id="{process}" isExecutable="true">', *body,
        "</bpmn:process></bpmn:definitions>"]).encode()


def flow(a: str, b: str) -> str:
    return f'<bpmn:sequenceFlow id="{a}-{b}" sourceRef="{a}" targetRef="{b}"/>'


def spiff_bpmn_spec(process: str, body: list[str]) -> Any:
    from SpiffWorkflow.bpmn.parser.BpmnParser import BpmnParser
    parser = BpmnParser()
    parser.add_bpmn_str(bpmn_xml(process, body))
    return parser.get_spec(process)


def spiff_split_spec(n: int) -> Any:
    body = ['<bpmn:startEvent id="start"/>', '<bpmn:parallelGateway id="fork"/>',
            '<bpmn:parallelGateway id="join"/>', '<bpmn:userTask id="form"/>',
            '<bpmn:endEvent id="end"/>', flow("start", "fork"), flow("join", "form"),
            flow("form", "end")]
    for i in range(n):
        body += [f'<bpmn:intermediateThrowEvent id="c{i}"/>', flow("fork", f"c{i}"),
                 flow(f"c{i}", "join")]
    return spiff_bpmn_spec("split", body)


def spiff_user_step(wf: Any, name: str | None = None) -> None:
    """Complete the ready user task (checked by name) and run the engine steps after it."""
    from SpiffWorkflow.util.task import TaskState
    [task] = wf.get_tasks(state=TaskState.READY)
    if name is not None and task.task_spec.name != name:
        raise RuntimeError(f"SpiffWorkflow is at {task.task_spec.name}, not {name}")
    task.data["v"] = 1
    task.run()
    wf.do_engine_steps()


def spiff_bpmn_run(spec: Any) -> None:
    from SpiffWorkflow.bpmn.workflow import BpmnWorkflow
    wf = BpmnWorkflow(spec)
    wf.do_engine_steps()
    spiff_user_step(wf, "form")
    if not wf.is_completed():
        raise RuntimeError("SpiffWorkflow's BPMN split did not complete")


def spiff_core_spec(n: int) -> Any:
    from SpiffWorkflow.specs.Join import Join
    from SpiffWorkflow.specs.Simple import Simple
    from SpiffWorkflow.specs.WorkflowSpec import WorkflowSpec
    spec = WorkflowSpec("split", addstart=True)
    split, join = Simple(spec, "split"), Join(spec, "join")
    spec.start.connect(split)
    for i in range(n):
        task = Simple(spec, f"c{i}")
        split.connect(task)
        task.connect(join)
    join.connect(Simple(spec, "form", manual=True))
    return spec


def spiff_core_run(spec: Any) -> None:
    from SpiffWorkflow.util.task import TaskState
    from SpiffWorkflow.workflow import Workflow
    wf = Workflow(spec)
    wf.run_all(halt_on_manual=True)
    [task] = wf.get_tasks(state=TaskState.READY)
    if task.task_spec.name != "form":
        raise RuntimeError(f"SpiffWorkflow is at {task.task_spec.name}, not form")
    task.set_data(v=1)
    task.run()
    wf.run_all()
    if not wf.is_completed():
        raise RuntimeError("SpiffWorkflow's core split did not complete")


def per_run(run: Callable[[Any], None], arg: Any, reps: int) -> float:
    """CPU seconds of this process per call of `run(arg)`, over `reps` calls, from a
    collected heap (the previous batch's garbage is not this one's to collect)."""
    gc.collect()
    start = time.process_time()
    for _ in range(reps):
        run(arg)
    return (time.process_time() - start) / reps


def core_rounds(sizes: list[int], rounds: int, core_max: int) -> dict[int, dict[str, float]]:
    """Median seconds per workflow of each engine at each size, rounds in turns."""
    engine = Engine(KEY)
    ours = {n: load_template(split_template(n)) for n in sizes}
    peers: dict[int, dict[str, tuple[Callable[[Any], None], Any]]] = {
        n: {"spiff_bpmn": (spiff_bpmn_run, spiff_split_spec(n))} for n in sizes}
    for n in sizes:
        if n <= core_max:
            peers[n]["spiff_core"] = (spiff_core_run, spiff_core_spec(n))
    times: dict[int, dict[str, list[float]]] = {n: {} for n in sizes}
    gc.collect()
    gc.freeze()  # the specs and templates built above are not scanned by every collection
    for r in range(rounds):
        for n in sizes:
            runs = [("bpflow", lambda t: bpflow_run(engine, t), ours[n],
                     max(10, 20000 // (n + 2)))]
            runs += [(name, run, spec, max(1, 40 // n)) for name, (run, spec) in peers[n].items()]
            for name, run, arg, reps in runs:
                times[n].setdefault(name, []).append(per_run(run, arg, reps))
        print(f"  core round {r + 1}/{rounds} done", file=sys.stderr)
    return {n: {k: statistics.median(v) for k, v in by.items()} for n, by in times.items()}


# --------------------------------------------------------------- durable steps
def connect_sqlite(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def spiff_durable_rate(folder: Path, transitions: int) -> float:
    """SpiffWorkflow steps/s: run the ready user task, serialize, write the row, commit."""
    from SpiffWorkflow.bpmn.serializer.workflow import BpmnWorkflowSerializer
    from SpiffWorkflow.bpmn.workflow import BpmnWorkflow
    names = [f"s{i}" for i in range(CHAIN)]
    body = ['<bpmn:startEvent id="start"/>', '<bpmn:endEvent id="end"/>',
            *(f'<bpmn:userTask id="{s}"/>' for s in names),
            *(flow(a, b) for a, b in zip(["start", *names], [*names, "end"], strict=True))]
    spec = spiff_bpmn_spec("chain", body)
    serializer = BpmnWorkflowSerializer()
    conn = connect_sqlite(folder / "spiff.db")
    conn.execute("CREATE TABLE workflow (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    flows = []
    for wid in range(transitions // CHAIN + 1):
        wf = BpmnWorkflow(spec)
        wf.do_engine_steps()
        conn.execute("INSERT INTO workflow VALUES (?, ?)", (wid, serializer.serialize_json(wf)))
        flows.append((wid, wf))
    work = [(wid, wf, s) for s in names for wid, wf in flows][:transitions]
    start = time.perf_counter()
    for wid, wf, s in work:
        spiff_user_step(wf, s)
        conn.execute("BEGIN")
        conn.execute("UPDATE workflow SET body = ? WHERE id = ?",
                     (serializer.serialize_json(wf), wid))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return len(work) / elapsed


def dbos_child(url: str, flows: int, steps: int, threads: int) -> None:
    """In a process of its own: DBOS checkpoints/s over `flows` workflows of `steps` steps,
    `threads` of them at once."""
    import logging
    from concurrent.futures import ThreadPoolExecutor

    from dbos import DBOS
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config={"name": "bench", "system_database_url": url, "log_level": "WARNING",
                 "sys_db_pool_size": max(20, threads + 4)})

    @DBOS.step()
    def step(i: int) -> int:
        return i + 1

    @DBOS.workflow()
    def chain(n: int) -> int:
        return sum(step(i) for i in range(n))

    DBOS.launch()
    chain(steps)  # warm: connections open, statements prepared
    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(chain, [steps] * flows))
        elapsed = time.perf_counter() - start
    DBOS.destroy()
    print(json.dumps({"steps_per_s": flows * steps / elapsed}))


def dbos_rate(url: str, transitions: int, steps: int, threads: int = 1) -> float:
    """One DBOS round in a fresh process: at least `transitions` steps, and at least one
    workflow for each thread."""
    flows = max(threads, -(-transitions // steps))
    out = subprocess.run([sys.executable, __file__, "--dbos-child", url, "--transitions",
                          str(flows * steps), "--dbos-steps", str(steps), "--flows",
                          str(threads)], check=True, capture_output=True, text=True,
                         timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])["steps_per_s"]


def pg_database(server: str, name: str) -> str:
    """A fresh database `name` on the server (dropped first), its URL."""
    import psycopg
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


def bpflow_pg_rate(url: str, transitions: int, flows: int) -> dict[str, Any] | None:
    """One round of durable_transitions.py on PostgreSQL (`flows` at once when more than
    one): its JSON, or None while that script takes no `--url`."""
    script = HERE / "durable_transitions.py"
    helptext = subprocess.run([sys.executable, script, "--help"], capture_output=True,
                              text=True).stdout
    if "--url" not in helptext or "--json" not in helptext:
        return None
    command = [sys.executable, script, "--url", url, "--rounds", "1", "--transitions",
               str(transitions), "--json"]
    if flows > 1:
        command += ["--flows", str(flows)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def json_rate(doc: Any, keys: tuple[str, ...] = ("durable_median", "durable")) -> float | None:
    """A rate in durable_transitions.py's JSON, under the first of `keys` it gives."""
    for key in keys:
        value = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(value, int | float):
            return float(value)
    return None


def durable_rounds(rounds: int, transitions: int, parts: set[str], pg: str,
                   dbos_steps: int, flows: int) -> dict[str, Any]:
    """Median durable steps/s of bpflow and each peer, rounds in turns; the disk's raw
    commit rates beside them."""
    sys.path.insert(0, str(HERE))
    from durable_transitions import durable_rate, raw_rate
    rates: dict[str, list[float]] = {}
    notes: dict[str, Any] = {}

    def add(key: str, value: float | None) -> None:
        if value is not None:
            rates.setdefault(key, []).append(value)

    pg_urls = {}
    if "dbos" in parts:
        pg_urls = {"dbos": pg_database(pg, "bench_dbos"),
                   "bpflow": pg_database(pg, "bench_bpflow")}
    for r in range(rounds):
        with tempfile.TemporaryDirectory(dir=HERE) as tmp:
            folder = Path(tmp)
            add("sqlite_raw", raw_rate(folder, transitions))
            add("bpflow_sqlite", durable_rate(folder, transitions))
            if "durable" in parts:
                add("spiff_sqlite", spiff_durable_rate(folder, transitions))
            if "dbos" in parts:
                with connect_sqlite(folder / "dbos.sqlite"):
                    pass  # WAL is kept in the file; synchronous=FULL is sqlite3's default
                add("dbos_sqlite", dbos_rate(f"sqlite:///{folder / 'dbos.sqlite'}",
                                             transitions, dbos_steps))
        for f in sorted({1, flows}) if "dbos" in parts else ():
            doc = bpflow_pg_rate(pg_urls["bpflow"], transitions, f)
            add(f"bpflow_pg_{f}", json_rate(doc))
            add("pg_raw", json_rate(doc, ("raw_median",)))
            notes["bpflow_pg_writer"] = doc.get("writer") if doc else None
            add(f"dbos_pg_{f}", dbos_rate(pg_urls["dbos"], transitions, dbos_steps, f))
        print(f"  durable round {r + 1}/{rounds}: " + ", ".join(
            f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()), file=sys.stderr)
    return {**{k: statistics.median(v) for k, v in rates.items()}, **notes}


# ---------------------------------------------------------------------- report
def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    cpus = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    return f"{cpus} CPUs ({model}), load average {load}"


def report_core(core: dict[int, dict[str, float]]) -> list[tuple[str, bool]]:
    print("\nEngine core, CPU ms per workflow (split of N, join, person's task), median:")
    print(f"{'N':>5} {'bpflow':>9} {'Spiff BPMN':>11} {'Spiff core':>11} {'x BPMN':>8}"
          f" {'x core':>8}")
    for n, t in core.items():
        b, s, c = t["bpflow"], t["spiff_bpmn"], t.get("spiff_core")
        cells = [f"{c * 1e3:11.2f}" if c else f"{'-':>11}", f"{s / b:8.1f}",
                 f"{c / b:8.1f}" if c else f"{'-':>8}"]
        print(f"{n:>5} {b * 1e3:9.3f} {s * 1e3:11.2f} {cells[0]} {cells[1]} {cells[2]}")
    verdicts = []
    if 20 in core:
        t = core[20]
        peer = min(v for k, v in t.items() if k != "bpflow")
        ratio = peer / t["bpflow"]
        verdicts.append((f"bpflow >= {TARGET_CORE_RATIO:g}x faster than SpiffWorkflow at N = 20"
                         f" (its faster form): {ratio:.1f}x", ratio >= TARGET_CORE_RATIO))
    if 20 in core and 200 in core:
        scale = core[200]["bpflow"] / core[20]["bpflow"]
        verdicts.append((f"bpflow's time at N = 200 <= {TARGET_SCALE:g}x its time at N = 20:"
                         f" {scale:.1f}x", scale <= TARGET_SCALE))
    return verdicts


def report_durable(d: dict[str, Any], flows: int) -> list[tuple[str, bool]]:
    print("\nDurable steps/s, median (raw: one-row UPDATE + COMMIT on the same disk/server):")
    for key, value in d.items():
        print(f"  {key:<16} {f'{value:,.0f}' if isinstance(value, float) else value}")
    verdicts: list[tuple[str, bool]] = []
    for peer in ("spiff_sqlite", "dbos_sqlite"):
        if d.get(peer):
            print(f"  bpflow_sqlite / {peer}: {d['bpflow_sqlite'] / d[peer]:.1f}x")
    for f in sorted({1, flows}):
        ours, theirs = d.get(f"bpflow_pg_{f}"), d.get(f"dbos_pg_{f}")
        if theirs and not ours:
            print(f"  bpflow on PostgreSQL, {f} at once: pending (durable_transitions.py"
                  " takes no --url yet); target open")
        elif ours and theirs:
            ratio = ours / theirs
            print(f"  bpflow_pg_{f} / dbos_pg_{f}: {ratio:.1f}x")
            verdicts.append((f"bpflow durable steps on PostgreSQL >= {TARGET_DBOS_PG:g}x"
                             f" DBOS's, {f} flow(s) at once: {ratio:.1f}x",
                             ratio >= TARGET_DBOS_PG))
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the engine core")
    parser.add_argument("--sizes", default="4,20,50,200")
    parser.add_argument("--core-max", type=int, default=50,
                        help="largest N for SpiffWorkflow's core specs")
    parser.add_argument("--durable-rounds", type=int, default=3)
    parser.add_argument("--transitions", type=int, default=1000,
                        help="durable steps a round for each engine")
    parser.add_argument("--dbos-steps", type=int, default=100, help="steps of a DBOS workflow")
    parser.add_argument("--flows", type=int, default=16,
                        help="flows at once in the second PostgreSQL comparison")
    parser.add_argument("--parts", default="core,durable,dbos")
    parser.add_argument("--pg", default=PG, help="PostgreSQL server (no database) for DBOS")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--dbos-child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dbos_child:
        dbos_child(args.dbos_child, max(1, args.transitions // args.dbos_steps), args.dbos_steps,
                   args.flows)
        return 0
    parts = set(args.parts.split(","))
    print(f"machine: {machine()}")
    verdicts, figures = [], {}
    if "core" in parts:
        figures["core"] = core_rounds([int(n) for n in args.sizes.split(",")], args.rounds,
                                      args.core_max)
        verdicts += report_core(figures["core"])
    if parts & {"durable", "dbos"}:
        figures["durable"] = durable_rounds(args.durable_rounds, args.transitions, parts,
                                            args.pg, args.dbos_steps, args.flows)
        verdicts += report_durable(figures["durable"], args.flows)
    print("\nTargets:")
    for text, ok in verdicts:
        print(f"  {'met' if ok else 'NOT met'}: {text}")
    if args.json:
        print(json.dumps(figures))
    return 0 if all(ok for _, ok in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
