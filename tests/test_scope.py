"""Scopes: what a read sees, what a key may write; parsing, matching, narrowing."""

from __future__ import annotations

import pytest
from memstream.scope import WHOLE, Scope, parse_pairs, scope_of
from pydantic import ValidationError


def test_a_string_stands_for_a_list_of_one() -> None:
    assert Scope.model_validate({"user": "zoë"}).user == ["zoë"]
    assert Scope(user=["a", "b"]).values("user") == ["a", "b"]
    assert Scope().empty and not Scope(agent="x").empty  # type: ignore[arg-type]


def test_and_across_fields_or_within_one() -> None:
    s = Scope.model_validate({"user": ["ana", "bo"], "agent": "planner"})
    assert s.admits(user="ana", agent="planner", stream="any")
    assert s.admits(user="bo", agent="planner", stream="other")
    assert not s.admits(user="ana", agent="coder", stream="any")
    assert not s.admits(user="cy", agent="planner", stream="any")
    # an event about nobody is outside a scope that names users
    assert not s.admits(user=None, agent="planner", stream="any")
    assert WHOLE.admits(user=None, agent="x", stream="y")


def test_outside_names_the_first_field_asking_beyond() -> None:
    key = Scope.model_validate({"user": ["ana"], "agent": ["planner", "coder"]})
    assert Scope.model_validate({"agent": "coder"}).outside(key) is None
    assert Scope.model_validate({"agent": ["coder", "reviewer"]}).outside(key) == "agent"
    assert Scope.model_validate({"user": "bo"}).outside(key) == "user"
    assert Scope.model_validate({"stream": "s"}).outside(key) is None  # the key fixes no stream


def test_within_fills_what_the_outer_scope_fixes() -> None:
    key = Scope.model_validate({"user": "ana"})
    asked = Scope.model_validate({"stream": "trip"}).within(key)
    assert asked == Scope(user=["ana"], stream=["trip"])
    assert WHOLE.within(key) == key


def test_stream_is_shorthand_and_must_agree() -> None:
    assert scope_of("trip", None) == Scope(stream=["trip"])
    assert scope_of("trip", Scope.model_validate({"user": "ana"})).user == ["ana"]
    assert scope_of("trip", Scope(stream=["trip"])) == Scope(stream=["trip"])
    with pytest.raises(ValueError, match="different streams"):
        scope_of("trip", Scope(stream=["home"]))


def test_cli_pairs() -> None:
    s = parse_pairs(["user=ana", "user=bo,cy", "agent=planner"])
    assert s.user == ["ana", "bo", "cy"] and s.agent == ["planner"]
    assert s.label() == "user=ana,bo,cy agent=planner"
    for bad in ["user", "who=ana", "user="]:
        with pytest.raises(ValueError):
            parse_pairs([bad])


@pytest.mark.parametrize("value", ["a\x00b", "a\x1fb", "", "x" * 300])
def test_hostile_values_are_refused(value: str) -> None:
    with pytest.raises(ValidationError):
        Scope.model_validate({"user": value})


def test_unknown_fields_and_empty_lists_are_refused() -> None:
    with pytest.raises(ValidationError):
        Scope.model_validate({"run": "r1"})
    with pytest.raises(ValidationError):
        Scope.model_validate({"agent": []})
