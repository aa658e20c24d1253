"""Files and comments on the flow page (SPEC §15): the `file` field's upload (to `POST
/api/files`, with its progress and the size limit shown), the flow's files (downloaded
through `GET /api/files/{id}`, as attachments), and the comment thread.

Uploads and downloads go to the REST API from the browser with the session's token (the
page and the API share one origin, as `make run` serves them): `UPLOADS` is the one
script, listening on the page for the changes of file pickers and the clicks on file
links, so a form's file field holds only the id the API answered (in a hidden input the
form sends) and the bytes never pass through the page's state.
"""

from __future__ import annotations

import reflex as rx

from bpflow_app.boxview import FieldView
from bpflow_app.components.when import when
from bpflow_app.flowview import CommentRow, FileRow
from bpflow_app.i18n import _

UPLOADS = """
(function () {
  if (window.bpflowFiles) return;
  window.bpflowFiles = true;
  function token() {
    var t = localStorage.getItem("bpflow_token") || "";
    try { return t.charAt(0) === '"' ? JSON.parse(t) : t; } catch (e) { return t; }
  }
  function say(box, text, state) {
    var note = box.querySelector("[data-upload-note]");
    note.textContent = text; note.setAttribute("data-state", state);
  }
  document.addEventListener("change", function (ev) {
    var input = ev.target;
    if (!input.matches || !input.matches("input[data-upload]")) return;
    var box = input.closest("[data-file-field]");
    var held = box.querySelector("input[type=hidden]");
    var bar = box.querySelector("progress");
    var file = input.files[0];
    held.value = "";
    if (!file) return;
    if (file.size > Number(input.dataset.maxBytes)) {
      say(box, input.dataset.tooLarge, "error"); input.value = ""; return;
    }
    var parts = input.dataset.upload.split("/");
    var form = new FormData();
    form.append("file", file);
    form.append("instance", parts[0]); form.append("uri", parts[1]);
    form.append("field", parts[2]);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/files");
    xhr.setRequestHeader("Authorization", "Bearer " + token());
    xhr.setRequestHeader("Accept-Language", document.documentElement.lang || "en");
    bar.hidden = false; bar.value = 0;
    say(box, input.dataset.sending, "sending");
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) bar.value = e.loaded / e.total;
    };
    xhr.onload = function () {
      var body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) {}
      if (xhr.status === 201) {
        held.value = body.id; bar.value = 1;
        say(box, input.dataset.done.replace("%s", body.name), "done");
      } else {
        bar.hidden = true; input.value = "";
        say(box, typeof body.detail === "string" ? body.detail : input.dataset.failed,
            "error");
      }
    };
    xhr.onerror = function () {
      bar.hidden = true; say(box, input.dataset.failed, "error");
    };
    xhr.send(form);
  });
  document.addEventListener("click", function (ev) {
    var link = ev.target.closest && ev.target.closest("a[data-file-id]");
    if (!link) return;
    ev.preventDefault();
    fetch("/api/files/" + link.dataset.fileId,
          {headers: {Authorization: "Bearer " + token()}})
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.blob(); })
      .then(function (blob) {
        var url = URL.createObjectURL(blob), a = document.createElement("a");
        a.href = url; a.download = link.dataset.name;
        document.body.appendChild(a); a.click(); a.remove();
        link.setAttribute("data-downloaded", "1");
        setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
      })
      .catch(function () { link.setAttribute("data-failed", "1"); });
  });
})();
"""


def uploads() -> rx.Component:
    """The script of uploads and downloads (once on a page that has either)."""
    return rx.script(UPLOADS)


