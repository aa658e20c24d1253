"""Reflex configuration for the bpflow web app.

The database defaults to a SQLite file beside this one; set ``DATABASE_URL`` (for example a
PostgreSQL URL) to use another.
"""

import os

import reflex as rx

config = rx.Config(
    app_name="bpflow_app",
    telemetry_enabled=False,
    db_url=os.environ.get("DATABASE_URL", "sqlite:///bpflow.db"),
    plugins=[
        rx.plugins.RadixThemesPlugin(
            theme=rx.theme(appearance="light", accent_color="indigo", radius="large"),
        ),
    ],
    # The sticky badge would cover the bottom-right corner of every page.
    show_built_with_reflex=False,
    # bpflow is an application behind a sign-in, not a site to index.
    disable_plugins=[rx.plugins.SitemapPlugin],
)
