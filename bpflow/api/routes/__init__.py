"""The API's routes, one module (and `APIRouter`) per resource; `ROUTERS` in the order
the app includes them (and the OpenAPI description lists them)."""

from __future__ import annotations

from bpflow.api.routes import (
    audit,
    auth,
    crowds,
    drafts,
    events,
    files,
    guest,
    health,
    instances,
    mailbox,
    migrations,
    nudges,
    operations,
    returns,
    sandbox,
    signals,
    substitutes,
    tasks,
    templates,
    users,
)

ROUTERS = (health.router, auth.router, users.router, templates.router, migrations.router,
           crowds.router, instances.router, nudges.router, tasks.router, returns.router,
           mailbox.router, guest.router, signals.router, events.router, substitutes.router,
           files.router, drafts.router, sandbox.router, audit.router,
           operations.router)
