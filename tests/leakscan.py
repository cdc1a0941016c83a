"""Searching everything a stack wrote for a purged subject's text: every record of every topic
(keys, values, headers), every file of a directory, a log; in the encodings a copy may take.

The one scanner of the purge, shred and store tests. A poll that waits for a rewrite scans the
same directory again and again: a file unchanged since the last scan (same inode, size, mtime
and ctime) is not read again.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import time
import unicodedata
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
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


@functools.cache
def _forms(marker: str) -> frozenset[bytes]:
    return frozenset(forms(marker))


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
    return [m for m in markers if any(f in data for f in _forms(m))]


def memory_of(packet: dict[str, Any]) -> bytes:
    """What a checkout packet holds from memory: all of it but the plan, which restates the
    query (a query naming the subject is not a leak)."""
    return orjson.dumps({k: v for k, v in packet.items() if k != "synthesis_plan"})


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


Signature = tuple[int, int, int, int]
# (path, markers) -> the file's signature when last read, and the markers it held then
_SEEN: dict[tuple[Path, tuple[str, ...]], tuple[Signature, list[str]]] = {}


SCAN_ATTEMPTS = 50


def files_holding(root: Path, markers: tuple[str, ...]) -> dict[str, list[str]]:
    """Every file under ``root`` (or ``root`` itself): marker -> paths holding it. Files
    unchanged since an earlier scan for the same markers are not read again.

    Only a complete scan counts: when a listed file vanished before it was read (a store
    swapping a folder, a compaction replacing a file), its successor may not have been
    listed, so neither copy was read; the whole tree is scanned again."""
    for _ in range(SCAN_ATTEMPTS):
        hits, complete = _scan_tree(root, markers)
        if complete:
            return hits
    raise AssertionError(f"{root}: files vanished during each of {SCAN_ATTEMPTS} scans")


def no_file_holds(
    root: Path, markers: tuple[str, ...], timeout: float, settle_s: float = 5.0
) -> None:
    """Wait until a complete scan of ``root`` finds none of ``markers`` (the stores rewrite
    their files a while after they applied a purge), then scan again ``settle_s`` later: a
    store writing a copy back after the first clean scan fails too. On failure, the files."""
    deadline = time.monotonic() + timeout
    while (hits := files_holding(root, markers)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert hits == {}, hits
    time.sleep(settle_s)
    assert files_holding(root, markers) == {}


def _scan_tree(root: Path, markers: tuple[str, ...]) -> tuple[dict[str, list[str]], bool]:
    paths = [root] if root.is_file() else []
    # os.walk, not rglob: a store swapping a folder (a compaction) removes paths meanwhile
    for dirpath, _dirs, names in os.walk(root):
        paths += [Path(dirpath) / n for n in names]
    hits: dict[str, list[str]] = {}
    for path in paths:
        found = _scan(path, markers)
        if found is None:
            return hits, False
        for marker in found:
            hits.setdefault(marker, []).append(str(path))
    return hits, True


def _scan(path: Path, markers: tuple[str, ...]) -> list[str] | None:
    """The markers ``path`` holds (None: gone since it was listed)."""
    try:
        st = path.stat()
        sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        seen = _SEEN.get((path, markers))
        if seen is not None and seen[0] == sig:
            return seen[1]
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    found = found_in(data, markers)
    _SEEN[(path, markers)] = (sig, found)
    return found
