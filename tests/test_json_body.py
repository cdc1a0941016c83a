"""A request body's JSON document, or where it fails: the nesting limit (in parsed values and
in bytes no parser reads), a lone surrogate named by its place, anything else as invalid."""

from __future__ import annotations

import pytest
from memstream.wire import BODY_MAX_DEPTH, BodyFault, json_body


def test_a_document_within_the_limit_is_read() -> None:
    assert json_body(b'{"a": [1, {"b": "caf\\u00e9"}]}') == {"a": [1, {"b": "café"}]}
    assert json_body(b"[" * BODY_MAX_DEPTH + b"]" * BODY_MAX_DEPTH) is not None


def _fault(body: bytes, limit: int = BODY_MAX_DEPTH) -> BodyFault:
    with pytest.raises(BodyFault) as got:
        json_body(body, limit)
    return got.value


def test_nesting_past_the_limit_is_named_by_its_place() -> None:
    fault = _fault(b'{"x": {"y": [[[1]]]}}', limit=3)
    assert (fault.kind, fault.loc) == ("json_too_deep", ("x", "y", 0))
    assert fault.doc == {"x": {"y": [[[1]]]}}
    # deeper than any parser reads: found in the bytes, nothing of the body read
    fault = _fault(b'{"events": [' + b"[" * 5000)
    assert fault.kind == "json_too_deep" and fault.loc is not None
    assert fault.loc[:2] == ("events", 0) and fault.doc is None


def test_a_lone_surrogate_is_named_by_its_field() -> None:
    fault = _fault(b'{"events": [{"payload": {"text": "a\\ud800b"}}]}')
    assert fault.kind == "string_unicode"
    assert fault.loc == ("events", 0, "payload", "text")
    assert "lone surrogate at index 1" in fault.problem
    assert isinstance(fault.doc, dict) and "events" in fault.doc


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": 1,}', b"\x00", b'"\\x"'])
def test_anything_else_is_invalid_json_for_the_whole_body(body: bytes) -> None:
    fault = _fault(body)
    assert (fault.kind, fault.loc, fault.doc) == ("json_invalid", None, None)
    assert fault.problem.startswith("body is not valid JSON: ")


def test_a_fault_states_the_rule_after_its_place() -> None:
    assert _fault(b'{"x": [[1]]}', limit=2).rule == "a request body nests at most 2 levels"
    assert _fault(b"[" * 5000).rule == f"a request body nests at most {BODY_MAX_DEPTH} levels"
    lone = _fault(b'{"a": "\\udfff"}')
    assert lone.rule == lone.problem and lone.rule.startswith("holds a lone surrogate")
