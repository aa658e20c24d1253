"""`Store.list_instances` leaving one template's instances out (`excluding`): the pages
ask it for My flows without the outer flows signing in starts, so a page holds as many
rows as asked and the total counts the others only."""

from __future__ import annotations

T = {"name": "t", "circles": [{"uri": "a"}]}
OUTER = {"name": "outer", "circles": [{"uri": "a"}]}


def test_a_template_left_out_of_every_page_and_of_the_total(store):
    store.put_template(T)
    store.put_template(OUTER)
    store.add_user("ann", "ann-password", ["user"])
    ann = store.user("ann")
    started = []
    for i in range(7):
        if i in (0, 3, 4):
            store.start("outer", {}, ann)
        started.append(store.start("t", {}, ann).id)
    rows, total = store.list_instances(ann["id"], None, None, 3, 3, excluding="outer")
    assert total == 7 and [r["id"] for r in rows] == started[::-1][3:6]
    assert store.list_instances(ann["id"], None, None, 50, 0)[1] == 10  # nothing left out
    assert store.list_instances(ann["id"], "outer", None, 50, 0, excluding="t")[1] == 3


WORDS = {"circle_ready": "ready", "circle_succeeded": "succeeded"}


def test_a_search_finds_a_template_an_id_or_a_last_step_in_any_case(store):
    store.put_template({"name": "trip_plan", "circles": [
        {"uri": "ask", "box": {"confirm": "Go?"}}, {"uri": "go", "deps": [["ask"]]}]})
    store.put_template(T)
    store.add_user("ann", "ann-password", ["user"])
    ann = store.user("ann")
    trips = [store.start("trip_plan", {}, ann) for _ in range(3)]
    other = store.start("t", {}, ann).id
    store.complete(trips[0].id, "ask", store.engine.bookmark(trips[0], "ask"), {}, "ann")

    def ids(text, **kw):
        rows, total, cut = store.search_instances(ann["id"], text, WORDS, 50, **kw)
        assert total == len(rows) and not cut
        return {r["id"] for r in rows}

    assert ids("TRIP") == {t.id for t in trips}
    assert ids(other[:8].upper()) == {other}
    assert ids("ask ready") == {t.id for t in trips[1:]}  # the last step, in words
    assert ids("O SUCC") == {trips[0].id}  # across the circle ("go") and its word
    assert ids("r_p") == set() and ids("%") == set()  # typed, not patterns ("rip")
    assert ids("p_p") == {t.id for t in trips}
    assert ids("trip", excluding="trip_plan") == set()
    assert ids("ready", template="trip_plan") == {t.id for t in trips[1:]}
    rows, total, cut = store.search_instances(ann["id"], "", WORDS, 2, 1, most=3)
    assert (len(rows), total, cut) == (2, 3, True)  # the newest three looked at
    assert [r["id"] for r in rows] == [trips[2].id, trips[1].id]
