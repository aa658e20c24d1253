"""The web app's entry to the message catalogs (SPEC §17): the one set of catalogs under
`locale/` that holds the pages' texts and the services' messages, read and compiled by
`bpflow.catalogs` (docs/languages.md). The pages' texts (`bpflow_app/i18n.py`) are made
from the same catalogs.

`N_` marks a message written where no language is known yet (a constant): it is
translated where it is shown.
"""

from __future__ import annotations

from bpflow.catalogs import (
    CATALOGS,
    DOMAIN,
    LOCALE_DIR,
    N_,
    PLACEHOLDER,
    Language,
    Text,
    explain,
    fill,
    folder,
    po_path,
    say,
    translate,
)

__all__ = ["CATALOGS", "DOMAIN", "LOCALE_DIR", "PLACEHOLDER", "Language", "N_", "Text",
           "explain", "fill", "folder", "po_path", "say", "translate"]
