"""The planner's lexicon cache: served while a refresh rebuilds it, never a reader waiting
for a refresh, a failed refresh rebuilt by the next reader."""

from __future__ import annotations

import threading

import pytest
from memstream.checkout.lexicons import Lexicons
from memstream.checkout.plan.entities import Lexicon
from memstream.records.projected import EntityView

K = ("v1", "tenant-a")


def lexicon_of(*keys: str) -> Lexicon:
    return Lexicon.build(EntityView(key=k, name=k, kind="person") for k in keys)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Builds:
    """A build function that returns the next lexicon of ``keys`` and counts its calls."""

    def __init__(self, *keys: str) -> None:
        self.keys = list(keys)
        self.calls = 0

    def __call__(self) -> Lexicon:
        self.calls += 1
        return lexicon_of(self.keys[min(self.calls, len(self.keys)) - 1])


class Held:
    """A build that waits for ``release`` before it returns the lexicon of ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self) -> Lexicon:
        self.started.set()
        assert self.release.wait(10)
        return lexicon_of(self.key)


def aged(key: str) -> tuple[Clock, Lexicons]:
    """A cache (ttl 1 s) holding the lexicon of ``key``, built 2 s ago."""
    clock = Clock()
    cache = Lexicons(ttl=1.0, limit=10.0, clock=clock)
    cache.get(K, lambda: lexicon_of(key))
    clock.now += 2.0
    return clock, cache


def names(lex: Lexicon) -> list[str]:
    return sorted(lex.entities)


def test_first_read_builds_then_reuses_within_ttl() -> None:
    clock = Clock()
    cache = Lexicons(ttl=1.0, limit=10.0, clock=clock)
    build = Builds("zoë okafor", "bill price")
    assert names(cache.get(("v1", "t"), build)) == ["zoë okafor"]
    clock.now += 0.5
    assert names(cache.get(("v1", "t"), build)) == ["zoë okafor"]
    assert build.calls == 1


def test_an_old_lexicon_serves_while_the_refresh_runs() -> None:
    _, cache = aged("old name")
    slow = Held("new name")
    # the reader gets the old lexicon at once; the refresh is still blocked
    assert names(cache.get(K, slow)) == ["old name"]
    assert slow.started.wait(10)
    assert names(cache.get(K, slow)) == ["old name"]  # one refresh at a time
    slow.release.set()
    cache.settle()
    assert names(cache.get(K, slow)) == ["new name"]


def test_fresh_reads_now_whatever_the_age() -> None:
    clock = Clock()
    cache = Lexicons(ttl=60.0, limit=600.0, clock=clock)
    build = Builds("a person", "the user")
    cache.get(K, build)
    assert names(cache.get(K, build, fresh=True)) == ["the user"]
    assert names(cache.get(K, build)) == ["the user"]
    assert build.calls == 2


def test_keys_do_not_share_lexicons() -> None:
    cache = Lexicons(ttl=60.0, limit=600.0, clock=Clock())
    cache.get(("v1", "tenant-a"), lambda: lexicon_of("ana"))
    assert names(cache.get(("v1", "tenant-b"), lambda: lexicon_of("ben"))) == ["ben"]
    assert names(cache.get(("v2", "tenant-a"), lambda: lexicon_of("cleo"))) == ["cleo"]
    assert names(cache.get(("v1", "tenant-a"), lambda: lexicon_of("x"))) == ["ana"]


def test_a_failed_refresh_is_rebuilt_by_the_next_reader(caplog: pytest.LogCaptureFixture) -> None:
    _, cache = aged("kept")

    def broken() -> Lexicon:
        raise ConnectionError("graph went away")

    assert names(cache.get(K, broken)) == ["kept"]
    cache.settle()
    # the next reader rebuilds in its own request: an error that persists reaches it
    with pytest.raises(ConnectionError, match="graph went away"):
        cache.get(K, broken)
    assert "lexicon refresh" in caplog.text
    assert names(cache.get(K, lambda: lexicon_of("back"))) == ["kept"]  # refresh started
    cache.settle()
    assert names(cache.get(K, _never)) == ["back"]


def test_a_slow_refresh_never_replaces_a_newer_lexicon() -> None:
    clock, cache = aged("first")
    slow = Held("stale refresh")
    cache.get(K, slow)
    assert slow.started.wait(10)
    clock.now += 1.0
    assert names(cache.get(K, lambda: lexicon_of("read fresh"), fresh=True)) == ["read fresh"]
    slow.release.set()
    cache.settle()
    assert names(cache.get(K, _never)) == ["read fresh"]


def _never() -> Lexicon:
    raise AssertionError("no build expected")


def test_past_the_limit_the_reader_rebuilds() -> None:
    clock, cache = aged("before the idle hour")
    clock.now += 3600
    assert names(cache.get(K, lambda: lexicon_of("learnt meanwhile"))) == ["learnt meanwhile"]


def test_a_purge_forgets_the_tenant_and_a_refresh_read_before_it_stays_out() -> None:
    clock, cache = aged("purged subject")
    other = ("v1", "tenant-b")
    cache.get(other, lambda: lexicon_of("other tenant"))
    slow = Held("purged subject")  # a refresh that read before the purge
    assert names(cache.get(K, slow)) == ["purged subject"]
    assert slow.started.wait(10)
    clock.now += 0.1
    cache.forget("tenant-a")
    slow.release.set()
    cache.settle()
    clock.now += 0.1
    assert names(cache.get(K, lambda: lexicon_of("after purge"))) == ["after purge"]
    assert names(cache.get(other, _never)) == ["other tenant"]


def test_purges_during_a_refresh_keep_it_out_and_leave_later_builds_kept() -> None:
    clock, cache = aged("purged subject")
    slow = Held("purged subject")
    cache.get(K, slow)  # a refresh that reads before the purges
    assert slow.started.wait(10)
    clock.now += 0.1
    for i in range(1000):
        cache.forget(f"gone-{i}")
    cache.forget("tenant-a")
    slow.release.set()
    cache.settle()
    assert names(cache.get(K, lambda: lexicon_of("after purge"))) == ["after purge"]
    assert names(cache.get(K, _never)) == ["after purge"]  # kept: the purges are behind it
