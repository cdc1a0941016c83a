"""What starting the CLI and the HTTP client loads: none of the stack's libraries (numerical,
broker, graph, settings) until a command needs them. `memstream bench cli` measures the
seconds; this holds the rule that keeps them low."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "scipy", "lightgbm", "confluent_kafka", "redis", "pydantic_settings",
         "fastapi", "mcp", "memstream.settings", "memstream.checkout.service")  # fmt: skip


def loaded(statement: str) -> set[str]:
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_the_cli_starts_without_the_stacks_libraries() -> None:
    found = loaded("import memstream_cli.main")
    assert "memstream_cli.checkout_cmd" in found and "memstream_bench.cli" in found
    assert not {m for m in found if m.split(".")[0] in HEAVY or m in HEAVY}


def test_the_http_client_loads_no_retrieval_or_numerical_library() -> None:
    found = loaded("import memstream.client")
    assert "httpx" in found and "memstream.checkout.retrieve.config" in found
    assert not {m for m in found if m.split(".")[0] in HEAVY or m in HEAVY}


def test_a_command_loads_what_it_needs_when_it_runs() -> None:
    found = loaded(
        "from typer.testing import CliRunner\nfrom memstream_cli.main import app\n"
        "CliRunner().invoke(app, ['keys', 'list', '--tenant', 'nobody', '--data-dir', '/no-x'])"
    )
    assert "memstream.keys" in found and "lightgbm" not in found
