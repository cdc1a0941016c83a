"""The failures every store port (graph, vectors) sorts its client's errors into.

A consumer that writes to a store treats the three cases differently (``kafka/loop.py``):

- :class:`StoreRefused`: the store will not take *this input* and would refuse it again.
  The records behind the write are isolated and the one the store refuses is dead-lettered
  with the store's reason; the rest commit.
- :class:`StoreUnavailable`: the store is down, restarting or cannot write for now. The same
  batch is retried with backoff; nothing is dead-lettered and nothing is committed.
- anything else is a bug in our code: it propagates, and the consumer crashes loudly.

Each adapter maps its own client's errors (where the quirk bites) and, where it is cheap,
checks up front what its store cannot hold, so the reason is precise and no round trip or
partial write happens.
"""

from __future__ import annotations

import re

# Where a store's message starts quoting what it was sent: a quoted token ("Invalid input
# 'x'"), the query echoed back (FalkorDB's ``errCtx``, rendered with its parameters), a
# response body (Qdrant), or a second line. Everything from there on may hold record content.
_QUOTING = re.compile(r"['\"`{\n\r]|errCtx")
LEFT_OUT = "[the store's quote of the input left out]"


class StoreRefused(RuntimeError):
    """The store refuses this input (its reason is the message); retrying will not help.

    ``in_data``: the adapter found the value the store cannot hold (a NUL byte, a string
    that is not UTF-8) before sending anything, so the refusal is the data's beyond doubt. A
    refusal the server answers may also come from our query, whatever the data.
    """

    store = "store"  # which port refused: "graph" or "vectors"

    def __init__(self, reason: str, *, in_data: bool = False) -> None:
        super().__init__(reason)
        self.in_data = in_data

    @property
    def reason(self) -> str:
        return str(self)

    @property
    def content_free(self) -> str:
        """The reason without the part that may quote the record (what a dead letter keeps:
        ``memory.dlq`` is read by operators, and a purge cannot seal its reasons)."""
        return content_free(str(self))


def content_free(reason: str) -> str:
    """``reason`` cut where a store starts quoting its input, saying it was cut."""
    found = _QUOTING.search(reason)
    if found is None:
        return reason
    return f"{reason[: found.start()].rstrip(' :,')} {LEFT_OUT}"


class StoreUnavailable(RuntimeError):
    """The store cannot be reached or cannot write for now: retry later."""

    store = "store"
