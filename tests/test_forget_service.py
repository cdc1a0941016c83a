"""The forget workflow, with in-memory stand-ins for the stores: what a dry run reports and
leaves alone, and what a purge destroys, forgets and watches. The real stores are the e2e
purge tests'."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memstream.checkout.memory import PacketMemory, RecentPacket
from memstream.events.payloads import QuestionFamily
from memstream.forget.metrics import PendingPurges
from memstream.forget.purge import TOMBSTONE_EVENT_IDS, tombstones
from memstream.forget.service import ForgetService, NoSubject, NothingHeld, forget_ordered
from memstream.forget.topics import Reach, TopicsOutcome
from memstream.graph.port import PurgeScope
from memstream.ledger.purge import subject_digest
from memstream.projection.purge import PurgeOrder
from memstream.records.projected import EventRecord
from memstream.scope import Scope
from memstream.settings import Settings
from memstream.text.names import entity_key

T = "atelier-9"
SCOPE = PurgeScope(event_ids=["ev-1", "ev-2"], fact_ids=["ev-1#0"], latent_ids=["lat-1"])
# ev-2 is Ngozi's own turn; ev-1 is Idris's turn that mentions her (collateral); ev-3 is his.
EVENTS = {
    "ev-1": ("idris", "coach", "2031-04-02T09:00:00Z"),
    "ev-2": ("ngozi", "coach", "2031-04-01T09:00:00Z"),
    "ev-3": ("idris", "planner", "2031-04-03T09:00:00Z"),
}


def record(event_id: str) -> EventRecord:
    user, agent, at = EVENTS[event_id]
    return EventRecord(
        tenant=T, event_id=event_id, stream=f"{user}.chat", seq=1, hash="h", prev_hash="p",
        type="message.user", agent=agent, occurred_at=at, ingested_at=at, user=user,
    )  # fmt: skip


@dataclass
class Graph:
    asked: list[tuple[str, str, list[str]]] = field(default_factory=list)
    held: int = 0  # events still held after the tombstone

    def purge_scope(self, tenant: str, key: str, named: list[str]) -> PurgeScope:
        self.asked.append((tenant, key, named))
        return SCOPE

    def events(self, tenant: str, ids: list[str]) -> list[EventRecord]:
        return [record(i) for i in ids if i in EVENTS]

    def scope_events(self, tenant: str, scope: Scope) -> list[str]:
        return [i for i in EVENTS if scope.admits(**_fields(record(i)))]

    def derived_from(self, tenant: str, ids: list[str]) -> PurgeScope:
        facts = [f for f in SCOPE.fact_ids if f.split("#")[0] in ids]
        return PurgeScope(sorted(ids), facts, ["lat-1"] if "ev-1" in ids else [])

    def events_held(self, tenant: str, ids: list[str]) -> int:
        return self.held

    def latents_by_id(self, tenant: str, ids: list[str]) -> list[Any]:
        return []


def _fields(e: EventRecord) -> dict[str, Any]:
    return {"user": e.user, "agent": e.agent, "stream": e.stream}


class NoHits:
    def query(self, tenant: str, *_args: Any, **_kwargs: Any) -> list[Any]:
        return []  # no event names the subject unlinked


@dataclass
class Checkout:
    """The live stores (a graph, no index open here) and checkout's recent packets."""

    store: Graph
    packets: PacketMemory = field(default_factory=PacketMemory)
    forgotten: list[str] = field(default_factory=list)

    def graph(self) -> Graph:
        return self.store

    def live(self) -> str:
        return "v1"

    def open_index(self, _info: str) -> NoHits:
        return NoHits()

    def index(self) -> None:
        return None  # this process holds no index: nothing to watch there

    def forget_tenant(self, tenant: str) -> None:
        self.forgotten.append(tenant)


@dataclass
class Keys:
    destroyed: list[tuple[str, list[str]]] = field(default_factory=list)

    def destroy(self, tenant: str, kind: str, ids: Iterable[str]) -> int:
        ids = list(ids)
        self.destroyed.append((kind, sorted(ids)))
        return len(ids)

    def tenant_secret(self, tenant: str) -> bytes:
        return b"k" * 32


