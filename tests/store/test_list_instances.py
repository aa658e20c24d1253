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