def file_control(f: rx.Var[FieldView]) -> rx.Component:
    """A `file` field: a file picker (its accepted types), the size limit, the upload's
    progress and outcome; the form sends the uploaded file's id."""
    return rx.vstack(
        rx.el.input(type="file", id=f.input_id, accept=f.accept,
                    custom_attrs={
                        "data-upload": f.upload, "data-max-bytes": f.max_bytes,
                        "data-too-large": _("The file is larger than %(limit)s",
                                            limit=f.limit),
                        "data-sending": _("Uploading…"),
                        "data-done": _("Uploaded: %(name)s", name="%s"),
                        "data-failed": _("The upload failed; please try again"),
                        "aria-describedby": f.input_id + "-limit",
                        "aria-required": f.required}),
        rx.el.input(type="hidden", name=f.name, default_value=""),
        rx.el.progress(max=1, value=0, hidden=True, width="100%",
                       aria_label=_("Upload progress")),
        rx.text(rx.cond(f.accept != "",
                        _("At most %(limit)s; %(types)s", limit=f.limit, types=f.accept),
                        _("At most %(limit)s", limit=f.limit)),
                id=f.input_id + "-limit", size="1", color_scheme="gray"),
        rx.text("", size="1", custom_attrs={"data-upload-note": "", "aria-live": "polite"},
                class_name="upload-note"),
        spacing="1", width="100%", custom_attrs={"data-file-field": f.name},
    )


def _file(f: rx.Var[FileRow]) -> rx.Component:
    return rx.table.row(
        rx.table.cell(rx.link(f.name, href="#", custom_attrs={
            "data-file-id": f.id, "data-name": f.name, "translate": "no"},
            aria_label=_("Download %(name)s", name=f.name))),
        rx.table.cell(f.size),
        rx.table.cell(f.owner, custom_attrs={"translate": "no"}),
        rx.table.cell(f.step),
        rx.table.cell(when(f.at)),
    )


def files_list(items: rx.Var[list[FileRow]]) -> rx.Component:
    """The files the flow's forms hold; each downloads as an attachment."""
    return rx.cond(items.length() > 0, rx.vstack(
        rx.heading(_("Files"), size="4", as_="h2"),
        rx.table.root(
            rx.table.header(rx.table.row(*[rx.table.column_header_cell(h) for h in (
                _("File"), _("Size"), _("Uploaded by"), _("Step"), _("When"))])),
            rx.table.body(rx.foreach(items, _file)), width="100%", size="1"),
        spacing="2", width="100%", id="flow-files",
    ))


def _comment(c: rx.Var[CommentRow]) -> rx.Component:
    return rx.box(
        rx.hstack(rx.text(c.author, weight="medium", size="2", translate="no"),
                  rx.cond(c.step != "", rx.badge(c.step, variant="soft", size="1")),
                  when(c.at), spacing="2", align="center"),
        # data: shown as text (React escapes it), never as HTML
        rx.text(c.text, size="2", white_space="pre-wrap", class_name="comment-text",
                custom_attrs={"translate": "no"}),
        class_name="comment", width="100%", padding_y="6px",
    )


def comment_thread(items: rx.Var[list[CommentRow]], send, selected: rx.Var[str],
                   step: rx.Var[str], busy: rx.Var[bool]) -> rx.Component:
    """The thread, oldest first, and a form to add to it (about the selected step, when
    one is selected and the box is ticked)."""
    return rx.vstack(
        rx.heading(_("Comments"), size="4", as_="h2"),
        rx.cond(items.length() > 0, rx.vstack(rx.foreach(items, _comment), spacing="1",
                                                width="100%"),
                rx.text(_("No comments yet."), size="2", color_scheme="gray")),
        rx.form(
            rx.vstack(
                rx.text_area(name="text", placeholder=_("Write a comment…"), rows="3",
                             width="100%", max_length=2000, required=True,
                             aria_label=_("Comment")),
                rx.cond(selected != "", rx.el.label(rx.hstack(
                    rx.checkbox(name="about_step"),
                    rx.text(_("About the step “%(step)s”", step=step), size="2"),
                    spacing="2", align="center"))),
                rx.button(_("Comment"), type="submit", loading=busy),
                spacing="2", width="100%", align="start",
            ),
            on_submit=send, reset_on_submit=True, aria_label=_("Add a comment"),
        ),
        spacing="2", width="100%", id="flow-comments",
    )
