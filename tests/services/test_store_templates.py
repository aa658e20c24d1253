"""Templates in the store beyond the store's own tests: importing a directory checks every
file first; a nested flow with a compute box runs through store steps."""

from __future__ import annotations

import json

import pytest

from tests.services.helpers import mark


def test_compute_and_three_level_nesting_through_the_store(store):
    inner = [{"uri": "leaf", "box": {"form": [{"name": "v", "type": "integer"}]}}]
    for depth in (3, 2, 1):
        inner = [{"uri": f"n{depth}", "box": {"action": {"type": "flow", "circles": inner}}}]
    inner.append({"uri": "double", "deps": [["n1"]], "box": {"action": {
        "type": "compute", "outputs": {"v": "${n1.n2.n3.leaf.v} * 2"}}}})
    store.put_template({"name": "deep", "circles": inner})
    iid = store.start("deep").id
    store.complete(iid, "n1.n2.n3.leaf", mark(store, iid, "n1.n2.n3.leaf"), {"v": 21})
    final = store.get(iid)
    assert final.status == "completed" and final.circles["double"].result == {"v": 42}



def test_import_checks_every_file_before_storing_any(store, tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"name": "aaa", "circles": [{"uri": "x"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"name": "bbb", "circles": [
        {"uri": "x", "deps": [["nope"]]}]}))
    with pytest.raises(Exception, match="b.json"):
        store.import_dir(tmp_path)
    assert store.template_versions() == {}
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="b.json: not a template"):
        store.import_dir(tmp_path)
