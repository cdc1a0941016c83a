"""The client's ``levers=`` names levers only: anything else is refused before a request."""

from __future__ import annotations

import pytest
from memstream.client import MemoryHttpClient


@pytest.mark.parametrize("name", ["query", "format", "k", "Rerank", "rerank\x00", ""])
def test_a_name_that_is_not_a_lever_is_refused_before_any_request(name: str) -> None:
    # port 9 (discard) is never served here: a request would fail with a connection error
    with (
        MemoryHttpClient("http://127.0.0.1:9", "ms_key") as client,
        pytest.raises(ValueError, match="unknown levers"),
    ):
        client.checkout("where do I live?", levers={name: True})
