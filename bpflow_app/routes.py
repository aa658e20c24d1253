"""Route constants and builders: the only place that spells a path."""

from __future__ import annotations

from typing import Any

HOME = "/"
FLOWS = "/flows"
FLOW = "/flow/[id]"
INBOX = "/inbox"
GUEST = "/guest"
GUEST_TENANT = "/guest/[tenant]"  # a tenant's guest page (SPEC §12)
TEMPLATES = "/templates"
USERS = "/users"
DESIGN = "/design"  # a new template in the designer (SPEC §16)
DESIGN_TEMPLATE = "/design/[name]"  # a template's latest version in the designer
ACCOUNT = "/account"  # one's own account
SUBSTITUTE = "/substitute"  # one's substitute (an admin's for someone: ?user=NAME)
WEBHOOKS = "/webhooks"
AUDIT = "/audit"  # the audit log (admins, SPEC §18)
OPERATIONS = "/operations"  # what is stuck, fixed in bulk (SPEC §18)
REGISTER = "/register"
NOT_FOUND = "404"  # Reflex's route of every path the app does not have


def guest(tenant: str) -> str:
    """The guest page of a tenant's administrators."""
    return f"/guest/{tenant}"


def flow(instance_id: Any) -> Any:
    """The flow page of an instance (a str, or a Var in a component)."""
    return f"/flow/{instance_id}"


def design(name: Any) -> Any:
    """The designer on a template (a str, or a Var in a component)."""
    return f"/design/{name}"


def substitute_of(username: Any) -> Any:
    """The substitute page of a user (an admin's view; a str, or a Var in a component)."""
    return f"/substitute?user={username}"
