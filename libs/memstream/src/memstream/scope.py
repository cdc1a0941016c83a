"""Scopes: which part of one tenant's memory a read sees, or a key may write and read.

An event names its ``agent`` (who acted), its ``stream`` (a conversation or run) and, where
one exists, its ``user`` (the person it is about or on whose behalf it was written). A scope
names values for any of the three: each a string or a list; AND across fields, OR within one.
An event is in a scope when every field the scope names holds one of its values (an event
without a ``user`` is outside any scope that names users). A derived item (a fact, an entity,
a latent artifact) is in a scope when one of the events it rests on is, and then cites only
those.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from memstream.events.envelope import StreamName
from memstream.wire import ItemId

ScopeField = Literal["user", "agent", "stream"]
FIELDS: tuple[ScopeField, ...] = ("user", "agent", "stream")
MAX_VALUES = 100


def _listed(value: object) -> object:
    """A string stands for a list of one."""
    return [value] if isinstance(value, str) else value


Users = Annotated[
    list[ItemId], BeforeValidator(_listed), Field(min_length=1, max_length=MAX_VALUES)
]
Streams = Annotated[
    list[StreamName], BeforeValidator(_listed), Field(min_length=1, max_length=MAX_VALUES)
]


class Scope(BaseModel):
    """``{"user": …, "agent": …, "stream": …}``, each a string or a list (see the module
    docstring); a field left out is not narrowed."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    user: Users | None = Field(default=None, description="the people the events are about")
    agent: Users | None = Field(default=None, description="the agents that wrote them")
    stream: Streams | None = Field(default=None, description="their conversations or runs")

    @property
    def empty(self) -> bool:
        """No field named: the whole tenant."""
        return self.user is None and self.agent is None and self.stream is None

    def values(self, field: ScopeField) -> list[str] | None:
        """The values one field accepts (None: any)."""
        found: list[str] | None = getattr(self, field)
        return found

    def admits(self, *, user: str | None, agent: str, stream: str) -> bool:
        """Whether an event with these fields is in the scope."""
        given = {"user": user, "agent": agent, "stream": stream}
        return all((wanted := self.values(f)) is None or given[f] in wanted for f in FIELDS)

    def outside(self, outer: Scope) -> ScopeField | None:
        """The first field where this scope asks beyond ``outer`` (a value ``outer`` does not
        name), or None when it stays inside it."""
        for f in FIELDS:
            allowed, asked = outer.values(f), self.values(f)
            if allowed is not None and asked is not None and not set(asked) <= set(allowed):
                return f
        return None

    def within(self, outer: Scope) -> Scope:
        """This scope with the fields ``outer`` fixes and this one leaves open filled in
        (assumes :meth:`outside` found nothing)."""
        fields = {f: self.values(f) or outer.values(f) for f in FIELDS}
        return Scope(**{k: v for k, v in fields.items() if v is not None})

    def label(self) -> str:
        """``user=alice,bob agent=planner``: for messages and the CLI."""
        parts = [f"{f}={','.join(v)}" for f in FIELDS if (v := self.values(f))]
        return " ".join(parts) or "(the whole tenant)"


WHOLE = Scope()
SCOPE_DESCRIPTION = (
    "the part of the tenant's memory read: {user, agent, stream}, each a value or a list (AND "
    "across fields, OR within one); nothing outside it appears in the answer. A key with a "
    "scope of its own reads inside it (asking outside it is refused)"
)

STREAM_SHORTHAND = "shorthand for scope.stream (one stream)"


def scope_of(stream: str | None, scope: Scope | None) -> Scope:
    """A request's scope: ``scope``, with ``stream=`` as shorthand for its stream (both
    naming streams: ValueError)."""
    base = scope or WHOLE
    if stream is None:
        return base
    if base.stream is not None and base.stream != [stream]:
        raise ValueError("stream and scope.stream name different streams; send one of them")
    return base.within(Scope(stream=[stream]))


def parse_pairs(pairs: Iterable[str]) -> Scope:
    """``["user=alice", "user=bob", "agent=planner"]`` (the CLI's ``--scope``) as a scope;
    ValueError naming what is wrong."""
    fields: dict[str, list[str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in FIELDS or not value:
            raise ValueError(f"--scope takes user=VALUE, agent=VALUE or stream=VALUE, not {pair!r}")
        fields.setdefault(name, []).extend(v for v in value.split(",") if v)
    return Scope.model_validate(fields)
