"""Data inside a page's texts (SPEC §17, docs/languages.md "Texts that are not the
interface's").

A name, a value somebody typed, an address or JSON is shown in the letters it was
written in, whatever the page's language: `data(value)` holds it in an element marked
`translate="no"` (the HTML way, which translation tools and the pages' browser check
read).

A control whose name is a sentence of ours with data in it ("Claim Check the bank
details of 3f2a1b0c") cannot say it with `aria-label`: an attribute cannot mark part of
itself as data. `named(id, message, **values)` draws the sentence in a hidden element,
its values as `data`, and `by(id)` are the props that make it the control's accessible
name (`aria-labelledby`; a hidden element named so is read all the same). The name is
the same text as before; only its data is marked."""

from __future__ import annotations

from typing import Any

import reflex as rx

from bpflow_app.i18n import rich

NO = {"translate": "no"}


def data(*children: Any, **props: Any) -> rx.Component:
    """`children` shown as written: a span marked `translate="no"`."""
    return rx.el.span(*children, custom_attrs=NO, **props)


def named(id_: rx.Var | str, message: str, **values: Any) -> rx.Component:
    """The hidden sentence `message` (marked with N_), its `%(name)s` values as data,
    naming the control that has `by(id_)`."""
    parts = {k: (lambda v=v: data(v)) for k, v in values.items()}
    return rx.el.span(rich(message, **parts), id=id_, hidden=True)


def by(id_: rx.Var | str) -> dict[str, Any]:
    """The props of a control named by `named(id_, ...)`."""
    return {"aria-labelledby": id_}
