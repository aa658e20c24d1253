"""`bpflow validate` (SPEC §3): output, --json shape and exit codes 0/1/2; texts
translated but not into English are warnings (SPEC §17)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from bpflow.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "upload" / "workflow").glob("*.json"))
BROKEN = {"name": "broken", "circles": [
    {"uri": "a", "deps": [["c"]]}, {"uri": "b", "deps": [["a"]]}, {"uri": "c", "deps": [["b"]]},
    {"uri": "d", "deps": [["ghost"]], "retry": [-1]}, {"uri": "end", "deps": [["d"]]}]}


def write(tmp_path: Path, name: str, body) -> str:
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def test_examples_are_valid_and_print_their_analysis(capsys):
    assert len(EXAMPLES) >= 4
    assert main(["validate", *EXAMPLES]) == 0
    out = capsys.readouterr().out
    assert out.count(": valid") == len(EXAMPLES)
    assert "terminal: done" in out and "longest path: 5" in out and "col 0: claim" in out


def test_broken_file_lists_each_error_with_its_path(tmp_path, capsys):
    assert main(["validate", write(tmp_path, "broken.json", BROKEN)]) == 1
    out = capsys.readouterr().out
    assert "invalid (6 errors)" in out
    assert out.count("unreachable") == 3
    assert "cycle" in out and "/circles/0/deps" in out and "a → b → c → a" in out
    assert "unknown_dependency" in out and "/circles/3/deps/0/0" in out and "'ghost'" in out
    assert "invalid_retry" in out and "/circles/3/retry" in out


def test_json_output_one_object_for_one_file(tmp_path, capsys):
    assert main(["validate", "--json", EXAMPLES[0]]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"file", "valid", "errors", "warnings", "analysis"}
    assert result["valid"] is True and result["errors"] == [] and result["warnings"] == []
    assert {"entries", "terminal", "longest_path", "width", "layout"} <= set(result["analysis"])


def test_json_output_list_in_argument_order(tmp_path, capsys):
    bad = write(tmp_path, "broken.json", BROKEN)
    assert main(["validate", bad, EXAMPLES[0], "--json"]) == 1
    results = json.loads(capsys.readouterr().out)
    assert [r["file"] for r in results] == [bad, EXAMPLES[0]]
    assert results[0]["valid"] is False and results[0]["analysis"] is None
    assert {e["code"] for e in results[0]["errors"]} == {"cycle", "unknown_dependency",
                                                         "invalid_retry", "unreachable"}


@pytest.mark.parametrize("content", [None, "{not json", b"\xff\xfe\x00"])
def test_unreadable_input_exits_2_without_traceback(tmp_path, capsys, content):
    path = tmp_path / "x.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert main(["validate", str(path), EXAMPLES[0]]) == 2
    captured = capsys.readouterr()
    assert "unreadable" in captured.out and "Traceback" not in captured.out + captured.err


def test_templates_named_together_may_nest_each_other(tmp_path, capsys):
    inner = write(tmp_path, "inner.json", {"name": "zz-inner", "circles": [{"uri": "x"}]})
    outer = write(tmp_path, "outer.json", {"name": "zz-outer", "circles": [
        {"uri": "sub", "box": {"action": {"type": "flow", "template": "zz-inner"}}}]})
    assert main(["validate", outer]) == 1
    assert "unknown_template" in capsys.readouterr().out
    assert main(["validate", outer, inner]) == 0


def test_console_script_runs_the_same_command(tmp_path):
    exe = shutil.which("bpflow", path=str(Path(sys.executable).parent))
    assert exe, "the bpflow console script is installed with the package"
    done = subprocess.run([exe, "validate", "--json", write(tmp_path, "b.json", BROKEN)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and json.loads(done.stdout)["valid"] is False
    assert done.stderr == ""


def test_a_file_named_twice_gives_two_results(capsys):
    assert main(["validate", "--json", EXAMPLES[0], EXAMPLES[0]]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def run_cli(*args: str, env_extra: dict | None = None, stdin: str | None = None,
            cwd: Path | None = None, unset: tuple[str, ...] = ()):
    """`bpflow ARGS` as the console script runs it (`main`), in this process: its exit code,
    stdout and stderr, with `env_extra` set and `unset` removed from the environment, `stdin`
    as its standard input and `cwd` as its folder. A process of its own costs ~2 s of CPU
    to import the app; test_console_script_runs_the_same_command runs the real script."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for name in unset:
            patch.delenv(name, raising=False)
        for name, value in (env_extra or {}).items():
            patch.setenv(name, value)
        patch.chdir(cwd or ROOT)
        patch.setattr(sys, "stdin", io.StringIO(stdin or ""))
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_db_upgrade_import_and_user_add(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
           "BPFLOW_HOME": str(tmp_path / "home")}
    env.pop("BPFLOW_SECRET", None)
    assert run_cli("db", "upgrade", env_extra=env).returncode == 0
    first = run_cli("import", "upload/workflow", env_extra=env)
    assert first.returncode == 0 and "reimbursement: version 1 (new)" in first.stdout
    again = run_cli("import", "upload/workflow", env_extra=env)
    assert "reimbursement: version 1 (unchanged)" in again.stdout
    added = run_cli("user", "add", "ann", "--role", "approver", "--password-stdin",
                    env_extra=env, stdin="s3cret-pw\n")
    assert added.returncode == 0 and "password" not in added.stdout
    short = run_cli("user", "add", "cid", "--password-stdin", env_extra=env, stdin="s3cret\n")
    assert (short.returncode, short.stderr) == (
        1, "bpflow: a password has 8 to 1000 characters\n")
    generated = run_cli("user", "add", "bob", env_extra=env)
    assert generated.returncode == 0 and "password: " in generated.stdout
    dup = run_cli("user", "add", "bob", env_extra=env)
    assert dup.returncode == 1 and "already exists" in dup.stderr
    from bpflow.store import Store
    store = Store(env["DATABASE_URL"], secret=b"x")
    try:
        assert store.authenticate("ann", "s3cret-pw")["roles"] == ["approver"]
        password = generated.stdout.split("password: ")[1].strip()
        assert store.authenticate("bob", password)["roles"] == ["user"]
    finally:
        store.close()


