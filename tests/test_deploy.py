"""The deployment recipes of deploy/ (SPEC §14a), checked without running them: the
Kubernetes manifests against the API's schemas (kubernetes-validate, offline), the Compose
file's and the systemd units' structure (`systemd-analyze verify` where it is installed),
the Caddyfile with Caddy where it is installed, and every command they and their notes
name against the real programs' parsers (bpflow's argparse, Reflex's click)."""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from bpflow import languages
from bpflow.cli import build_parser
from bpflow.security import SecretError, load_secret

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
HEALTH = "/api/health"
# What each kind of process reads from its environment to run as the recipes mean it to.
NEEDS = {
    "migrate": {"DATABASE_URL", "BPFLOW_SECRET"},
    "worker": {"DATABASE_URL", "BPFLOW_SECRET"},
    "backend": {"DATABASE_URL", "BPFLOW_SECRET", "REFLEX_REDIS_URL",
                "BPFLOW_INPROCESS_WORKER", "REFLEX_TRUSTED_PROXY_HOPS"},
    "web": {"BPFLOW_LISTEN", "BPFLOW_UPSTREAMS"},
}


@functools.cache
def api_paths() -> frozenset[str]:
    from bpflow.api import create_app
    return frozenset(create_app().openapi()["paths"])


# ---- the commands -------------------------------------------------------------------

def _reflex_cli() -> click.Group:
    from reflex.reflex import cli
    return cli


def check_command(argv: list[str]) -> None:
    """Fails unless the program accepts `argv` (its name, then its arguments)."""
    program = Path(argv[0]).name
    if program == "bpflow":
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"bpflow refuses {shlex.join(argv)}")
    elif program == "reflex":
        cli = _reflex_cli()
        parent = click.Context(cli, info_name="reflex")
        command = cli.get_command(parent, argv[1])
        assert command is not None, f"reflex has no command {argv[1]!r}"
        try:
            command.make_context(argv[1], argv[2:], parent=parent)
        except click.UsageError as exc:
            pytest.fail(f"reflex refuses {shlex.join(argv)}: {exc}")
    elif program == "caddy":
        assert argv[1:3] == ["run", "--config"] and argv[4:] == ["--adapter", "caddyfile"]
        assert argv[3].endswith("/deploy/Caddyfile"), argv
    else:
        pytest.fail(f"no check for {argv}")


@functools.cache
def _subcommands() -> dict[str, set[str]]:
    from argparse import _SubParsersAction
    parser = build_parser()
    bpflow = next(a for a in parser._actions if isinstance(a, _SubParsersAction))
    return {"bpflow": set(bpflow.choices), "reflex": set(_reflex_cli().commands)}


