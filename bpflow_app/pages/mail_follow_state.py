"""The inbox's mail follows new copies and urges without a reload (SPEC §15): while the
inbox is shown, a background event (`follow`) waits for the store's changes to the
user's mail (`bpflow.store.changes.mail_key`: published when a copy or an urge is
written, in any process) and then re-reads the tabs' unread counts and the mail tab shown
(`MailState`). Nothing reads the database on a timer."""

from __future__ import annotations

import asyncio

import reflex as rx

from bpflow.backend import store_for
from bpflow.errors import Unauthorized
from bpflow.store.public import mail_key
from bpflow_app import routes
from bpflow_app.pages.mail_state import MailState
from bpflow_app.pages.tasks_state import ALIVE_S, FOLLOW_S
from bpflow_app.session import SessionState


class MailFollowState(SessionState):
    _following: bool = False

    def _inbox_shown(self) -> bool:
        return self.router.url.path.rstrip("/").endswith(routes.INBOX)

    @rx.event(background=True)
    async def follow(self):
        """Follow the user's mail while the inbox is shown (one follow per browser tab);
        stop when another page is shown (checked every ALIVE_S seconds without a query)
        or after FOLLOW_S."""
        async with self:
            if self._following:
                return
            self._following = True
            caller = self._visitor()
        loop = asyncio.get_running_loop()
        try:
            if caller is None:
                return
            hub = store_for(caller).changes
            with hub.subscribe([mail_key(caller.tenant, caller.username)]) as changes:
                await hub.heard()
                end = loop.time() + FOLLOW_S
                while loop.time() < end:
                    news = await changes.next(ALIVE_S)
                    async with self:
                        if not self._inbox_shown():
                            break
                        if news:
                            caller = self._visitor()
                            if caller is None:
                                break
                            mail = await self.get_state(MailState)
                            mail._fetch(caller)
        except Unauthorized:
            pass
        finally:
            async with self:
                self._following = False
