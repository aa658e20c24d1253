"""Typed form inputs for a box's fields (`boxview.FieldView`), each with its label and
its own error line. Inputs are uncontrolled: the browser keeps what was typed, the form's
`on_submit` sends it all at once. With `on_check(name, value)`, a field is checked again
when it is left or changed, so that its error goes as soon as it is fixed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reflex as rx

from bpflow_app.boxview import FieldView
from bpflow_app.components.files import file_control
from bpflow_app.i18n import _

Check = Callable[[rx.Var, rx.Var], Any] | None


def _on(check: Check, f: rx.Var[FieldView], trigger: str) -> dict[str, Any]:
    return {} if check is None else {trigger: lambda value: check(f.name, value)}


def _select(f: rx.Var[FieldView], check: Check = None) -> rx.Component:
    return rx.select.root(
        rx.select.trigger(placeholder=_("Choose…"), id=f.input_id, width="100%"),
        rx.select.content(rx.foreach(
            f.options, lambda o, i: rx.select.item(f.option_labels[i], value=o))),
        name=f.name,
        default_value=f.default,
        **_on(check, f, "on_change"),
    )


def control(f: rx.Var[FieldView], check: Check = None) -> rx.Component:
    """The input that fits the field's type."""
    described = {"aria-describedby": f.input_id + "-error", "aria-required": f.required}
    blur = _on(check, f, "on_blur")
    return rx.match(
        f.type,
        ("text", rx.text_area(name=f.name, id=f.input_id, default_value=f.default, rows="3",
                              width="100%", custom_attrs=described, **blur)),
        ("boolean", rx.checkbox(name=f.name, id=f.input_id, default_checked=f.checked,
                                custom_attrs=described, **_on(check, f, "on_change"))),
        ("select", _select(f, check)),
        ("file", file_control(f)),
        ("user", rx.cond(f.options.length() > 0, _select(f, check),
                         rx.input(name=f.name, id=f.input_id, default_value=f.default,
                                  width="100%", auto_complete="off",
                                  placeholder=_("a username"), custom_attrs=described,
                                  **blur))),
        rx.input(name=f.name, id=f.input_id, type=f.html_type, default_value=f.default,
                 width="100%", auto_complete=rx.cond(f.type == "password", "current-password",
                                                    "off"),
                 custom_attrs={**described, "step": f.step}, **blur),
    )


def field_row(f: rx.Var[FieldView], check: Check = None) -> rx.Component:
    return rx.vstack(
        rx.el.label(
            rx.text(f.label, rx.cond(f.required, rx.text.span(" *", color_scheme="red")),
                    size="2", weight="medium",
                    # a field the template gave no label is named by its name (data)
                    custom_attrs={"translate": rx.cond(f.label == f.name, "no", "yes")}),
            html_for=f.input_id,
        ),
        control(f, check),
        rx.cond(
            f.error != "",
            rx.text(f.error, id=f.input_id + "-error", color_scheme="red", size="1",
                    role="alert", class_name="field-error"),
            # fixed since the form was sent: the line keeps its height (`FieldView.fixed`)
            rx.cond(f.fixed, rx.text("\u00a0", size="1", aria_hidden="true",
                                     class_name="field-error-fixed")),
        ),
        spacing="1",
        width="100%",
        align="stretch",
    )


def fields(items: rx.Var[list[FieldView]], check: Check = None) -> rx.Component:
    return rx.vstack(rx.foreach(items, lambda f: field_row(f, check)), spacing="3",
                     width="100%")
