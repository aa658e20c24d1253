"""Reflex configuration for the bpflow web app.

The database defaults to a SQLite file beside this one; set ``DATABASE_URL`` (for example a
PostgreSQL URL) to use another.
"""

import os
import re
from pathlib import Path

import reflex as rx


def _respawn_failed_workers() -> None:
    """Granian, as Reflex starts it in production (``reflex.utils.exec.
    run_granian_backend_prod``, no respawn option), stops the whole server when one of its
    workers dies: have it start a new worker instead while the others keep serving (SPEC
    §14). Reflex imports ``granian.server.Server`` when it starts the server, so it gets
    this subclass."""
    import granian.server

    base = granian.server.Server
    if getattr(base, "respawns_failed_workers", False):
        return

    class Server(base):
        respawns_failed_workers = True

        def __init__(self, *args, **kwargs) -> None:
            kwargs.setdefault("respawn_failed_workers", True)
            super().__init__(*args, **kwargs)

    granian.server.Server = Server


_respawn_failed_workers()


class RadixThemes(rx.plugins.RadixThemesPlugin):
    """Radix Themes, bundled as any other library: each page's scripts hold the
    components it uses. Reflex's plugin also makes the whole of Radix Themes a global of
    every page (`window.__reflex`, for components a state builds at run time, which
    bpflow has none of): tens of KiB of compressed script that no page could leave out
    (bench/RESULTS.md, "Phones").
    The package is still installed (every Radix component names it).

    Its stylesheet without the colour scales no page names: Radix Themes' `styles.css`
    holds all 31 (about a fifth of its 800 kB, parsed and matched on every first load);
    the app names a few (`color_scheme="red"`, `rx.color("gray", 5)`, `var(--green-a3)`),
    found in its sources at each build, so that a colour a page adds is never left out.
    The same files in the same order as `styles.css` (Radix Themes' documented way to
    leave colours out)."""

    THEMES = "@radix-ui/themes"
    COLORS = ("amber blue bronze brown crimson cyan gold grass gray green indigo iris jade "
              "lime mauve mint olive orange pink plum purple red ruby sage sand sky slate "
              "teal tomato violet yellow").split()
    # the gray scales: Radix's own, and slate, which it pairs with the theme's accent,
    # indigo (the theme's `gray_color="auto"`)
    GRAYS = ("gray", "slate")

    def get_frontend_dependencies(self, **context) -> tuple[str, ...]:
        return ()

    def get_stylesheet_paths(self, **context) -> tuple[str, ...]:
        if not self.enabled:
            return ()
        return (f"{self.THEMES}/tokens/base.css",
                *(f"{self.THEMES}/tokens/colors/{c}.css" for c in self.colors_used()),
                f"{self.THEMES}/components.css", f"{self.THEMES}/utilities.css")

    @classmethod
    def colors_used(cls) -> list[str]:
        """The colours the app's modules and stylesheets name (as a string or a CSS
        variable), with the grays."""
        names = "|".join(cls.COLORS)
        named = re.compile(rf"""["'](?P<a>{names})["']|--(?P<b>{names})-a?\d""")
        here = Path(__file__).parent
        found = set(cls.GRAYS)
        for path in [*here.joinpath("bpflow_app").rglob("*.py"), Path(__file__),
                     *here.joinpath("assets").rglob("*.css")]:
            for m in named.finditer(path.read_text(encoding="utf-8")):
                found.add(m.group("a") or m.group("b"))
        return sorted(found)


class PagesInEachLanguage(rx.plugins.Plugin):
    """Every page prerendered in each language, the one asked for served (SPEC §17): the
    initial state's `lang` read from `<html lang>`, and each page drawn again in the other
    languages after the build (bpflow_app/prerender.py, which says why). Listed before the
    plugins that rewrite the built pages, so that these see the drawings too."""

    def pre_compile(self, **context) -> None:
        from bpflow_app.prerender import initial_language

        context["add_modify_task"]("utils/context.jsx", initial_language)

    def post_build(self, **context) -> None:
        from reflex.utils import prerequisites

        from bpflow_app.prerender import draw_in_languages, runtime_of_build

        draw_in_languages(Path(context["static_dir"]), prerequisites.get_web_dir(),
                          runtime_of_build())


class ScriptsAfterStyles(rx.plugins.Plugin):
    """Every page's head preloads its ~20 script modules (`<link rel=modulepreload>`) at
    high priority, so on a slow line they share it with the stylesheet, which is all the
    first paint waits for (the page's HTML is prerendered): they are asked for at low
    priority, still all at once (no waterfall of imports), after the stylesheet. Done on
    the built pages (before they are compressed)."""

    PRELOAD = '<link rel="modulepreload" '

    def post_build(self, **context) -> None:
        for page in Path(context["static_dir"]).rglob("*.html"):
            html = page.read_text(encoding="utf-8")
            low = html.replace(self.PRELOAD, self.PRELOAD + 'fetchpriority="low" ')
            if low != html:
                page.write_text(low, encoding="utf-8")


class IconsTogether(rx.plugins.Plugin):
    """The icons the pages name (lucide's, one module each) in one script of their own
    instead of one file each: a page drew its 6 to 20 icons from as many requests of
    under 1 KiB, each a round trip on a phone's line (bench/RESULTS.md, "Phones"). The
    names are read from the compiled pages when the build starts, so the group holds
    the icons some page imports and no other (lucide's other 1,600 stay apart)."""

    GROUP = """
            {
              name: "icons",
              test: (id) => PAGE_ICONS.has(
                id.replace(/\\\\/g, "/").split("lucide-react/dist/esm/icons/")[1]),
            },"""
    PRELUDE = """import fs from "fs";
// the lucide icons the compiled pages import (rxconfig.py, IconsTogether)
const PAGE_ICONS = new Set(["app", "app_components"].filter((dir) => fs.existsSync(dir))
  .flatMap((dir) => fs.readdirSync(dir, { recursive: true })
    .filter((f) => /\\.(jsx?|tsx?)$/.test(f))
    .flatMap((f) => [...fs.readFileSync(dir + "/" + f, "utf8")
      .matchAll(/lucide-react\\/dist\\/esm\\/icons\\/([a-z0-9-]+\\.mjs)/g)].map((m) => m[1]))));
"""

    def pre_compile(self, **context) -> None:
        context["add_modify_task"]("vite.config.js", self.grouped)

    @classmethod
    def grouped(cls, config: str) -> str:
        anchor = "groups: ["
        if anchor not in config or "PAGE_ICONS" in config:
            return config
        return cls.PRELUDE + config.replace(anchor, anchor + cls.GROUP, 1)


config = rx.Config(
    app_name="bpflow_app",
    telemetry_enabled=False,
    db_url=os.environ.get("DATABASE_URL", "sqlite:///bpflow.db"),
    plugins=[
        RadixThemes(
            theme=rx.theme(appearance="light", accent_color="indigo", radius="large"),
        ),
        PagesInEachLanguage(),
        ScriptsAfterStyles(),
        IconsTogether(),
    ],
    # The sticky badge would cover the bottom-right corner of every page.
    show_built_with_reflex=False,
    # bpflow is an application behind a sign-in, not a site to index.
    disable_plugins=[rx.plugins.SitemapPlugin],
    # The build's scripts and styles compressed beforehand, brotli for the browsers that
    # take it (smaller than gzip by a fifth), gzip for the others.
    frontend_compression_formats=["brotli", "gzip"],
)
