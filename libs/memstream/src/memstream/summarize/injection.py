"""Instruction-like memory text: words addressed to the model reading it, not facts about
the world.

A memory is data. When its text reads as orders to the reader ("ignore your instructions",
"reply that ...", "you are now ...", a ``system:`` role marker), a summary claim that rests on
it alone may be the model obeying the memory rather than reporting it. The detector names
the signals it found; it judges the shape of the text (imperatives to the reader, override
verbs over instructions, role markers), never a list of known attack strings.
"""

from __future__ import annotations

import re
import unicodedata

# Override: a verb that discards guidance, then (within a few words) the guidance itself.
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|overrule|bypass)\b(?:\W+\w+){0,4}?\W+"
    r"(?:instructions?|prompts?|rules|guidelines|directions|directives?|system\s+message|"
    r"programming)\b"
)
# The reader's own guidance named as such: "your instructions", "the system prompt".
_THEIR_GUIDANCE = re.compile(
    r"\b(?:your|previous|prior|above|earlier|preceding|original|new|updated|hidden|real)\s+"
    r"(?:instructions?|system\s+prompt|prompt|guidelines|directives?|programming)\b"
    r"|\bsystem\s+prompt\b"
)
# A system-level role marker at the start of a line, or a chat-template token anywhere
# ("user:" / "assistant:" stay out: imported transcripts are written that way).
_ROLE = re.compile(
    r"(?:^|\n)\s*(?:#+\s*)?(?:system|developer|instructions?)\s*(?::|>|\])"
    r"|<\|?\s*/?\s*(?:system|assistant|im_start|im_end|endoftext)\s*\|?>"
    r"|\[/?inst\]|<</?sys>>"
)
# The reader addressed as a machine: "hey assistant", "AI, reply ...", "note to the model".
_MODEL = r"(?:assistant|ai|a\.i\.|language\s+model|llm|chatbot|summari[sz]er|claude|chatgpt|gpt)"
_ADDRESSED = re.compile(
    rf"\b(?:hey|dear|attention|note\s+to|message\s+to)\s+(?:the\s+|any\s+|all\s+)?{_MODEL}"
    rf"|(?:^|[.!?:;\n]\s*){_MODEL}\s*[,:!]\s*(?:please\s+)?"
    r"(?:ignore|disregard|forget|reply|respond|answer|say|tell|write|output|print)\b"
    rf"|\b(?:to|for)\s+(?:the|any|every|all)\s+{_MODEL}s?\s+(?:reading|processing|summari[sz]ing)"
)
# Obligations put on "you", and identity changes: "you must", "you are now", "from now on, say".
_YOU_MUST = re.compile(
    r"\byou\s+(?:must|shall|will\s+now|have\s+to|need\s+to|are\s+(?:now|required|instructed)|"
    r"should\s+(?:now|always|never|only))\b"
    r"|\bfrom\s+now\s+on\W+(?:you|always|never|only|reply|respond|answer|say)\b"
    r"|\bpretend\s+(?:to\s+be|you|that\s+you)\b"
    r"|\byour\s+(?:new\s+|real\s+)?(?:task|job|role|goal)\s+is\b"
)
# A clause opening with an order about what to answer: "reply that ...", "and say only: ...".
_RESPONSE_VERB = (
    r"(?:reply|respond|answer|say|state|output|print|claim|repeat|reveal|insist|"
    r"tell\s+(?:the\s+user|whoever\s+asks|anyone\s+who\s+asks))"
)
_DIRECTIVE = re.compile(
    r"(?:^|[.!?:;,\n\"“']\s*|\b(?:and|then|but|instead)\s+)"
    r"(?:(?:now|instead|always|only|please|just|then)\s+)*"
    rf"{_RESPONSE_VERB}"
    # "say only: ..." takes a colon after the qualifier; a bare "Answer: 42" is a label.
    r"(?:\s+(?:only|instead|always)\s*:|\s+(?:(?:only|instead|always)\s+)?"
    r"(?:that\b|with\b|\"|“|'|exactly\b|the\s+following\b|in\s+your\s+(?:answer|reply|summary)\b))"
)

