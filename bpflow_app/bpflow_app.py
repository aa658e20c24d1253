"""bpflow web app: wiring only. Each page lives in `pages/` with its own state; every
signed-in page is wrapped in the outer circle (`components/frame.py`)."""

import reflex as rx

from bpflow.api import create_app
from bpflow.backend import lifespan
from bpflow_app import routes
from bpflow_app.asset_cache import cache_fingerprinted_assets, pages_without_redirect
from bpflow_app.components.connection import connection_overlay
from bpflow_app.components.frame import outer_circle
from bpflow_app.components.when import formats
from bpflow_app.frame_state import page_loads
from bpflow_app.i18n import _
from bpflow_app.pages.account import account_page
from bpflow_app.pages.account_state import AccountState
from bpflow_app.pages.audit import audit_page
from bpflow_app.pages.audit_state import AuditState
from bpflow_app.pages.design import design_page
from bpflow_app.pages.design_state import DesignState
from bpflow_app.pages.flow import flow_page
from bpflow_app.pages.flow_state import FlowState
from bpflow_app.pages.flows import flows_page
from bpflow_app.pages.flows_state import FlowsState
from bpflow_app.pages.guest import guest_page
from bpflow_app.pages.guest_state import GuestState
from bpflow_app.pages.home import TAGLINE, index
from bpflow_app.pages.inbox import inbox_page
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.not_found import not_found_page
from bpflow_app.pages.operations import operations_page
from bpflow_app.pages.operations_state import OperationsState
from bpflow_app.pages.register import register_page
from bpflow_app.pages.return_state import ReturnState
from bpflow_app.pages.signers_state import SignersState
from bpflow_app.pages.substitute import substitute_page
from bpflow_app.pages.substitute_state import SubstituteState
from bpflow_app.pages.tasks_state import TasksState
from bpflow_app.pages.templates import templates_page
from bpflow_app.pages.templates_state import TemplatesState
from bpflow_app.pages.users import users_page
from bpflow_app.pages.users_state import UsersState
from bpflow_app.pages.webhooks import webhooks_page
from bpflow_app.pages.webhooks_state import WebhooksState

# The Radix theme is configured in rxconfig.py (RadixThemesPlugin).
app = rx.App(api_transformer=create_app(), stylesheets=["/styles.css"],  # REST API: /api
             head_components=[formats()],  # how times and numbers are shown
             # `dir` given: else sonner asks the browser for the page's direction at each
             # of its redraws, which makes it compute every style of the page at once (both
             # languages read left to right)
             toaster=rx.toast.provider(dir="ltr",
                                       custom_attrs={"containerAriaLabel": _("Notifications")}))
# The overlay says in the reader's language when the server cannot be reached.
app.app_wraps[(5, "Overlay")] = lambda stateful: connection_overlay() if stateful else None
# Fingerprinted frontend files are cached for good (wrapped around the REST API above);
# a page is answered at its own address (`/flows`, not a redirect to `/flows/`).
app.api_transformer = [app.api_transformer, cache_fingerprinted_assets,
                       pages_without_redirect]
app.register_lifespan_task(lifespan)
# Signed-in pages load on the server right after hydrating (on_load: no round trip
# through the browser), the frame's load last; see frame_state.page_loads.
# The pages with the approval card's dialogs draw them closed, after the page's data.
APPROVAL_DIALOGS = (SignersState.close, ReturnState.cancel_return)
app.add_page(outer_circle(flow_page), route=routes.FLOW, title=_("Flow · bpflow"),
             on_load=page_loads(routes.FLOW, FlowState.load, then=APPROVAL_DIALOGS))
app.add_page(index, route=routes.HOME, title="bpflow", description=TAGLINE)
app.add_page(outer_circle(flows_page), route=routes.FLOWS, title=_("My flows · bpflow"),
             on_load=page_loads(routes.FLOWS, FlowsState.load))
app.add_page(outer_circle(inbox_page), route=routes.INBOX, title=_("Inbox · bpflow"),
             on_load=page_loads(routes.INBOX, MailState.load, TasksState.load,
                                then=APPROVAL_DIALOGS))
app.add_page(outer_circle(templates_page), route=routes.TEMPLATES, title=_("Templates · bpflow"),
             on_load=page_loads(routes.TEMPLATES, TemplatesState.load))
app.add_page(outer_circle(design_page), route=routes.DESIGN, title=_("Design · bpflow"),
             on_load=page_loads(routes.DESIGN, DesignState.load))
app.add_page(outer_circle(design_page), route=routes.DESIGN_TEMPLATE,
             title=_("Design · bpflow"),
             on_load=page_loads(routes.DESIGN_TEMPLATE, DesignState.load))
app.add_page(outer_circle(users_page), route=routes.USERS, title=_("Users · bpflow"),
             on_load=page_loads(routes.USERS, UsersState.load))
app.add_page(outer_circle(account_page), route=routes.ACCOUNT, title=_("My account · bpflow"),
             on_load=page_loads(routes.ACCOUNT, AccountState.load))
app.add_page(outer_circle(substitute_page), route=routes.SUBSTITUTE,
             title=_("My substitute · bpflow"),
             on_load=page_loads(routes.SUBSTITUTE, SubstituteState.load))
app.add_page(outer_circle(webhooks_page), route=routes.WEBHOOKS, title=_("Webhooks · bpflow"),
             on_load=page_loads(routes.WEBHOOKS, WebhooksState.load))
app.add_page(outer_circle(audit_page), route=routes.AUDIT, title=_("Audit log · bpflow"),
             on_load=page_loads(routes.AUDIT, AuditState.load))
app.add_page(outer_circle(operations_page), route=routes.OPERATIONS,
             title=_("Operations · bpflow"),
             on_load=page_loads(routes.OPERATIONS, OperationsState.load))
app.add_page(guest_page, route=routes.GUEST, title=_("Leave a message · bpflow"),
             on_load=GuestState.load)
app.add_page(guest_page, route=routes.GUEST_TENANT, title=_("Leave a message · bpflow"),
             on_load=GuestState.load)
app.add_page(register_page, route=routes.REGISTER, title=_("Create an account · bpflow"))
app.add_page(not_found_page, route=routes.NOT_FOUND, title=_("Page not found · bpflow"))
