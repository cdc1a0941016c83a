"""Fair share admission (memstream.fairshare): budgets of read time, concurrency, the global cap.

Pure: the clock is passed in, costs are given, nothing sleeps. Budgets count only while
another tenant reads, so most tests keep a neighbour's read in flight.
"""

from __future__ import annotations

import pytest
from memstream.fairshare import MAX_PAUSE_S, MIN_RETRY_S, Admitted, FairShare, Refused, ShareLimits

LIMITS = ShareLimits(concurrency=2, share=0.25, burst_s=1.0, total=4, reserved=1)


def admitted(share: FairShare, tenant: str, now: float) -> Admitted:
    got = share.admit(tenant, now)
    assert isinstance(got, Admitted), got
    return got


def refused(share: FairShare, tenant: str, now: float) -> Refused:
    got = share.admit(tenant, now)
    assert isinstance(got, Refused), got
    return got


def contended(limits: ShareLimits) -> FairShare:
    """A FairShare in which another tenant has a read in flight (and never ends it)."""
    share = FairShare(limits)
    admitted(share, "neighbour", 0.0)
    return share


def test_a_tenant_has_at_most_its_concurrency_in_flight() -> None:
    share = FairShare(LIMITS)
    first, _ = admitted(share, "Ana", 0.0), admitted(share, "Ana", 0.0)
    no = refused(share, "Ana", 0.0)
    assert no.reason == "concurrency" and no.retry_after_s == MIN_RETRY_S  # whole seconds
    share.release(first, 0.01, 0.001)
    admitted(share, "Ana", 0.01)  # a slot came back


def test_a_spent_budget_refuses_until_it_refills_and_says_when() -> None:
    share = contended(LIMITS)
    read = admitted(share, "acme", 0.0)
    share.release(read, 3.0, cost_s=1.5)  # 1.0 of budget - 1.5 spent = -0.5
    no = refused(share, "acme", 3.0)
    assert no.reason == "budget"
    assert no.retry_after_s == pytest.approx(0.5 / 0.25)
    refused(share, "acme", 3.0 + 1.9)
    admitted(share, "acme", 3.0 + 2.01)  # the honest Retry-After was enough


def test_one_tenant_spending_its_budget_leaves_another_untouched() -> None:
    share = contended(LIMITS)
    read = admitted(share, "a", 0.0)
    share.release(read, 0.5, cost_s=5.0)
    assert refused(share, "a", 0.5).reason == "budget"
    admitted(share, "b", 0.5)


def test_a_read_is_charged_the_tenants_recent_cost_when_it_starts() -> None:
    """A flood starts its reads at the pace its budget refills, not all at once."""
    share = contended(ShareLimits(concurrency=8, share=0.1, burst_s=0.15, total=16, reserved=0))
    for t in range(10):  # the estimate converges on what the reads cost
        share.release(admitted(share, "flood", t * 10.0), t * 10.0, cost_s=0.1)
    now = 200.0  # budget full again (0.15)
    started = [share.admit("flood", now) for _ in range(8)]
    ok = [r for r in started if isinstance(r, Admitted)]
    # Each start is charged ~0.1: the second leaves the budget negative, so two start
    # and the others wait for it to refill.
    assert len(ok) == 2, started
    assert all(r.reason == "budget" for r in started if isinstance(r, Refused))


def test_the_correction_on_release_gives_back_what_was_overcharged() -> None:
    share = contended(ShareLimits(concurrency=4, share=0.1, burst_s=0.5, total=8, reserved=0))
    for t in range(10):
        share.release(admitted(share, "x", t * 10.0), t * 10.0, cost_s=0.4)
    read = admitted(share, "x", 200.0)  # charged ~0.4 of 0.5
    assert read.charged_s == pytest.approx(0.4, abs=0.02)
    share.release(read, 200.0, cost_s=0.0)  # it cost nothing after all: 0.5 is back
    share.release(admitted(share, "x", 200.0), 200.0, cost_s=1.0)  # 0.5 - 1.0 = -0.5
    no = refused(share, "x", 200.0)
    assert no.reason == "budget" and no.retry_after_s == pytest.approx(0.5 / 0.1)