# The reader's product named, and content put into it: "the summary should say ...", "write in
# your answer ...", "add to any summary: ...", "when summarizing, mention ...". Text about the
# world rarely tells a summary what to contain; text aimed at the summarizer does.
_PRODUCT = (
    r"(?:summar(?:y|ies|i[sz]e[sd]?|i[sz]ing|i[sz]ers?)|recaps?|digests?|"
    r"(?:your|the|any|each|every|all)\s+(?:answers?|repl(?:y|ies)|responses?|outputs?)|"
    r"whoever\s+(?:reads|asks|summari[sz]es)|anyone\s+(?:reading|asking|who\s+(?:reads|asks))|"
    r"the\s+reader)"
)
_PUT = (
    r"(?:include|mention|add|write|state|say|put|insert|append|output|print|tell|report|"
    r"answer|respond|reply|claim|list|note|show|begin|start|end)"
)
_PRODUCT_CONTENT = re.compile(
    rf"\b{_PRODUCT}\b(?:\W+\w+){{0,5}}?\W+(?:must|should|shall|needs?\s+to|ha(?:s|ve)\s+to|"
    rf"is\s+to|are\s+to|will)\s+(?:\w+\s+)?{_PUT}\b"
    rf"|\b{_PRODUCT}\b[^.!?\n]{{0,30}}?[:,]\s*(?:please\s+)?{_PUT}\b"
    rf"|\b{_PUT}\b(?:\W+\w+){{0,3}}?\W+(?:in|to|into|at\s+the\s+(?:start|end)\s+of)\s+"
    r"(?:your|the|any|each|every|all)\s+(?:summar(?:y|ies)|recaps?|answers?|repl(?:y|ies)|"
    r"responses?|outputs?)\b"
    rf"|(?:^|[.!?:;\n]\s*)(?:when|while|if)\s+(?:you\s+)?(?:are\s+)?(?:summari[sz]ing|"
    rf"summari[sz]e|answering|replying|responding|asked)\b[^.!?\n]{{0,40}}?\b{_PUT}\b"
    r"|\b(?:always|only|instead)\s+(?:answer|say|reply|respond|tell\s+\w+|mention|include|"
    r"state|claim|output|report)\s*(?:that\b|:|\"|“)"
    r"|\binstead\s+(?:tell|say|answer|reply|respond|state|claim|report)\b"
)
# The override in other languages the reader may follow (French, Spanish, Portuguese,
# Italian, German): a verb that discards guidance, then the guidance.
_OVERRIDE_ABROAD = re.compile(
    r"\b(?:ignor(?:ez|er|a|ar|ate|are|iere|ieren)|oubliez|oublie|olvida|"
    r"esquece|dimentica|vergiss)\b(?:\W+\w+){0,4}?\W+"
    r"(?:instructions?|consignes|r[eè]gles|instrucciones|reglas|instru[cç][oõ]es|regras|"
    r"istruzioni|regole|anweisungen|regeln|vorgaben)\b"
)

SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("override", _OVERRIDE),
    ("names_its_instructions", _THEIR_GUIDANCE),
    ("role_marker", _ROLE),
    ("addresses_the_model", _ADDRESSED),
    ("obligation_on_the_reader", _YOU_MUST),
    ("answer_directive", _DIRECTIVE),
    ("content_for_the_reader", _PRODUCT_CONTENT),
    ("override_abroad", _OVERRIDE_ABROAD),
)


def normalized(text: str) -> str:
    """``text`` as the patterns read it: compatibility forms folded (full-width letters),
    invisible format characters and controls removed, case folded, accents kept apart."""
    text = unicodedata.normalize("NFKC", text)
    # Zero-width characters split a word for a pattern, not for a model: drop them; other
    # controls (NUL, tabs) separate words.
    text = "".join(_fold(ch) for ch in text).casefold()
    text = text.replace("’", "'").replace("‘", "'")
    return re.sub(r"[ \t\r\f\v]+", " ", text)


def _fold(ch: str) -> str:
    if ch == "\n":
        return ch
    category = unicodedata.category(ch)
    return "" if category == "Cf" else " " if category == "Cc" else ch


def instruction_signals(text: str) -> list[str]:
    """The names of the instruction-like signals found in ``text`` (empty: it reads as data)."""
    norm = normalized(text)
    return [name for name, pattern in SIGNALS if pattern.search(norm)]


def is_instruction_like(text: str) -> bool:
    """True when ``text`` carries at least one instruction-like signal."""
    return bool(instruction_signals(text))
