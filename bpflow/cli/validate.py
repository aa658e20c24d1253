"""`bpflow validate FILE... [--json]` (SPEC §3): the analysis of template files, printed
for people or as JSON, with the analysis's warnings (a text translated but not into
English: SPEC §17); it needs no database. Also how the command line reads a template
file, and the shipped templates by name (for nested flows named by template)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bpflow.cli.common import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE, Subparsers, command
from engine.analysis import analyze

DEFAULT_TEMPLATE_DIRS = (Path("upload/workflow"), Path(__file__).resolve().parents[2] / "upload"
                         / "workflow")


class Unreadable(Exception):
    pass


class TooLarge(Unreadable):
    """JSON that parses in principle, but is beyond what the reader takes: the analysis's
    `too_large`, reported as an invalid template."""


def register(sub: Subparsers) -> None:
    val = command(sub, "validate", _run, "analyse template files (SPEC §3)", database=False)
    val.add_argument("files", nargs="+", metavar="FILE")
    val.add_argument("--json", action="store_true", help="print the result as JSON")


def _run(args: argparse.Namespace) -> int:
    return validate(args.files, args.json)


def read_template(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{path} is not JSON: {exc.msg} at line {exc.lineno}"
                         f" column {exc.colno}") from exc
    except RecursionError as exc:
        raise TooLarge(f"{path} is nested too deeply (objects and lists) to be read") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise TooLarge(f"{path} holds a number too large to be read (more than"
                       f" {sys.get_int_max_str_digits()} digits)") from exc


def known_templates(dirs: tuple[Path, ...] = DEFAULT_TEMPLATE_DIRS) -> dict[str, Any]:
    """Templates of upload/workflow/ by name, for nested flows named by template."""
    found: dict[str, Any] = {}
    for folder in dirs:
        for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                body = read_template(file)
            except Unreadable:
                continue
            if isinstance(body, dict) and isinstance(body.get("name"), str):
                found.setdefault(body["name"], body)
    return found


def validate(files: list[str], as_json: bool) -> int:
    bodies: list[tuple[str, Any]] = []
    results: list[dict[str, Any]] = []
    for name in files:
        try:
            bodies.append((name, read_template(Path(name))))
        except Unreadable as exc:
            bodies.append((name, exc))
    registry = known_templates()
    for _, body in bodies:  # templates named together may nest each other
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            registry[body["name"]] = body
    code = EXIT_OK
    for name, body in bodies:
        if isinstance(body, TooLarge):
            code = EXIT_INVALID if code == EXIT_OK else code
            results.append({"file": name, "valid": False, "errors": [
                {"code": "too_large", "path": "", "message": str(body)}], "warnings": [],
                "analysis": None})
            continue
        if isinstance(body, Unreadable):
            code = EXIT_UNREADABLE
            results.append({"file": name, "valid": False, "errors": [
                {"code": "unreadable", "path": "", "message": str(body)}], "warnings": [],
                "analysis": None})
            continue
        report = analyze(body, registry.get)
        if not report.valid and code == EXIT_OK:
            code = EXIT_INVALID
        results.append({"file": name, "valid": report.valid, "errors": report.errors,
                        "warnings": report.warnings, "analysis": report.analysis})
    if as_json:
        out = results[0] if len(results) == 1 else results
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for result in results:
            print(_describe(result))
    return code


def _describe(result: dict[str, Any]) -> str:
    if result["errors"] and result["errors"][0]["code"] == "unreadable":
        return f"{result['file']}: unreadable: {result['errors'][0]['message']}"
    if not result["valid"]:
        n = len(result["errors"])
        lines = [f"{result['file']}: invalid ({n} error{'s' * (n != 1)})"]
        lines += [f"  {e['code']:<19} {e['path'] or '/':<28} {e['message']}"
                  for e in result["errors"]]
        return "\n".join(lines + _warnings(result))
    a = result["analysis"]
    lines = [f"{result['file']}: valid",
             f"  entries: {', '.join(a['entries'])}   terminal: {a['terminal']}"
             f"   longest path: {a['longest_path']}   width: {a['width']}"]
    columns: dict[int, list[tuple[int, str]]] = {}
    for uri, pos in a["layout"].items():
        columns.setdefault(pos["col"], []).append((pos["row"], uri))
    for col in sorted(columns):
        lines.append(f"  col {col}: " + ", ".join(uri for _, uri in sorted(columns[col])))
    for uri in sorted(a.get("nested", {})):
        nested = a["nested"][uri]
        lines.append(f"  nested in {uri}: entries {', '.join(nested['entries'])},"
                     f" terminal {nested['terminal']}, longest path {nested['longest_path']}")
    return "\n".join(lines + _warnings(result))


def _warnings(result: dict[str, Any]) -> list[str]:
    return [f"  warning {w['code']:<11} {w['path'] or '/':<28} {w['message']}"
            for w in result["warnings"]]
