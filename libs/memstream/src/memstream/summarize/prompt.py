"""The synthesis prompt: only the given memories, inline ``[id]`` citations, refusal."""

from __future__ import annotations

from collections.abc import Sequence

from memstream.checkout.model import Candidate

SYSTEM = (
    "You summarize an agent's memories to answer a question. Use only the memories given "
    "below; never add facts from elsewhere. After every claim, cite the memory it comes from "
    "inline by its id in square brackets, exactly as given, e.g. [a1b2] or [a1b2, c3d4]. "
    "Cite no other ids. If the memories do not support an answer, say so plainly in one "
    "sentence and make no claims. Be brief: a few sentences, no preamble."
)


def memory_line(c: Candidate) -> str:
    """One memory as the model reads it: id, kind, time, who, text on one line."""
    text = " ".join(c.text.split())
    return f"[{c.item_id}] ({c.kind}, {c.occurred_at}, {c.agent}) {text}"


def user_prompt(query: str, candidates: Sequence[Candidate]) -> str:
    """The question and the memories, best first."""
    lines = ["Memories (best match first):", *map(memory_line, candidates), ""]
    return "\n".join([*lines, f"Question: {query}"])