def test_db_upgrade_says_whether_it_created_found_or_upgraded_the_database(tmp_path):
    from alembic import command
    from alembic.script import ScriptDirectory

    from bpflow.store.migrate import alembic_config
    url = f"sqlite:///{tmp_path / 'up.db'}"
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    created = run_cli("db", "upgrade", "--url", url)
    assert (created.returncode, created.stdout) == (0, f"database {url} created (schema {head})\n")
    again = run_cli("db", "upgrade", "--url", url)
    assert (again.returncode, again.stdout) == (0, f"database {url} is up to date"
                                                   f" (schema {head})\n")
    older = f"sqlite:///{tmp_path / 'old.db'}"
    command.upgrade(alembic_config(older), "0007")
    upgraded = run_cli("db", "upgrade", env_extra={"DATABASE_URL": older})
    assert (upgraded.returncode, upgraded.stdout) == (
        0, f"database {older} upgraded from schema 0007 to {head}\n")


def test_cli_database_errors_are_readable(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"}
    done = run_cli("import", "upload/workflow", env_extra=env)
    assert done.returncode == 2 and "bpflow db upgrade" in done.stderr
    assert "Traceback" not in done.stderr
    assert run_cli("import", str(tmp_path / "missing"), env_extra=env).returncode == 2


def test_seed_demo_adds_users_once_with_private_passwords(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
           "BPFLOW_HOME": str(tmp_path / "home")}
    assert run_cli("db", "upgrade", env_extra=env).returncode == 0
    first = run_cli("seed-demo", env_extra=env)
    assert first.returncode == 0 and "approver" in first.stdout
    saved = tmp_path / "home" / "demo-users.txt"
    assert oct(saved.stat().st_mode & 0o777) == "0o600"
    header, first_user = saved.read_text().splitlines()[:2]
    assert header == f"# {env['DATABASE_URL']}"
    name, password = first_user.split()[:2]
    again = run_cli("seed-demo", env_extra=env)
    assert "no demo users added" in again.stdout and str(saved) in again.stdout
    from bpflow.store import Store
    store = Store(env["DATABASE_URL"], secret=b"x")
    try:
        assert store.authenticate(name, password)["roles"] == ["admin"]
    finally:
        store.close()
    # another database seeded with the same BPFLOW_HOME keeps the first one's passwords
    other = {**env, "DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"}
    assert run_cli("db", "upgrade", env_extra=other).returncode == 0
    seeded = run_cli("seed-demo", env_extra=other)
    assert seeded.returncode == 0 and str(saved) not in seeded.stdout
    assert saved.read_text().splitlines()[:2] == [header, first_user]
    [own] = (tmp_path / "home").glob("demo-users-*.txt")
    assert own.read_text().splitlines()[0] == f"# {other['DATABASE_URL']}"
    assert str(own) in run_cli("seed-demo", env_extra=other).stdout


# ------------------------------------------------- the secret (SPEC §13)
def cli_env(tmp_path, **extra) -> dict:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
           "BPFLOW_HOME": str(tmp_path / "home"), **extra}
    return env


