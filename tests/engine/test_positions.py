"""The designer's positions (`"ui": {"x", "y"}`, SPEC §16) and what a body changes
against another (`engine.changes`)."""

from __future__ import annotations

from engine.analysis import analyze
from engine.changes import changes, positions, with_positions, without_positions

NESTED = {"name": "n", "circles": [
    {"uri": "a", "ui": {"x": 0, "y": 0}},
    {"uri": "sub", "deps": [["a"]], "ui": {"x": 100, "y": 0}, "box": {"action": {
        "type": "flow", "circles": [{"uri": "in", "ui": {"x": 1.5, "y": -3}}]}}}]}


def test_positions_anywhere_are_accepted_and_change_nothing_the_engine_sees():
    placed, bare = analyze(NESTED), analyze(without_positions(NESTED))
    assert placed.valid and bare.valid, placed.errors
    assert placed.analysis == bare.analysis
    assert placed.template.flow.circles[0] == bare.template.flow.circles[0]
    assert placed.template.flow.circles[1].flow == bare.template.flow.circles[1].flow


def test_positions_are_read_and_placed_by_path_and_the_rest_is_shared():
    assert positions(NESTED) == {"a": {"x": 0, "y": 0}, "sub": {"x": 100, "y": 0},
                                 "sub.in": {"x": 1.5, "y": -3}}
    bare = without_positions(NESTED)
    assert positions(bare) == {} and "ui" not in bare["circles"][1]["box"]["action"][
        "circles"][0]
    assert without_positions(bare) is bare
    back = with_positions(bare, positions(NESTED))
    assert back == NESTED
    assert with_positions(NESTED, positions(NESTED)) is NESTED


def test_changes_name_circles_and_keys_and_know_a_move_from_a_change():
    moved = with_positions(NESTED, {"a": {"x": 9, "y": 9}})
    found = changes(NESTED, moved)
    assert (found.moved, found.positions_only, found.changes_meaning) == (["a"], True, False)
    grown = {**NESTED, "title": "T", "circles": [
        {"uri": "a", "when": "1 > 0"}, {"uri": "b", "deps": [["a"]]}]}
    found = changes(NESTED, grown)
    assert (found.added, found.removed, found.changed, found.template) == (
        ["b"], ["sub"], {"a": ["when"]}, ["title"])
    assert changes(None, NESTED).new and changes(NESTED, "not a body").template == [
        "circles", "name"]
