"""Position tokens (pure): signed and unsigned forms, tenant binding, and what is refused."""

from __future__ import annotations

import base64
import hmac
import re
import string

import orjson
import pytest
from memstream.events.envelope import TENANT_PATTERN
from memstream.position import (
    MAX_LENGTH,
    ForeignPosition,
    MalformedPosition,
    Position,
    encode,
    encode_write,
    position_key,
    read,
    verify,
)
from memstream.wire import Position as PositionField
from pydantic import TypeAdapter, ValidationError

SECRET = b"s" * 32
OTHER_SECRET = b"o" * 32
POS = Position("acme", "1764090000000000000", {0: 41, 2: 0, 3: 1_234_567}, 12, True)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def good_body(**changes: object) -> dict[str, object]:
    return {"v": 1, "t": "acme", "e": "", "r": {"0": 3}, "s": None, "u": False, **changes}


def test_round_trip_signed_and_unsigned() -> None:
    signed = encode(POS, SECRET)
    assert signed.startswith("ms1.") and signed.count(".") == 2
    assert verify(signed, "acme", SECRET) == POS
    unsigned = encode(POS, None)
    assert unsigned.startswith("ms1u.") and unsigned.count(".") == 1
    assert verify(unsigned, "acme", SECRET) == POS  # unsigned: the tenant check alone
    empty = Position("acme", "")
    assert verify(encode(empty, SECRET), "acme", SECRET) == empty
    assert encode(POS, SECRET) == signed  # one position, one token


def test_the_key_is_derived_and_not_the_purge_secret_itself() -> None:
    assert position_key(SECRET) == hmac.new(SECRET, b"memstream-position", "sha256").digest()
    assert position_key(SECRET) != SECRET
    with pytest.raises(MalformedPosition, match="bad signature"):
        verify(encode(POS, OTHER_SECRET), "acme", SECRET)


def test_tampered_body_is_invalid() -> None:
    token = encode(POS, SECRET)
    _, body, mac = token.split(".")
    forged = b64(orjson.dumps(good_body(r={"0": 10**9})))
    for bad in (
        f"ms1.{forged}.{mac}",  # another body, the old MAC
        f"ms1.{body[:-1]}{'A' if body[-1] != 'A' else 'B'}.{mac}",  # one character changed
        f"ms1.{body}.{mac[:-1]}{'A' if mac[-1] != 'A' else 'B'}",  # the MAC changed
        f"ms1.{body}.{b64(b'x' * 15)}",  # a MAC of the wrong length
        f"ms1.{body}",  # signed form without its MAC
        f"ms1u.{body}.{mac}",  # unsigned form with one
    ):
        with pytest.raises(MalformedPosition):
            verify(bad, "acme", SECRET)


def test_a_non_canonical_base64_spelling_is_refused() -> None:
    body = b64(orjson.dumps(good_body()))
    last = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    # The final character carries unused low bits when the length is not a multiple of 4:
    # setting one gives the same bytes under another spelling.
    spare = last[last.index(body[-1]) + 1]
    pad = "=" * (-len(body) % 4)
    assert base64.urlsafe_b64decode(body[:-1] + spare + pad) == base64.urlsafe_b64decode(body + pad)
    with pytest.raises(MalformedPosition, match="base64"):
        read(f"ms1u.{body[:-1]}{spare}")


@pytest.mark.parametrize(
    "token",
    [
        "",
        "ms1",
        "ms1.",
        "ms1..",
        "ms2.eyJ2IjoxfQ.AAAA",
        "MS1U.eyJ2IjoxfQ",
        "ms1u.eyJ2IjoxfQ\n",  # a final newline ($ in Python would let it through)
        "ms1u.e",  # base64 of one stray character
        "ms1u.eyJ2Ijox=",  # padding
        "ms1u.eyJ2Ijox fQ",
        "ms1u.ey\x00J2IjoxfQ",
        "ms1u.eyJ2Ij\x1boxfQ",
        "ms1u.eyJ2Ij\x85oxfQ",
        "ms1u.éyJ2IjoxfQ",
        "ms1u." + "A" * (MAX_LENGTH * 1000),  # huge
        None,
        12,
        b"ms1u.eyJ2IjoxfQ",
    ],
)
def test_garbage_is_malformed(token: object) -> None:
    with pytest.raises(MalformedPosition):
        verify(token, "acme", SECRET)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe",  # not UTF-8
        b"[1, 2]",
        b'"ms1"',
        b"{}",
        b"[" * 2000 + b"]" * 2000,
        orjson.dumps(good_body(v=2)),  # an unknown version
        orjson.dumps(good_body(v=True)),  # true is no version, though True == 1 in Python
        orjson.dumps(good_body(v=1.0)),
        orjson.dumps({**good_body(), "x": 1}),  # an unknown field
        orjson.dumps({k: v for k, v in good_body().items() if k != "u"}),
        orjson.dumps(good_body(t="acme\x00")),
        orjson.dumps(good_body(t="acme\n")),
        orjson.dumps(good_body(t="")),
        orjson.dumps(good_body(t="a" * 65)),
        orjson.dumps(good_body(t=7)),
        orjson.dumps(good_body(e="12\x1b3")),
        orjson.dumps(good_body(e="abc")),
        orjson.dumps(good_body(e=None)),
        orjson.dumps(good_body(r={"0": -1})),
        orjson.dumps(good_body(r={"0": 2**63})),
        orjson.dumps(good_body(r={"0": True})),
        orjson.dumps(good_body(r={"0": 1.5})),
        orjson.dumps(good_body(r={"0": "5"})),
        orjson.dumps(good_body(r={"-1": 5})),
        orjson.dumps(good_body(r={"01": 5})),
        orjson.dumps(good_body(r={"0\x00": 5})),
        orjson.dumps(good_body(r={"٣": 5})),  # a digit, but not an ASCII one
        orjson.dumps(good_body(r=[[0, 5]])),
        orjson.dumps(good_body(s=-1)),
        orjson.dumps(good_body(s="3")),
        orjson.dumps(good_body(u=1)),
        orjson.dumps(good_body(u=None)),
    ],
)
def test_a_bad_body_is_malformed_signed_or_not(body: bytes) -> None:
    for token in (f"ms1u.{b64(body)}", signed_body(body)):
        with pytest.raises(MalformedPosition):
            verify(token, "acme", SECRET)


