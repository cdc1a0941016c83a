"""Failures a person can read: the HTTP client, the SDK and the CLI say in one line what
failed and what to do — a port nobody listens on, an unknown key, a refused field, a broker
that is not there, a malformed line of ``emit --file`` — and ``emit --file`` shows its
progress on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstream.client import MemoryHttpClient, MemstreamHttpError, MemstreamUnreachableError
from memstream.sdk import BrokerUnavailableError, MemoryClient
from memstream.stack.net import free_port
from memstream_cli.main import app as cli_app
from stackproc import RunningStack, memstream
from typer.testing import CliRunner

WRITER = "errs-oona"


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


def test_the_http_client_on_a_closed_port_says_so_in_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with (
        MemoryHttpClient(url, "ms_none_none", timeout=5) as client,
        pytest.raises(MemstreamUnreachableError) as info,
    ):
        client.checkout("where is the kiln?")
    said = one_line(str(info.value))
    assert url in said and "cannot be reached" in said and "memstream up" in said
    assert isinstance(info.value, ConnectionError)


def test_the_sdk_on_a_closed_broker_says_where_and_what_to_do() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    with pytest.raises(BrokerUnavailableError) as info:
        MemoryClient(bootstrap, WRITER, connect_timeout=2)
    said = one_line(str(info.value))
    assert bootstrap in said and "memstream up" in said and "KafkaError{" not in said


def test_an_unknown_key_is_one_line_naming_the_call_and_the_key(stack: RunningStack) -> None:
    wrong = "ms_abcdefabcdef_wrongwrongwrong"
    with (
        MemoryHttpClient(stack.api_url, wrong) as client,
        pytest.raises(MemstreamHttpError) as info,
    ):
        client.recall("anything at all")
    said = one_line(str(info.value))
    assert info.value.status == 401
    assert said.startswith("POST /v1/recall refused (HTTP 401)") and "API key" in said


def test_a_refused_field_is_named_with_its_reason(stack: RunningStack) -> None:
    key = memstream("keys", "create", "--tenant", WRITER, data_dir=stack.data_dir).stdout.strip()
    with MemoryHttpClient(stack.api_url, key) as client, pytest.raises(MemstreamHttpError) as info:
        client.checkout("how many bowls?", k=0)
    said = one_line(str(info.value))
    assert info.value.status == 422 and "k:" in said and "correct the field" in said
    assert "{" not in said  # the reason, not a dump of the body


def test_the_cli_on_an_api_nobody_serves_exits_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("MEMSTREAM_KAFKA_BOOTSTRAP", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("MEMSTREAM_API_PORT", str(port))
    argv = ["lineage", "ev-1", "--tenant", WRITER, "--key", "ms_a_b", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(cli_app, argv)
    assert result.exit_code == 1
    said = one_line(result.stderr)
    assert said.startswith("error: memstream API at") and f":{port}" in said
    assert "Traceback" not in result.output + result.stderr


def test_the_cli_with_a_revoked_key_names_the_refusal(stack: RunningStack) -> None:
    done = memstream("keys", "create", "--tenant", WRITER, "--json", data_dir=stack.data_dir)
    key = json.loads(done.stdout)
    memstream("keys", "revoke", key["id"], data_dir=stack.data_dir)
    result = memstream("checkout", "the glaze?", "--tenant", WRITER, "--key", key["key"],
                       data_dir=stack.data_dir, check=False)  # fmt: skip
    assert result.returncode == 1
    said = one_line(result.stderr)
    assert "refused (HTTP 401)" in said and "API key" in said


def test_a_malformed_line_of_emit_file_names_line_and_field(
    stack: RunningStack, tmp_path: Path
) -> None:
    good = {"tenant": WRITER, "stream": "kiln", "type": "observation",
            "payload": {"text": "the kiln reached 1280 °C"}}  # fmt: skip
    bad = {**good, "payload": {"text": 12}}
    file = tmp_path / "events.jsonl"
    file.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    result = memstream("emit", "--file", str(file), data_dir=stack.data_dir, check=False)
    assert result.returncode == 1
    # Before the error, the progress line of the stage it failed in (stderr, not a terminal).
    assert result.stderr.splitlines()[0] == f"reading {file}"
    said = one_line("\n".join(result.stderr.splitlines()[1:]))
    assert said.startswith(f"error: {file}:3: invalid event: ") and "text" in said, said
    assert "validation error" not in said and "emitted" not in result.stdout


def test_emit_file_tells_its_progress_on_stderr_and_the_count_on_stdout(
    stack: RunningStack, tmp_path: Path
) -> None:
    file = tmp_path / "many.jsonl"
    line = {"tenant": WRITER, "stream": "glazes", "type": "observation"}
    texts = (f"glaze test {i}: celadon over slip" for i in range(1200))
    file.write_text("".join(json.dumps({**line, "payload": {"text": t}}) + "\n" for t in texts))
    result = memstream("emit", "--file", str(file), data_dir=stack.data_dir)
    assert result.stdout.strip() == "emitted 1200 events"
    assert f"reading {file}" in result.stderr and "emitting 1,200 events" in result.stderr
    assert "\x1b[" not in result.stderr  # not a terminal: plain lines, no control codes
