"""Searching everything a stack wrote for a purged subject's text: every record of every topic
(keys, values, headers), every file of a directory, a log; in the encodings a copy may take."""

from __future__ import annotations

import base64
import json
import os
import unicodedata
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from confluent_kafka import Consumer, Message
from topicread import read_topic

MIN_B64 = 8  # shorter base64 fragments could occur by chance in ciphertext


def _b64_fragments(raw: bytes) -> set[bytes]:
    """What ``raw`` looks like inside any base64 text, at each of the three alignments: the
    characters that only its bytes determine."""
    out: set[bytes] = set()
    for shift in range(3):
        start = -(-8 * shift // 6)  # ceil
        end = 8 * (shift + len(raw)) // 6
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            frag = enc(b"\x00" * shift + raw)[start:end]
            if len(frag) >= MIN_B64:
                out.add(frag)
    return out


def forms(marker: str) -> set[bytes]:
    """``marker`` as bytes: UTF-8 (composed and decomposed), JSON ``\\uXXXX`` escapes (either
    hex case), percent-encoded, base64."""
    out: set[bytes] = set()
    for text in {unicodedata.normalize("NFC", marker), unicodedata.normalize("NFD", marker)}:
        raw = text.encode()
        escaped = json.dumps(text)[1:-1]
        out |= {raw, escaped.encode(), _upper_escapes(escaped).encode(), quote(text).encode()}
        out |= _b64_fragments(raw)
    return out


def _upper_escapes(escaped: str) -> str:
    parts = escaped.split("\\u")
    return "\\u".join([parts[0], *(p[:4].upper() + p[4:] for p in parts[1:])])


def found_in(data: bytes, markers: tuple[str, ...]) -> list[str]:
    """The markers of which some form is in ``data``."""
    return [m for m in markers if any(f in data for f in forms(m))]


def topics_holding(
    bootstrap: str, markers: tuple[str, ...], skip: Callable[[Message], bool] = lambda m: False
) -> dict[str, list[str]]:
    """Every topic of the cluster read from the beginning, all partitions: marker ->
    ``topic/partition@offset (key|value|header name)`` of each record holding it (but those
    ``skip`` leaves out)."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scan-{uuid.uuid4()}"})
    try:
        topics = sorted(probe.list_topics(timeout=30).topics)
    finally:
        probe.close()
    assert topics, "the cluster lists no topics"
    hits: dict[str, list[str]] = {}
    for topic in topics:
        for m in read_topic(bootstrap, topic, timeout=90):
            if skip(m):
                continue
            at = f"{topic}/{m.partition()}@{m.offset()}"
            parts = [("key", m.key() or b""), ("value", m.value() or b"")]
            for header in m.headers() or []:
                name, value = header[0], header[1]
                raw = value.encode() if isinstance(value, str) else value or b""
                parts += [(f"header {name}", name.encode()), (f"header {name}", raw)]
            for where, data in parts:
                for marker in found_in(data, markers):
                    hits.setdefault(marker, []).append(f"{at} ({where})")
    return hits


def files_holding(root: Path, markers: tuple[str, ...]) -> dict[str, list[str]]:
    """Every file under ``root`` (or ``root`` itself): marker -> paths holding it."""
    paths = [root] if root.is_file() else []
    # os.walk, not rglob: a store swapping a folder (a compaction) removes paths meanwhile
    for dirpath, _dirs, names in os.walk(root):
        paths += [Path(dirpath) / n for n in names]
    hits: dict[str, list[str]] = {}
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:  # gone since it was listed
            continue
        for marker in found_in(data, markers):
            hits.setdefault(marker, []).append(str(path))
    return hits
