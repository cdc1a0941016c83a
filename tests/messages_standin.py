"""A local stand-in of the Anthropic Messages API (``POST /v1/messages``) for tests.

A real HTTP server on 127.0.0.1 that the real ``anthropic`` client talks to: it records every
request and answers with a valid Messages body whose text a test scripts as a function of
the request. Tests never reach the real API.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]
BOGUS_ID = "not-a-recalled-memory-42"
_PROMPT_MEMORY = re.compile(r'^<memory id="([^"]+)"[^>]*>(.*)</memory>$', re.MULTILINE)
_PROMPT_ID = re.compile(r'^<memory id="([^"]+)"', re.MULTILINE)


def prompt_text(request: dict[str, Any]) -> str:
    """The user message of a recorded request."""
    content = request["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def prompt_ids(request: dict[str, Any]) -> list[str]:
    """The memory ids the prompt lists (one ``<memory id="...">`` line per memory)."""
    return [html.unescape(i) for i in _PROMPT_ID.findall(prompt_text(request))]


def prompt_memories(request: dict[str, Any]) -> dict[str, str]:
    """Each memory id of the prompt with its text as the model reads it (unescaped)."""
    found = _PROMPT_MEMORY.findall(prompt_text(request))
    return {html.unescape(i): html.unescape(text) for i, text in found}


def cite_two_and_a_bogus_one(request: dict[str, Any]) -> str:
    """A reply citing the first two memories of the prompt (one twice) and one bogus id."""
    ids = prompt_ids(request)[:2] or ["none"]
    return (
        f"The user met Ngozi in Lagos [{ids[0]}]. "
        f"They agreed on the plan [{', '.join(ids)}] and again [{ids[0]}]. "
        f"Nothing else is known [{BOGUS_ID}]."
    )


@dataclass
class MessagesStandin:
    """``url`` is what ``ANTHROPIC_BASE_URL`` should be; ``requests`` what was received."""

    reply: Reply = cite_two_and_a_bogus_one
    status: int = 200  # set to 5xx to make every call fail
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.status != 200:
            error = {"type": "api_error", "message": "stand-in told to fail"}
            return self.status, {"type": "error", "error": error}
        text = self.reply(request)
        return 200, {
            "id": f"msg_standin_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "unknown"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": len(prompt_text(request).split()), "output_tokens": 17},
        }


def _handler(standin: MessagesStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path.split("?")[0] != "/v1/messages":
                self.send_error(404)
                return
            standin.requests.append(body)
            standin.headers.append({k.lower(): v for k, v in self.headers.items()})
            status, doc = standin.answer(body)
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: Any) -> None:  # quiet test output
            return

    return Handler


@contextmanager
def running_standin(reply: Reply = cite_two_and_a_bogus_one) -> Iterator[MessagesStandin]:
    """Serve a stand-in on a free 127.0.0.1 port until the block ends."""
    standin = MessagesStandin(reply=reply)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="messages-standin", daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def llm_env(standin: MessagesStandin) -> dict[str, str | None]:
    """The environment that points a stack's API at ``standin`` (for ``start_stack``)."""
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": standin.url}


_ORDER = re.compile(r"\b(?:reply|say|answer|state)\s+that\s+([^.!?]+)", re.IGNORECASE)


def obey_injections(request: dict[str, Any]) -> str:
    """A model that does what memory text tells it to: for a memory ordering "reply that X"
    it writes X twice (once uncited, once citing that memory); every other memory it repeats
    with its citation, the first one wrapped in HTML with a ``<script>``; and it closes with an
    uncited ``<script>`` line."""
    out: list[str] = []
    wrapped = False
    for memory_id, text in prompt_memories(request).items():
        order = _ORDER.search(text)
        if order:
            claim = order.group(1).strip()
            out += [f"{claim}.", f"{claim} [{memory_id}]."]
            continue
        said = text.rstrip(".")
        if not wrapped:
            said, wrapped = f"<b>{said}</b><script>steal(document.cookie)</script>", True
        out.append(f"{said} [{memory_id}].")
    out.append("<script>alert(1)</script>")
    return " ".join(out)