def forget_service(tmp_path: Path, graph: Graph) -> tuple[ForgetService, Checkout, Keys]:
    checkout, keys = Checkout(graph), Keys()
    family = QuestionFamily(operation="lookup", entities=["ngozi"], terms=[])
    checkout.packets.remember("pk-1", RecentPacket(T, ["ev-1"], family))
    checkout.packets.remember("pk-2", RecentPacket(T, ["ev-9"], family))  # names the subject
    other = QuestionFamily(operation="lookup", entities=["idris"], terms=[])
    checkout.packets.remember("pk-3", RecentPacket(T, ["ev-9"], other))
    checkout.packets.remember("pk-4", RecentPacket("elsewhere", ["ev-1"], family))

    def topics(keys: Any, reach: Reach, events: int, recent: Iterable[str]) -> TopicsOutcome:
        assert reach.ids == {"ev-1", "ev-2", "ev-1#0", "lat-1"} and events == 2
        return TopicsOutcome(traces_shredded=len(list(recent)), topics={}, residual=[])

    service = ForgetService(
        stores=checkout,  # type: ignore[arg-type]
        packets=checkout.packets,
        reread=checkout.forget_tenant,
        keys=keys,  # type: ignore[arg-type]
        topics=topics,
        archive=tmp_path / "no-archive",
        memory={"summary_cache_entries": NothingHeld(), "recent_packets": checkout.packets},
        pending=PendingPurges("test"),
        component="test",
        clock=lambda: datetime(2031, 5, 1, tzinfo=UTC),
    )
    return service, checkout, keys


def test_a_dry_run_reports_what_would_go_and_changes_nothing(tmp_path: Path) -> None:
    service, checkout, keys = forget_service(tmp_path, Graph())
    plan = service.plan(T, "Ngozi")
    report = service.preview(plan)
    assert report.dry_run and report.tombstone_id is None and report.complete
    assert report.removed["events"] == 2 and report.removed["facts"] == 1
    assert report.removed["recent_packets"] == 2  # pk-1 cites ev-1, pk-2 named her
    assert report.removed["summary_cache_entries"] == 0
    assert keys.destroyed == [] and checkout.forgotten == []
    assert checkout.packets.get(T, "pk-1") is not None


def test_a_purge_destroys_the_keys_forgets_what_it_holds_and_watches(tmp_path: Path) -> None:
    service, checkout, keys = forget_service(tmp_path, Graph())
    plan = service.plan(T, "Ngozi")
    [event] = service.tombstones(plan)
    assert event.type == "memory.purge" and event.payload.event_ids == ["ev-1", "ev-2"]
    assert "ngozi" not in event.model_dump_json().lower()  # named by digest only
    report = service.carry_out(plan, [event.id], wait_s=0)
    assert report.tombstone_ids == [event.id] and report.tombstone_id == event.id
    assert keys.destroyed == [("event", ["ev-1", "ev-2"]), ("latent", ["lat-1"])]
    assert report.removed["data_keys"] == 2 and report.removed["artifact_keys"] == 1
    assert report.removed["checkout_traces"] == 2 and report.removed["recent_packets"] == 2
    assert checkout.packets.get(T, "pk-1") is None and checkout.packets.get(T, "pk-2") is None
    assert checkout.packets.get(T, "pk-3") is not None  # neither cites nor names her
    assert checkout.packets.get("elsewhere", "pk-4") is not None  # another tenant's
    assert T in checkout.forgotten  # parsed artifacts and lexicons go too
    assert report.complete and report.completed == {"graph": True, "latents": True}


def test_a_store_that_has_not_obeyed_leaves_the_purge_pending(tmp_path: Path) -> None:
    service, _, _ = forget_service(tmp_path, Graph(held=1))
    plan = service.plan(T, "Ngozi")
    report = service.carry_out(plan, ["tomb-1"], wait_s=0)
    assert not report.complete and report.completed["graph"] is False
    assert service.pending.oldest_age() >= 0.0 and "tomb-1" in service.pending._since


@pytest.mark.parametrize("subject", ["!!!", "¿ ?", "()"])
def test_a_subject_without_a_letter_names_nothing(tmp_path: Path, subject: str) -> None:
    service, _, _ = forget_service(tmp_path, Graph())
    with pytest.raises(NoSubject):
        service.plan(T, subject)


