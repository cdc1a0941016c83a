"""One rule for what came from memory, in every rendering meant for a prompt or a page.

Memory is data written by clients: event text, agent and stream names, types, metadata,
entity names, latent summaries, the reasons an item was left out. The Markdown and gathered
renderings, summarize_recall's prompt and answer, and the explorer show it as text, never as
markup:

- :func:`inert`: one line (whitespace collapsed, so a value cannot start a heading, a list or
  a fence of its own); ``&``, ``<`` and ``>`` as entities (no raw HTML, no ``<javascript:…>``
  autolink); ``](`` written ``]\\(`` (no inline link or image: ``[x](javascript:…)`` shows
  as it was written); a backtick written ``\\``` (no code span of memory's could swallow the
  rendering's own and leave what follows as raw HTML). Square brackets stay, so ``[id]``
  citations read as they are.
- :func:`attr`: :func:`inert` for a quoted attribute value (quotes as entities too).
- :func:`code`: an id as an inline code span that no backtick inside can close early.
- :func:`fence`: a fenced block whose fence no line inside can close.

The escapes add no whitespace: a line's token count moves only by its escapes. The explorer
puts memory on the page through ``textContent`` only (``static/explorer.js``), which is inert
by construction.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_BACKTICKS = re.compile(r"`+")


def inert(text: object) -> str:
    """``text`` on one line, shown as written by any Markdown or HTML viewer."""
    return escape(" ".join(str(text).split()))


def escape(text: str) -> str:
    """What :func:`inert` does but collapse whitespace: for text whose lines are its own
    (summarize_recall's answer, written by the model, with memory quoted in it)."""
    return html.escape(text, quote=False).replace("](", "]\\(").replace("`", "\\`")


def attr(text: object) -> str:
    """:func:`inert` for a double- or single-quoted attribute value."""
    return inert(text).replace('"', "&quot;").replace("'", "&#x27;")


def _longest_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code(text: object) -> str:
    """``text`` (an id) as an inline code span: delimited by more backticks than any run
    inside, padded where it begins or ends with one (CommonMark's rule)."""
    shown = " ".join(str(text).split())
    ticks = "`" * (_longest_run(shown) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def fence(info: str, lines: Sequence[str]) -> list[str]:
    """``lines`` as a fenced code block (``info``: its language) that none of them closes."""
    ticks = "`" * max(3, max((_longest_run(line) for line in lines), default=0) + 1)
    return [f"{ticks}{info}", *lines, ticks]
