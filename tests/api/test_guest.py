"""POST /api/guest/messages: a message over the limits is refused with 422 naming the
field and the limit, never stored shortened; the OpenAPI description gives the limits."""

from __future__ import annotations

import pytest

from bpflow.mailbox import GUEST_LIMITS


@pytest.mark.parametrize("size", [5001, 10_001, 60_000])
def test_a_message_over_5000_characters_is_refused_not_cut(api, size):
    with api.client() as c:
        r = c.post("/api/guest/messages", json={"name": "Eve", "subject": "long",
                                                "body": "é" * size})
        assert r.status_code == 422
        assert r.json()["detail"] == {
            "errors": {"body": "body must be at most 5000 characters"}}
        assert c.post("/api/guest/messages", json={"name": "Eve", "subject": "fits",
                                                   "body": "é" * 5000}).status_code == 201
    with api.client("admin") as c:
        mail = c.get("/api/mailbox", params={"kind": "guest"}).json()
    assert [(m["subject"], len(m["body"])) for m in mail] == [("fits", 5000)]


def test_the_openapi_description_gives_the_limits_the_server_holds(api):
    with api.client() as c:
        schema = c.get("/api/openapi.json").json()["components"]["schemas"]["GuestIn"]
    assert {k: v["maxLength"] for k, v in schema["properties"].items()} == GUEST_LIMITS