GOOD_SECRET = "cli-test-secret-of-32-bytes-or-more"


@pytest.mark.parametrize("command", [("import", "upload/workflow"), ("user", "add", "eve"),
                                     ("worker", "--once"), ("seed-demo",), ("db", "upgrade")])
def test_a_short_secret_stops_the_cli_with_a_message(tmp_path, command):
    env = cli_env(tmp_path, BPFLOW_SECRET="abcd")
    assert run_cli("db", "upgrade", env_extra={**env, "BPFLOW_SECRET": GOOD_SECRET}
                   ).returncode == 0
    done = run_cli(*command, env_extra=env)
    assert done.returncode == 2
    assert done.stderr == "bpflow: BPFLOW_SECRET has 4 bytes; it needs at least 32 (unset" \
        f" it to have one generated in {tmp_path / 'home' / 'secret'})\n"


@pytest.mark.parametrize("command", [["db", "upgrade"], ["tenant", "list"],
                                     ["user", "disable", "bob"]])
def test_a_short_secret_opens_no_database(tmp_path, monkeypatch, capsys, command):
    """Refused before the database is touched (SPEC §13): `db upgrade` creates none."""
    url = f"sqlite:///{tmp_path / 'never.db'}"
    monkeypatch.setenv("BPFLOW_SECRET", "abcd")
    monkeypatch.setenv("BPFLOW_HOME", str(tmp_path / "home"))
    assert main([*command, "--url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "bpflow: BPFLOW_SECRET has 4 bytes; it needs at least 32" \
        f" (unset it to have one generated in {tmp_path / 'home' / 'secret'})\n"
    assert not (tmp_path / "never.db").exists()


def test_a_secret_file_others_may_read_stops_the_cli(tmp_path):
    env = cli_env(tmp_path)
    assert run_cli("db", "upgrade", env_extra=env).returncode == 0
    first = run_cli("user", "add", "eve", env_extra=env, unset=("BPFLOW_SECRET",))
    assert first.returncode == 0, first.stderr
    secret = tmp_path / "home" / "secret"
    secret.chmod(0o644)
    done = run_cli("user", "add", "ann", env_extra=env, unset=("BPFLOW_SECRET",))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"bpflow: the secret file {secret} is open to others (mode 0644);" \
        f" chmod 600 {secret}\n"


def test_an_unwritable_home_stops_the_cli_with_a_message(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = cli_env(tmp_path, BPFLOW_HOME=str(blocker / "home"))
    assert run_cli("db", "upgrade", env_extra={**env, "BPFLOW_SECRET": GOOD_SECRET}
                   ).returncode == 0
    done = run_cli("user", "add", "eve", env_extra=env, unset=("BPFLOW_SECRET",))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"bpflow: cannot create the secret file {blocker}/home/secret:")
    assert "BPFLOW_HOME" in done.stderr


# ----------------------------------------------------------------- users
def test_look_alike_usernames_are_refused_by_user_add(tmp_path):
    env = cli_env(tmp_path, BPFLOW_SECRET=GOOD_SECRET)
    assert run_cli("db", "upgrade", env_extra=env).returncode == 0
    for name in ("root\n", "ro\u200bot", " "):
        done = run_cli("user", "add", name, env_extra=env)
        assert done.returncode == 1 and done.stderr.startswith("bpflow: a username has"), name
    fullwidth = run_cli("user", "add", "ｒｏｏｔ", env_extra=env)
    assert fullwidth.returncode == 0 and fullwidth.stdout.startswith("user root added")


def test_user_disable(tmp_path):
    env = cli_env(tmp_path, BPFLOW_SECRET=GOOD_SECRET)
    assert run_cli("db", "upgrade", env_extra=env).returncode == 0
    assert run_cli("user", "add", "bob", "--password-stdin", env_extra=env,
                   stdin="bob-password\n").returncode == 0
    done = run_cli("user", "disable", "bob", env_extra=env)
    assert (done.returncode, done.stdout) == (0, "user bob disabled\n")
    again = run_cli("user", "disable", "bob", env_extra=env)
    assert (again.returncode, again.stdout) == (0, "user bob was disabled already\n")
    missing = run_cli("user", "disable", "nobody", env_extra=env)
    assert (missing.returncode, missing.stderr) == (1, "bpflow: no user named nobody\n")
    from bpflow.store import Store
    store = Store(env["DATABASE_URL"], secret=b"x")
    try:
        assert store.authenticate("bob", "bob-password") is None
        assert store.user("bob") is None
        assert store.list_users()[0]["disabled_at"] is not None
    finally:
        store.close()


NO_ENGLISH = {"name": "zh-only", "title": {"zh-CN": "报销"}, "circles": [
    {"uri": "ask", "box": {"confirm": {"en": "Pay?", "zh-CN": "付款？"}}},
    {"uri": "tell", "deps": [["ask"]], "box": {"action": {
        "type": "mail", "to": "bob", "subject": {"zh-CN": "已付款"}}}}]}


def test_a_text_without_english_is_a_warning_not_an_error(tmp_path, capsys):
    """Valid (exit 0): a reader of another language gets the first text given; the
    warning names each such text by its pointer."""
    path = write(tmp_path, "zh.json", NO_ENGLISH)
    assert main(["validate", "--json", path]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["valid"] is True and result["errors"] == []
    assert [(w["code"], w["path"]) for w in result["warnings"]] == [
        ("missing_en", "/circles/1/box/action/subject"), ("missing_en", "/title")]
    assert main(["validate", path]) == 0
    out = capsys.readouterr().out
    assert ": valid" in out and out.count("warning missing_en") == 2
    assert "/title" in out and "title has no en text (zh-CN only)" in out


def test_a_translation_in_an_unknown_language_is_an_error(tmp_path, capsys):
    body = json.loads(json.dumps(NO_ENGLISH))
    body["circles"][0]["box"]["confirm"]["zh-TW"] = "付款？"
    assert main(["validate", write(tmp_path, "tw.json", body)]) == 1
    out = capsys.readouterr().out
    assert "invalid (1 error)" in out and "/circles/0/box/confirm/zh-TW" in out
    assert "'zh-TW' is not a language bpflow speaks (the languages are en, zh-CN)" in out
    assert "warning missing_en" in out  # warnings are shown with the errors
