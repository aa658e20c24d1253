"""Property-based API testing from the OpenAPI document: no 5xx, and every response
matches its documented schema, status code, content type and headers.

Two runs: every operation on its own (`test_api_conforms_to_its_openapi`), and flows of
operations chained by OpenAPI links (`TestFlows`, schemathesis's state machine): start a
reimbursement, complete its circles one after the other with the bookmarks each answer
gives, fail, suspend, resume, reset and abort it, read it and its history. The links
name circles of that one template, so they are added to a copy of the document for this
test, not to the API's own description. Bounded: well under 90 s together.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from bpflow.api import create_app
from bpflow.auth import issue_token
from bpflow.store import Store
from bpflow.store.migrate import upgrade

ROOT = Path(__file__).resolve().parents[2]
_folder = tempfile.mkdtemp(prefix="bpflow-schemathesis-")
_url = f"sqlite:///{_folder}/api.db"
upgrade(_url)
STORE = Store(_url, secret=b"schemathesis-secret-of-enough-length")
STORE.add_user("admin", "pw-admin", ["admin"])
STORE.add_user("ann", "pw-ann", ["approver"])  # the claims' manager (a user field)
STORE.import_dir(ROOT / "upload" / "workflow")
STORE.start("reimbursement", {}, STORE.user("admin"))
TOKEN = issue_token(STORE.user("admin"), STORE.secret)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
APP = create_app(lambda: STORE)

# What the issue asks: no 5xx, and responses as documented (status, type, body, headers).
# Not checked: that every schema-valid body is accepted (a template must also pass the
# analysis) and that unknown query parameters are refused (they are ignored).
CHECKS = [checks.not_a_server_error, checks.status_code_conformance,
          checks.content_type_conformance, checks.response_schema_conformance,
          checks.response_headers_conformance]
schema = schemathesis.openapi.from_asgi("/api/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_api_conforms_to_its_openapi(case):
    case.call_and_validate(headers=AUTH, checks=CHECKS)


def test_openapi_describes_every_endpoint_and_error():
    doc = json.loads(json.dumps(schema.raw_schema))
    paths = doc["paths"]
    assert {"/api/auth/token", "/api/templates", "/api/templates/{name}",
            "/api/templates/{name}/stats", "/api/instances", "/api/instances/{instance_id}",
            "/api/instances/{instance_id}/history",
            "/api/instances/{instance_id}/circles/{uri}/complete",
            "/api/instances/{instance_id}/circles/{uri}/fail",
            "/api/instances/{instance_id}/reset", "/api/instances/{instance_id}/abort",
            "/api/instances/{instance_id}/suspend", "/api/instances/{instance_id}/resume",
            "/api/mailbox", "/api/mailbox/{mail_id}/decision", "/api/guest/messages",
            "/api/health", "/api/auth/password", "/api/users/{username}/password"
            } <= set(paths)
    complete = paths["/api/instances/{instance_id}/circles/{uri}/complete"]["post"]
    assert {"200", "401", "404", "409", "413", "422"} <= set(complete["responses"])
    assert "bearer" in json.dumps(doc["components"]["securitySchemes"]).lower()
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert "413" in operation["responses"], (method, path)


# ------------------------------------------------------------------- flows
INSTANCE = "/api/instances/{instance_id}"
COMPLETE = INSTANCE + "/circles/{uri}/complete"
FAIL = INSTANCE + "/circles/{uri}/fail"
RESULTS = {"claim": {"amount": 80, "reason": "taxi", "manager": "ann"},  # what each takes
           "approve": {"approved": True}, "review": True, "pay": {"reference": "p-1"}}


def _linked(doc: dict) -> dict:
    """`doc` with links between the answers with an instance (start, complete, fail,
    reset, suspend, resume) and what can follow them: completing or failing a circle of
    the reimbursement flow with the bookmark the answer holds, reading the instance and
    its history, reset, suspend, resume and abort."""
    doc = copy.deepcopy(doc)
    paths = doc["paths"]

    def link(path: str, method: str, **more) -> dict:
        return {"operationId": paths[path][method]["operationId"],
                "parameters": {"instance_id": "$response.body#/id"}, **more}

    def drive(uri: str) -> dict:
        mark = f"$response.body#/circles/{uri}/bookmark"
        return {f"Complete {uri}": link(COMPLETE, "post", parameters={
                    "instance_id": "$response.body#/id", "uri": uri},
                    requestBody={"bookmark": mark, "result": RESULTS[uri]}),
                f"Fail {uri}": link(FAIL, "post", parameters={
                    "instance_id": "$response.body#/id", "uri": uri},
                    requestBody={"bookmark": mark, "reason": "no"})}

    read = {"Read": link(INSTANCE, "get"), "History": link(INSTANCE + "/history", "get")}
    state = {a.title(): link(f"{INSTANCE}/{a}", "post") for a in ("suspend", "abort")}
    onward = {f"Complete {uri}": drive(uri)[f"Complete {uri}"] for uri in RESULTS}
    follows = {  # (path, method, status): the links from its answer
        ("/api/instances", "post", "201"): {**drive("claim"), **read, **state},
        (COMPLETE, "post", "200"): {**onward, "History": read["History"],
                                    "Fail approve": drive("approve")["Fail approve"]},
        (FAIL, "post", "200"): {**read, "Reset": link(f"{INSTANCE}/reset", "post",
                                                      requestBody={"uri": "claim",
                                                                   "scope": "all"})},
        (f"{INSTANCE}/reset", "post", "200"): {**drive("claim"), **read},
        (f"{INSTANCE}/suspend", "post", "200"): {
            "Resume": link(f"{INSTANCE}/resume", "post"), **drive("claim")},
        (f"{INSTANCE}/resume", "post", "200"): {**drive("claim"), **state}}
    for (path, method, status), links in follows.items():
        paths[path][method]["responses"][status]["links"] = copy.deepcopy(links)
    start = paths["/api/instances"]["post"]
    # a repeated Idempotency-Key answers an instance of an earlier example: state that
    # outlives an example makes the machine's steps differ between its runs
    start["parameters"] = [p for p in start.get("parameters", [])
                           if p.get("name") != "Idempotency-Key"]
    start["requestBody"]["content"]["application/json"]["schema"] = {  # always this flow
        "type": "object", "required": ["template"], "additionalProperties": False,
        "properties": {"template": {"const": "reimbursement"}}}
    return doc


flows = schemathesis.openapi.from_dict(_linked(APP.openapi())).include(
    path_regex=r"^/api/instances").exclude(  # every other operation is fuzzed on its own
    path_regex=r"/(claim|unclaim|assign|withdraw)$")  # (the people's: tests/api/test_tasks)
flows.app = APP
_Machine = flows.as_state_machine()


class Flows(_Machine):  # type: ignore[misc, valid-type]
    def before_call(self, case):  # the admin's token, always: flows go on past a step
        case.headers = {**(case.headers or {}), **AUTH}

    def validate_response(self, response, case, additional_checks=None, **kwargs):
        case.validate_response(response, checks=FLOW_CHECKS, transport_kwargs=kwargs or None,
                               recorder=self.recorder)


# Not `ensure_resource_availability`: a 404 right after a start may be about a circle
# ("instance has no circle 'x'"), not the instance; nothing is ever deleted either.
FLOW_CHECKS = CHECKS
TestFlows = Flows.TestCase
TestFlows.settings = settings(max_examples=100, stateful_step_count=10, deadline=None,
                              suppress_health_check=list(HealthCheck))