def signed_body(body: bytes) -> str:
    text = b64(body)
    key = position_key(SECRET)
    return f"ms1.{text}.{b64(hmac.new(key, f'ms1.{text}'.encode(), 'sha256').digest()[:16])}"


def test_foreign_tenant_detected_before_mac() -> None:
    mine = encode(Position("globex", "", {1: 9}), OTHER_SECRET)
    # Checked against the caller's secret, its MAC would not match: the tenant is named first.
    with pytest.raises(ForeignPosition) as caught:
        verify(mine, "acme", SECRET)
    assert caught.value.issued_for == "globex" and caught.value.bound_to == "acme"
    assert "'globex'" in str(caught.value) and "'acme'" in str(caught.value)
    # A forged MAC under another tenant's name is still named as that tenant's.
    _, body, _ = mine.split(".")
    with pytest.raises(ForeignPosition):
        verify(f"ms1.{body}.{b64(b'0' * 16)}", "acme", SECRET)
    with pytest.raises(ForeignPosition):
        verify(encode(Position("globex", ""), None), "acme", SECRET)
    # A damaged token is malformed, whatever tenant it claims.
    with pytest.raises(MalformedPosition):
        verify(f"ms1.{body[:-2]}.{b64(b'0' * 16)}", "acme", SECRET)


def test_tenant_case_matters() -> None:
    with pytest.raises(ForeignPosition):
        verify(encode(Position("Acme", ""), SECRET), "acme", SECRET)


def test_size_bounded_by_partitions() -> None:
    # One event or the highest offsets of a 10k-event batch: one entry per partition.
    one = encode(Position("acme", "1764090000000000000", {2: 0}), SECRET)
    many = encode(Position("acme", "1764090000000000000", {2: 9_999}), SECRET)
    assert len(many) - len(one) == len(b64(b"9999")) - len(b64(b"0"))
    busy = Position("acme", "1764090000000000000", dict.fromkeys(range(4), 10**12))
    assert len(encode(busy, SECRET)) < 300  # the default 4 partitions, a long-lived log
    # The longest tenant and offsets still fit 16 partitions.
    widest = Position("a" * 64, "9" * 20, dict.fromkeys(range(16), 2**63 - 1), 2**63 - 1, True)
    assert len(encode(widest, SECRET)) <= MAX_LENGTH
    with pytest.raises(ValueError, match="exceeds"):
        encode(Position("a", "", dict.fromkeys(range(64), 2**63 - 1)), SECRET)


def test_a_write_over_too_many_partitions_answers_a_position_without_offsets() -> None:
    fits = Position("acme", "7", dict.fromkeys(range(16), 2**40), 3)
    assert encode_write(fits, SECRET) == encode(fits, SECRET)
    wide = Position("acme", "7", dict.fromkeys(range(64), 2**40), 3)
    for secret in (SECRET, None):
        got = verify(encode_write(wide, secret), "acme", SECRET)
        assert got == Position("acme", "7", {}, 3, unacknowledged=True)  # wait for segment 3


def test_tenant_ids_with_every_allowed_character() -> None:
    allowed = string.ascii_letters + string.digits + "._-"
    tenants = ["0", "a" * 64, "A.b_c-9", allowed[:64], allowed[-64:], "x" + allowed[52:]]
    for tenant in tenants:
        assert re.match(TENANT_PATTERN, tenant)
        pos = Position(tenant, "7", {0: 1})
        assert verify(encode(pos, SECRET), tenant, SECRET) == pos
        assert verify(encode(pos, None), tenant, SECRET) == pos


@pytest.mark.parametrize("tenant", ["", "-a", ".a", "a/b", "a b", "é", "a\x00", "a\n", "a" * 65])
def test_a_position_cannot_be_made_for_an_impossible_tenant(tenant: str) -> None:
    with pytest.raises(ValueError, match="tenant"):
        Position(tenant, "")


def test_the_wire_field_takes_tokens_and_refuses_the_rest() -> None:
    field = TypeAdapter(PositionField)
    for token in (encode(POS, SECRET), encode(POS, None)):
        assert field.validate_python(token) == token
    for bad in ("", "ms1u.a\n", "ms1u.a\x00", "ms2.abc", "ms1u." + "A" * MAX_LENGTH):
        with pytest.raises(ValidationError):
            field.validate_python(bad)
    schema = field.json_schema()
    assert schema["maxLength"] == MAX_LENGTH and schema["pattern"].startswith("^ms1u?")


def test_the_position_keeps_no_reference_to_the_callers_dict() -> None:
    raw = {0: 1}
    pos = Position("acme", "", raw)
    raw[0] = 99
    assert pos.raw == {0: 1}