def commands_in(line: str) -> list[list[str]]:
    """The bpflow and reflex invocations of a shell line (`docker compose run --rm migrate
    bpflow user add ...` included), each cut at the end of its simple command."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return []
    found, known = [], _subcommands()
    for i, word in enumerate(words[:-1]):
        program = word.rsplit("/bin/", 1)[-1]
        if program in known and words[i + 1] in known[program]:
            argv = [program]
            for arg in words[i + 1:]:
                if arg in {"&&", "||", ";", "|", "\\"}:
                    break
                argv.append(arg)
            found.append(argv)
    return found


def documented_lines() -> list[tuple[str, str]]:
    """(where, line) of every example command: the code of deploy/'s notes and of
    docs/operations.md's "Deploying", and the indented commands of the recipes' comments."""
    out = []
    docs = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    deploying = docs[docs.index("\n## Deploying") + 1:]
    if "\n## " in deploying:  # up to the next section
        deploying = deploying[:deploying.index("\n## ")]
    notes = [("docs/operations.md", deploying)] + [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
        for p in DEPLOY.rglob("*.md")]
    for where, text in notes:
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            out += [(where, line) for line in block.splitlines()]
        out += [(where, span) for span in re.findall(r"`([^`\n]+)`", text)]
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.suffix != ".md":
            out += [(str(path.relative_to(ROOT)), line.lstrip("#"))
                    for line in path.read_text(encoding="utf-8").splitlines()
                    if re.match(r"#\s{2,}\S", line)]
    return out


def test_the_example_commands_of_the_recipes_and_their_notes_are_accepted():
    checked = 0
    for where, line in documented_lines():
        for argv in commands_in(line):
            try:
                check_command(argv)
            except pytest.fail.Exception as exc:
                pytest.fail(f"{where}: {exc}")
            checked += 1
    assert checked >= 15  # the notes do name the commands


def test_a_mistyped_command_is_caught():
    assert commands_in("docker compose run --rm migrate bpflow user add root --rloe admin")
    with pytest.raises(pytest.fail.Exception, match="bpflow refuses"):
        check_command(["bpflow", "user", "add", "root", "--rloe", "admin"])
    with pytest.raises(pytest.fail.Exception, match="reflex refuses"):
        check_command(["reflex", "run", "--env", "prod", "--backend-onyl"])


# ---- Kubernetes ---------------------------------------------------------------------

@functools.cache
def manifests() -> list[dict]:
    docs = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return docs


def of_kind(kind: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in manifests() if m["kind"] == kind}


def pod_specs() -> dict[str, dict]:
    """component label → pod spec, for the Deployments and the Job."""
    out = {}
    for m in [*of_kind("Deployment").values(), *of_kind("Job").values()]:
        template = m["spec"]["template"]
        out[template["metadata"]["labels"]["app.kubernetes.io/component"]] = template["spec"]
    return out


def test_every_kubernetes_manifest_is_valid_against_the_api_schema():
    from kubernetes_validate import utils
    version = utils.latest_version()
    kinds = []
    for doc in manifests():
        try:  # strict: a misspelt field is an error, not ignored
            utils.validate(doc, version, strict=True)
        except utils.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: "
                        f"{'.'.join(map(str, exc.path))}: {exc.message}")
        kinds.append(doc["kind"])
    assert sorted(kinds) == ["ConfigMap", "Deployment", "Deployment", "Deployment", "Job",
                             "Secret", "Service", "Service"]


def test_kubernetes_pods_run_accepted_commands_and_get_every_variable_they_need():
    provided = {**{f"configmap/{n}": set(m["data"]) for n, m in of_kind("ConfigMap").items()},
                **{f"secret/{n}": set(m["stringData"]) for n, m in of_kind("Secret").items()}}
    specs = pod_specs()
    assert set(specs) == set(NEEDS)
    for component, spec in specs.items():
        (container,) = spec["containers"]
        check_command(container["command"])
        names = {e["name"] for e in container.get("env", [])}
        for source in container.get("envFrom", []):
            ref = ("configmap", source["configMapRef"]["name"]) if "configMapRef" in source \
                else ("secret", source["secretRef"]["name"])
            names |= provided["/".join(ref)]  # a KeyError: a reference to nothing
        assert NEEDS[component] <= names, (component, NEEDS[component] - names)
        assert spec["securityContext"]["runAsNonRoot"] is True


def test_backends_are_probed_on_the_health_endpoint_of_the_port_they_serve():
    assert HEALTH in api_paths()
    (backend,) = pod_specs()["backend"]["containers"]
    port = backend["command"][backend["command"].index("--backend-port") + 1]
    (declared,) = backend["ports"]
    assert str(declared["containerPort"]) == port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert backend[probe]["httpGet"] == {"path": HEALTH, "port": declared["name"]}
    (worker,) = pod_specs()["worker"]["containers"]
    assert not {"readinessProbe", "livenessProbe"} & set(worker)  # said why in worker.yaml


def test_services_select_their_pods_and_the_web_entry_point_names_the_backends():
    deployments = of_kind("Deployment").values()
    for name, service in of_kind("Service").items():
        selector = service["spec"]["selector"]
        (target,) = [d for d in deployments
                     if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        assert target["spec"]["selector"]["matchLabels"].items() <= \
            target["spec"]["template"]["metadata"]["labels"].items()
        ports = {p["name"] for c in target["spec"]["template"]["spec"]["containers"]
                 for p in c["ports"]}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports, name
    (web,) = pod_specs()["web"]["containers"]
    upstreams = {e["name"]: e["value"] for e in web["env"]}["BPFLOW_UPSTREAMS"]
    backend = of_kind("Service")["bpflow-backend"]
    assert upstreams == f"bpflow-backend:{backend['spec']['ports'][0]['port']}"


def test_the_placeholder_secret_is_one_bpflow_refuses_to_start_with(monkeypatch):
    (secret,) = of_kind("Secret").values()
    monkeypatch.setenv("BPFLOW_SECRET", secret["stringData"]["BPFLOW_SECRET"])
    with pytest.raises(SecretError, match="needs at least 32"):
        load_secret()


# ---- Docker Compose and the image ---------------------------------------------------

@functools.cache
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def test_compose_upgrades_the_schema_before_the_backends_and_workers_start():
    services = compose()["services"]
    assert services["migrate"]["command"] == ["bpflow", "db", "upgrade"]
    assert services["migrate"]["restart"] == "no"
    for name in ("backend", "worker"):
        needs = services[name]["depends_on"]
        assert needs["migrate"] == {"condition": "service_completed_successfully"}
        assert needs["postgres"] == {"condition": "service_healthy"}
    assert services["backend"]["depends_on"]["redis"] == {"condition": "service_healthy"}
    assert services["web"]["depends_on"] == {"backend": {"condition": "service_healthy"}}
    for name in ("postgres", "redis", "backend", "web"):
        assert services[name]["healthcheck"]["test"][0] in {"CMD", "CMD-SHELL"}, name


def test_compose_services_run_accepted_commands_with_every_variable_they_need():
    services = compose()["services"]
    for name, needs in NEEDS.items():
        check_command(services[name]["command"])
        env = services[name]["environment"]
        assert needs <= set(env), (name, needs - set(env))
    assert services["backend"]["environment"]["BPFLOW_INPROCESS_WORKER"] == "0"
    # secrets come from deploy/.env, and Compose stops when one is missing
    for variable in ("BPFLOW_SECRET", "PGPASSWORD"):
        assert services["backend"]["environment"][variable].startswith("${"), variable
        assert ":?" in services["backend"]["environment"][variable]


def test_compose_health_checks_and_the_proxy_point_at_the_backends_port():
    services = compose()["services"]
    command = services["backend"]["command"]
    port = command[command.index("--backend-port") + 1]
    (url,) = re.findall(r"http://[^'\"]+", " ".join(services["backend"]["healthcheck"]["test"]))
    assert url == f"http://127.0.0.1:{port}{HEALTH}"
    assert services["web"]["environment"]["BPFLOW_UPSTREAMS"] == f"backend:{port}"
    listen = services["web"]["environment"]["BPFLOW_LISTEN"]
    (published,) = services["web"]["ports"]
    assert published.endswith(listen)  # "${BPFLOW_PORT:-8080}:8080" and ":8080"


def test_every_variable_compose_reads_is_in_the_example_settings():
    text = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    read = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))
    example = (DEPLOY / "env.example").read_text(encoding="utf-8")
    listed = set(re.findall(r"^#?\s*([A-Z_][A-Z0-9_]*)=", example, re.M))
    assert read and read <= listed, read - listed


def test_the_image_is_built_as_the_makefile_sets_up_and_runs_a_backend_by_default():
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    bun = re.search(r"^BUN_VERSION := (\S+)", makefile, re.M).group(1)
    assert f"ARG BUN_VERSION={bun}\n" in dockerfile
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1)
    check_command(yaml.safe_load(cmd))
    assert re.search(r"--uid (\d+)", dockerfile).group(1) == str(
        pod_specs()["backend"]["securityContext"]["runAsUser"])
    exports = re.findall(r"^RUN .*?reflex (export .*?)(?: \\|&&|$)", dockerfile, re.M)
    assert exports
    for line in exports:
        check_command(["reflex", *shlex.split(line)])
    build = compose()["x-bpflow"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert {".git", ".venv", ".web", ".tools", "deploy/.env"} <= set(ignored)


# ---- the Caddyfile ------------------------------------------------------------------

def caddyfile() -> str:
    return (DEPLOY / "Caddyfile").read_text(encoding="utf-8")


def test_the_proxy_sends_every_backend_path_to_the_backends():
    from reflex_base.constants import Endpoint
    (proxied,) = re.findall(r"@backend path (.*)", caddyfile())
    proxied = proxied.split()
    assert {"/api", "/api/*"} <= set(proxied)
    assert all(path.startswith("/api/") for path in api_paths())
    for endpoint in (Endpoint.EVENT, Endpoint.UPLOAD, Endpoint.PING, Endpoint.HEALTH):
        assert f"/{endpoint.value}" in proxied, endpoint


def test_the_pages_with_a_parameter_get_the_single_page_fallback():
    from bpflow_app import routes
    with_parameter = [v for v in vars(routes).values() if isinstance(v, str) and "[" in v]
    assert with_parameter
    # in each language: @routed (English), @drawn_routed (the others)
    routed = re.findall(r"@(?:drawn_)?routed \{\s*(?:not vars .*\s*)?path (.*)", caddyfile())
    assert len(routed) == 2
    for paths in routed:
        assert {p.split("[")[0] + "*" for p in with_parameter} == set(paths.split())


@pytest.mark.skipif(shutil.which("caddy") is None, reason="caddy is not installed")
def test_caddy_accepts_the_caddyfile(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BPFLOW_STATIC": str(tmp_path),
           "BPFLOW_LISTEN": "127.0.0.1:0", "BPFLOW_UPSTREAMS": "127.0.0.1:9 127.0.0.1:10"}
    done = subprocess.run(["caddy", "validate", "--config", str(DEPLOY / "Caddyfile"),
                           "--adapter", "caddyfile"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.skipif(shutil.which("caddy") is None, reason="caddy is not installed")
def test_caddy_serves_each_page_in_its_readers_language(tmp_path):
    """The web entry point picks a page's drawing as the app's own server does
    (bpflow_app/prerender.py; tests/app/test_asset_cache.py): by the pages' cookie, else a
    browser whose first language is Chinese; English otherwise or when not drawn."""
    import httpx

    from tests.servers import free_port, spawn, stop, wait_for

    static = tmp_path / "client"
    files = {"index.html": "home", "flows.html": "flows", "flows/index.html": "flows",
             "guest.html": "guest", "guest/index.html": "guest", "404.html": "not found",
             "__spa-fallback.html": "shell", "assets/app-1.js": "js",
             "_lang/zh-CN/index.html": "home zh", "_lang/zh-CN/flows/index.html": "flows zh",
             "_lang/zh-CN/__spa-fallback.html": "shell zh"}
    for rel, text in files.items():
        (static / rel).parent.mkdir(parents=True, exist_ok=True)
        (static / rel).write_text(text)
    base = f"http://127.0.0.1:{free_port()}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BPFLOW_STATIC": str(static),
           "BPFLOW_UPSTREAMS": "127.0.0.1:9", "BPFLOW_LISTEN": base}  # http: no TLS
    log = tmp_path / "caddy.log"
    process = spawn(["caddy", "run", "--config", str(DEPLOY / "Caddyfile"), "--adapter",
                     "caddyfile"], env, log)
    try:
        wait_for({base: process}, {base: log}, "/", timeout=30)

        def page(path: str, **headers: str) -> str:
            answer = httpx.get(base + path, headers=headers)
            assert answer.status_code == 200, (path, headers, answer.status_code)
            return answer.text

        zh = {"cookie": "bpflow_lang=zh-CN"}
        assert page("/flows", **zh) == "flows zh"
        assert page("/", **zh) == "home zh"
        assert page("/flows") == "flows"
        assert page("/guest", **zh) == "guest"  # not drawn in Chinese
        assert page("/flow/12", **zh) == "shell zh"
        assert page("/flow/12") == "shell"
        assert page("/assets/app-1.js", **zh) == "js"
        vary = httpx.get(base + "/flows", headers=zh).headers.get_list("vary")
        assert "Cookie, Accept-Language" in vary
        # not a page: 404, the shell in the reader's language (where the app says so)
        missing = httpx.get(base + "/nowhere", headers=zh)
        assert (missing.status_code, missing.text) == (404, "shell zh")
        missing = httpx.get(base + "/nowhere")
        assert (missing.status_code, missing.text) == (404, "not found")

        # the language as bpflow/languages.py reads the cookie, else the browser's first
        # language, for every spelling it knows of each language (and some it does not)
        spellings = [*languages.LANGUAGES, *languages._ALIASES, "zh-TW", "zh-HK", "fr",
                     "en-GB", "ZH-cn", "zh_CN", "en-US"]
        drawn = {"zh-CN": "flows zh", "en": "flows"}
        for code in spellings:
            for cookie, accept in ((code, "zh-CN"), (code, "en"), ("", f"{code},en;q=0.5"),
                                   ("fr", f"{code};q=0.9,en;q=0.5")):
                expected = languages.known(cookie) or languages.best(accept)
                headers = {"accept-language": accept, "cookie": f"bpflow_lang={cookie}"}
                assert page("/flows", **headers) == drawn[expected], headers

        # a build that could not draw the page shell in Chinese: the English one
        (static / "_lang/zh-CN/__spa-fallback.html").unlink()
        assert page("/flow/12", **zh) == "shell"
        missing = httpx.get(base + "/nowhere", headers=zh)
        assert (missing.status_code, missing.text) == (404, "not found")
    finally:
        stop(process)


# ---- systemd ------------------------------------------------------------------------

def unit(name: str) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections, each its (key, value) lines in order (keys repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in (DEPLOY / "systemd" / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            assert current is not None and key and _, line
            current.append((key, value))
    return sections


def values(section: list[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in section if k == key]


UNITS = {"migrate": "bpflow-migrate.service", "backend": "bpflow-backend@.service",
         "worker": "bpflow-worker@.service", "web": "bpflow-web.service"}


def test_systemd_units_restart_with_back_off_and_run_accepted_commands():
    for kind, name in UNITS.items():
        service = unit(name)["Service"]
        (command,) = values(service, "ExecStart")
        check_command(shlex.split(command.replace("%i", "8001")))
        env = set()
        for line in values(service, "Environment"):
            env |= {word.split("=")[0] for word in shlex.split(line)}
        for path in values(service, "EnvironmentFile"):
            assert path == "/etc/bpflow/bpflow.env"
            example = (DEPLOY / "systemd" / "bpflow.env.example").read_text(encoding="utf-8")
            env |= set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", example, re.M))
        if "BPFLOW_HOME" in env:  # the secret is made there once, then read by every unit
            env.add("BPFLOW_SECRET")
        assert NEEDS[kind] <= env, (kind, NEEDS[kind] - env)
        if kind == "migrate":
            assert values(service, "Type") == ["oneshot"]
            continue
        assert values(service, "Restart") == ["on-failure"] and values(service, "RestartSec")
        assert values(unit(name)["Unit"], "StartLimitIntervalSec") == ["0"]
        if kind in ("backend", "worker"):  # the schema is upgraded before they start
            for key in ("Wants", "After"):
                assert "bpflow-migrate.service" in " ".join(values(unit(name)["Unit"], key))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path):
    """The units as installed in /opt/bpflow, here with that folder's .venv being this
    interpreter's (verify checks that each command exists). Caddy, when not installed
    here, is stood in for by `true` (the Caddyfile's own test needs the real one)."""
    root = tmp_path / "opt"
    root.mkdir()
    (root / ".venv").symlink_to(sys.prefix)
    caddy = shutil.which("caddy") or shutil.which("true")
    for name in UNITS.values():
        text = (DEPLOY / "systemd" / name).read_text(encoding="utf-8")
        text = text.replace("/opt/bpflow", str(root)).replace("/usr/bin/caddy", str(caddy))
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", "--man=no",
                           *[str(tmp_path / n) for n in UNITS.values()]],
                          capture_output=True, text=True, timeout=60)
    version = int(re.search(r"\d+", subprocess.run(
        ["systemd-analyze", "--version"], capture_output=True, text=True).stdout).group())
    newer = r"Unknown key '(RestartSteps|RestartMaxDelaySec)'"  # systemd 254's back-off
    problems = [line for line in (done.stdout + done.stderr).splitlines()
                if line.strip() and not (version < 254 and re.search(newer, line))]
    assert not problems and done.returncode == 0, "\n".join(problems)
