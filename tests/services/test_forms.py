"""The form layer: typed values and a clear message per field."""

from __future__ import annotations

import pytest

from bpflow.forms import FormError, convert, validate
from engine.model import Field

FIELDS = (
    Field("amount", "number", "Amount", True), Field("count", "integer", "Count"),
    Field("ok", "boolean", "OK"), Field("day", "date", "Day"), Field("mail", "email", "Mail"),
    Field("size", "select", "Size", options=("s", "m", 3)), Field("note", "text", "Note"),
    Field("name", "string", "Name"), Field("secret", "password", "Secret"),
)


def test_values_are_typed():
    values, secrets = validate(FIELDS, {
        "amount": "12.5", "count": "3", "ok": "on", "day": "2026-02-01", "mail": " a@b.co ",
        "size": "3", "note": "long\ntext", "name": "Ann", "secret": "pw"})
    assert values == {"amount": 12.5, "count": 3, "ok": True, "day": "2026-02-01",
                      "mail": "a@b.co", "size": 3, "note": "long\ntext", "name": "Ann"}
    assert secrets == {"secret": "pw"}  # passwords are kept apart from the values


def test_numbers_from_json_stay_numbers_and_missing_checkbox_is_false():
    values, _ = validate(FIELDS, {"amount": 7})
    assert values["amount"] == 7 and isinstance(values["amount"], int)
    assert values["ok"] is False and values["name"] is None


def test_every_bad_field_gets_its_own_message():
    with pytest.raises(FormError) as exc:
        validate(FIELDS, {"amount": "", "count": "2.5", "ok": "maybe", "day": "31/01/2026",
                          "mail": "nope", "size": "xl", "name": "x" * 1001})
    assert exc.value.errors == {
        "amount": "Amount is required", "count": "Count must be a whole number",
        "ok": "OK must be yes or no", "day": "Day must be a date like 2026-01-31",
        "mail": "Mail must be an email address like name@example.com",
        "size": "Size must be one of: s, m, 3", "name": "Name must be at most 1000 characters"}


def test_defaults_fill_missing_fields_but_not_cleared_ones():
    fields = (Field("who", "string", "Who", True, default="x"),)
    assert validate(fields, {}, {"who": "ann"})[0] == {"who": "ann"}
    with pytest.raises(FormError):
        validate(fields, {"who": ""}, {"who": "ann"})


def test_form_data_must_be_an_object():
    with pytest.raises(FormError) as exc:
        validate(FIELDS, ["not", "a", "dict"])
    assert "_form" in exc.value.errors


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "1e300", "9" * 30])
def test_numbers_outside_64_bits_are_refused_by_the_form_layer(value):
    """No database column or JSON answer holds them (SPEC §13): a field error, not a 500."""
    for kind in ("integer", "number"):
        field = Field("n", kind, "N", True)
        if kind == "number" and value == "1e300":
            assert convert(field, value) == 1e300  # a finite float is a number
            continue
        with pytest.raises(ValueError, match="must be between"):
            convert(field, value)


def test_the_64_bit_edges_are_taken():
    field = Field("n", "integer", "N", True)
    assert convert(field, 2**63 - 1) == 2**63 - 1
    assert convert(field, str(-(2**63))) == -(2**63)


def test_a_select_of_labelled_options_stores_their_values():
    """Options given as `{"value", "label"}` (labels in several languages, SPEC §17): the
    form takes and stores the value, whatever the reader saw."""
    from engine.analysis import load_template
    t = load_template({"name": "t", "circles": [{"uri": "a", "box": {"form": [
        {"name": "plan", "type": "select", "required": True, "options": [
            {"value": "basic", "label": {"en": "Basic", "zh-CN": "基础版"}},
            {"value": 2, "label": "Two"}]}]}}]})
    form = t.flow.circles[0].box.form
    assert validate(form, {"plan": "basic"})[0] == {"plan": "basic"}
    assert validate(form, {"plan": "2"})[0] == {"plan": 2}
    with pytest.raises(FormError) as err:
        validate(form, {"plan": "基础版"})
    assert "must be one of: basic, 2" in str(err.value.errors)


def test_a_file_field_holds_what_its_check_accepts():
    field = Field("receipt", "file", "Receipt", True, accept=(".pdf",))
    record = {"id": "a" * 32, "name": "r.pdf", "size": 3, "sha256": "0" * 64,
              "type": "application/pdf"}

    def files(f, value):
        if value not in (record, record["id"]):
            raise ValueError("must be a file you uploaded for this flow")
        return record

    assert validate((field,), {"receipt": record["id"]}, files=files)[0] == {
        "receipt": record}
    with pytest.raises(FormError) as bad:
        validate((field,), {"receipt": {"id": "b" * 32}}, files=files)
    assert "you uploaded" in bad.value.errors["receipt"]
    with pytest.raises(FormError) as none:  # a form with no check of files takes none
        validate((field,), {"receipt": record})
    assert "POST /api/files" in none.value.errors["receipt"]
    with pytest.raises(FormError):
        validate((field,), {}, files=files)