def test_the_last_slots_are_kept_for_a_tenant_with_nothing_in_flight() -> None:
    share = FairShare(ShareLimits(concurrency=4, share=1.0, burst_s=10.0, total=4, reserved=1))
    for _ in range(3):
        admitted(share, "flood", 0.0)
    # The flood has reads in flight: the reserved slot is not for it.
    assert refused(share, "flood", 0.0).reason == "busy"
    admitted(share, "quiet", 0.0)
    assert share.in_flight == 4
    # Now every slot is taken: even a tenant with nothing in flight waits.
    assert refused(share, "third", 0.0).reason == "busy"


def test_releases_free_the_global_slots() -> None:
    share = FairShare(ShareLimits(concurrency=1, share=1.0, burst_s=10.0, total=2, reserved=0))
    reads = [admitted(share, "a", 0.0), admitted(share, "b", 0.0)]
    assert refused(share, "c", 0.0).reason == "busy"
    for r in reads:
        share.release(r, 0.1, 0.01)
    assert share.in_flight == 0
    admitted(share, "c", 0.1)


def test_refill_never_exceeds_the_burst() -> None:
    share = contended(ShareLimits(concurrency=100, share=1.0, burst_s=0.3, total=100, reserved=0))
    share.release(admitted(share, "t", 0.0), 0.0, cost_s=0.1)  # estimate now 0.03
    # A day later the budget holds 0.3, not a day's worth: ~10 reads of ~0.03 start at once.
    got = [share.admit("t", 86_400.0) for _ in range(50)]
    assert 5 <= sum(isinstance(g, Admitted) for g in got) <= 11, got


def test_a_clock_that_steps_back_refills_nothing() -> None:
    share = contended(LIMITS)
    share.release(admitted(share, "t", 100.0), 100.0, cost_s=2.0)  # -1.0
    no = refused(share, "t", 50.0)
    assert no.reason == "budget" and no.retry_after_s == pytest.approx(1.0 / 0.25)


def test_idle_tenants_are_forgotten() -> None:
    share = FairShare(ShareLimits(concurrency=1, share=1.0, burst_s=1.0, total=10, reserved=0))
    for i in range(300):  # many tenants, each one cheap read long ago
        share.release(admitted(share, f"t{i}", 0.0), 0.0, cost_s=0.01)
    busy = admitted(share, "busy", 0.0)
    for _ in range(300):  # later admissions sweep the idle ones (full budget, nothing in flight)
        share.release(admitted(share, "other", 1000.0), 1000.0, 0.0)
    assert share.tenants() <= 2
    assert refused(share, "busy", 1000.0).reason == "concurrency"  # in flight: still known
    share.release(busy, 1000.0, 0.0)


def test_a_client_that_honours_retry_after_is_answered_at_once() -> None:
    share = contended(LIMITS)
    share.release(admitted(share, "polite", 0.0), 0.0, cost_s=1.5)  # -0.5: 2 s to wait
    first = refused(share, "polite", 0.0)
    assert first.pause_s == 0.0 and first.retry_after_s == pytest.approx(2.0)
    again = refused(share, "polite", 1.5)  # not yet refilled... but it was told 2 s
    assert again.pause_s == pytest.approx(0.5)  # early by 0.5 s: it waits that long


def test_a_client_that_ignores_retry_after_waits_for_its_next_refusal() -> None:
    share = contended(LIMITS)
    share.release(admitted(share, "rude", 0.0), 0.0, cost_s=3.0)  # -2.0: 8 s to wait
    assert refused(share, "rude", 0.0).pause_s == 0.0  # the first refusal is immediate
    early = refused(share, "rude", 0.01)
    assert early.pause_s == MAX_PAUSE_S  # capped: never held longer than that
    # Its Retry-After counts from the end of the pause and stays honest.
    assert early.retry_after_s == pytest.approx(8.0 - 0.01 * 0.25 / 0.25 - MAX_PAUSE_S)
    assert isinstance(share.admit("polite", 0.01), Admitted)  # nobody else is paused