def test_a_tombstone_from_another_replica_forgets_what_this_one_holds() -> None:
    """No subject key travels: the tombstone's digest finds it among the entities this
    process's packets named; packets citing a purged event go too."""
    secret = b"s" * 32
    memory = PacketMemory()
    subject = entity_key("Zoë Åberg-Lind")
    named = QuestionFamily(operation="lookup", entities=[subject])
    other = QuestionFamily(operation="lookup", entities=[entity_key("Bartholomé")])
    memory.remember("pk-cites", RecentPacket(T, ["ev-1"], other))
    memory.remember("pk-names", RecentPacket(T, ["ev-7"], named))
    memory.remember("pk-keeps", RecentPacket(T, ["ev-7"], other))
    memory.remember("pk-elsewhere", RecentPacket("elsewhere", ["ev-1"], named))
    order = PurgeOrder(T, "tomb-1", ("ev-1",), subject_digest(secret, T, subject))
    gone = forget_ordered(order, {"recent_packets": memory}, memory.named(T), secret)
    assert gone == {"recent_packets": 2}
    kept = [p for p in ("pk-cites", "pk-names", "pk-keeps") if memory.get(T, p)]
    assert kept == ["pk-keeps"] and memory.get("elsewhere", "pk-elsewhere") is not None


def test_a_tombstone_whose_digest_matches_nothing_forgets_by_ids_alone() -> None:
    secret = b"s" * 32
    memory = PacketMemory()
    family = QuestionFamily(operation="lookup", entities=[entity_key("Ines")])
    memory.remember("pk-1", RecentPacket(T, ["ev-9"], family))
    order = PurgeOrder(T, "tomb-2", ("ev-1",), subject_digest(b"another secret!!" * 2, T, "ines"))
    assert forget_ordered(order, {"p": memory}, memory.named(T), secret) == {"p": 0}
    assert memory.get(T, "pk-1") is not None


def test_a_dry_run_lists_every_event_in_time_order_collateral_included(tmp_path: Path) -> None:
    service, _, _ = forget_service(tmp_path, Graph())
    report = service.preview(service.plan(T, "Ngozi"))
    listed = [(e.event_id, e.user, e.agent, e.stream) for e in report.events]
    # her own turn first (earlier), then Idris's turn that mentions her: visible before it goes
    assert listed == [
        ("ev-2", "ngozi", "coach", "ngozi.chat"),
        ("ev-1", "idris", "coach", "idris.chat"),
    ]
    assert report.events[0].occurred_at == datetime(2031, 4, 1, 9, tzinfo=UTC)


def test_a_scoped_key_purges_only_inside_its_scope(tmp_path: Path) -> None:
    service, _, _ = forget_service(tmp_path, Graph())
    plan = service.plan(T, "Ngozi", within=Scope(user=["ngozi"]))
    assert plan.scope.event_ids == ["ev-2"] and [e.event_id for e in plan.events] == ["ev-2"]
    assert plan.scope.latent_ids == []  # the artifact rests on ev-1, which stays


def test_a_scope_purge_reaches_the_scope_events_and_names_no_entity(tmp_path: Path) -> None:
    service, _, _ = forget_service(tmp_path, Graph())
    plan = service.plan_scope(T, Scope(user=["idris"], agent=["coach"]))
    assert plan.scope.event_ids == ["ev-1"] and plan.key == "" and plan.forms == frozenset()
    assert plan.subject == "user=idris agent=coach"
    [event] = service.tombstones(plan)
    assert event.payload.event_ids == ["ev-1"] and "idris" not in event.model_dump_json()
    report = service.preview(plan)
    assert [e.event_id for e in report.events] == ["ev-1"] and report.subject_key == ""


def test_a_purge_of_many_events_is_written_in_parts_that_fit_a_record() -> None:
    ids = [str(uuid.uuid4()) for _ in range(TOMBSTONE_EVENT_IDS * 2 + 1)]
    now = datetime(2026, 3, 1, tzinfo=UTC)
    parts = tombstones(T, "scope:user=ana lúcia", PurgeScope(ids, [], []), now, b"k" * 32)
    assert [len(p.payload.event_ids) for p in parts] == [
        TOMBSTONE_EVENT_IDS,
        TOMBSTONE_EVENT_IDS,
        1,
    ]
    assert [i for p in parts for i in p.payload.event_ids] == ids
    assert len({p.id for p in parts}) == 3 and len({p.payload.subject for p in parts}) == 1
    limit = Settings().max_record_bytes
    assert all(len(p.model_dump_json().encode()) < limit // 2 for p in parts)
    assert "lúcia" not in parts[0].model_dump_json()
    # a purge reaching nothing still records itself once
    [empty] = tombstones(T, "nobody", PurgeScope([], [], []), now, b"k" * 32)
    assert empty.payload.event_ids == []
