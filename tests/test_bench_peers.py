"""bench/peers.py's bpflow side (its peers need the bench extra; these tests do not)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from engine.analysis import analyze
from engine.runtime import Engine

_PATH = Path(__file__).resolve().parents[1] / "bench" / "peers.py"
_SPEC = importlib.util.spec_from_file_location("bench_peers", _PATH)
peers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(peers)


@pytest.mark.parametrize("n", [4, 200])
def test_the_split_template_is_valid_with_the_join_between_the_split_and_the_form(n):
    report = analyze(peers.split_template(n))
    assert report.valid, report.errors
    assert report.analysis["entries"] == sorted(f"c{i}" for i in range(n))
    assert report.analysis["terminal"] == "form"
    assert report.analysis["longest_path"] == 3 and report.analysis["width"] == n


def test_the_split_runs_to_the_persons_task_only_and_completes_with_it():
    engine = Engine(peers.KEY)
    template = analyze(peers.split_template(20)).template
    inst = engine.start(template)
    assert engine.ready(inst) == ["form"]
    assert all(inst.circles[c].state == "success" for c in [*(f"c{i}" for i in range(20)),
                                                             "join"])
    engine.complete(inst, "form", engine.bookmark(inst, "form"), {"v": 1})
    assert inst.status == "completed"


def test_the_bench_runs_a_split_to_its_end():
    peers.bpflow_run(Engine(peers.KEY), analyze(peers.split_template(50)).template)
