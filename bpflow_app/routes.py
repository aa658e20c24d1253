"""Route constants and builders: the only place that spells a path."""

from __future__ import annotations

from typing import Any

HOME = "/"
FLOWS = "/flows"
FLOW = "/flow/[id]"
INBOX = "/inbox"
GUEST = "/guest"
TEMPLATES = "/templates"
USERS = "/users"
REGISTER = "/register"


def flow(instance_id: Any) -> Any:
    """The flow page of an instance (a str, or a Var in a component)."""
    return f"/flow/{instance_id}"