def test_every_refusal_tells_a_retry_after_of_at_least_a_second() -> None:
    share = contended(ShareLimits(concurrency=1, share=100.0, burst_s=0.01, total=8, reserved=0))
    share.release(admitted(share, "t", 0.0), 0.0, cost_s=0.02)  # 0.01 s short: 0.1 ms to wait
    no = refused(share, "t", 0.0)
    assert no.reason == "budget" and no.retry_after_s == MIN_RETRY_S


@pytest.mark.parametrize(
    "kw",
    [
        {"concurrency": 0},
        {"total": 0},
        {"share": 0.0},
        {"burst_s": -1.0},
        {"reserved": 4},
        {"reserved": -1},
    ],
)
def test_limits_that_cannot_work_are_refused(kw: dict[str, float]) -> None:
    base = {"concurrency": 2, "share": 0.25, "burst_s": 1.0, "total": 4, "reserved": 1}
    with pytest.raises(ValueError):
        ShareLimits(**(base | kw))  # type: ignore[arg-type]


def test_a_tenant_not_seen_yet_is_charged_what_reads_have_cost_lately() -> None:
    """A new flood's first wave is held by the budget, not only by the concurrency limit."""
    share = contended(ShareLimits(concurrency=8, share=0.1, burst_s=0.15, total=16, reserved=0))
    for t in range(20):
        share.release(admitted(share, "regular", t * 10.0), t * 10.0, cost_s=0.1)
    wave = [share.admit("newcomer", 300.0) for _ in range(8)]
    assert sum(isinstance(r, Admitted) for r in wave) == 2, wave


def test_alone_a_tenant_is_held_to_no_budget_and_charged_nothing() -> None:
    share = FairShare(LIMITS)
    for i in range(50):  # far over any budget, but nobody else reads
        read = admitted(share, "solo", i * 0.01)
        assert read.free
        share.release(read, i * 0.01 + 0.005, cost_s=2.0)
    admitted(share, "other", 1.0)  # from now on budgets count...
    read = admitted(share, "solo", 1.0)  # ...and solo's is full: what it used alone was free
    assert not read.free


def test_the_budget_counts_for_a_minute_after_another_tenants_read() -> None:
    share = FairShare(LIMITS)
    share.release(admitted(share, "other", 0.0), 0.0, cost_s=0.01)
    held = admitted(share, "busy", 1.0)  # nothing in flight: free
    assert held.free
    # overlapping its own read while "other" read a second ago: charged
    share.release(admitted(share, "busy", 1.0), 1.0, cost_s=50.0)
    assert refused(share, "busy", 2.0).reason == "budget"
    assert refused(share, "busy", 59.9).reason == "budget"  # other's read is 59.9 s old
    assert admitted(share, "busy", 60.1).free  # a minute without it: alone again


def test_reads_sent_one_after_another_never_spend_a_budget() -> None:
    """Tenants taking turns (an agent per tenant, a script, a benchmark) never overlap: none
    is refused, however many reads and however dear, while a tenant overlapping its own reads
    with another tenant's recent ones is charged."""
    share = FairShare(ShareLimits(concurrency=4, share=0.1, burst_s=0.2, total=8, reserved=2))
    now = 0.0
    for i in range(300):
        tenant = ("ana", "bo", "cy")[i % 3]
        read = admitted(share, tenant, now)
        assert read.free
        now += 0.05
        share.release(read, now, cost_s=0.05)  # a second of reads every second, per tenant
    first = admitted(share, "ana", now)  # nothing in flight: free
    second = admitted(share, "ana", now)  # overlaps ana's own read, "cy" read just now
    assert first.free and not second.free and second.charged_s > 0
