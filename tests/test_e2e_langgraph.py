"""memstream as a LangGraph store, against a running stack: put, get, search by meaning,
delete and list namespaces, sync and async; and a compiled graph that remembers in one run
and recalls, through a new store object, in the next."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from leakscan import files_holding, no_file_holds, topics_holding
from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.integrations.langgraph import KEY, NAMESPACE, VALUE, MemstreamStore, stream_of
from stackproc import RunningStack, memstream, wait_until

TENANT = "lg-atelier"
PERSON = ("people", "Zofia Wróbel-Ngata")  # accented, several words


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture
def store(stack: RunningStack, key: str) -> Iterator[MemstreamStore]:
    s = MemstreamStore(stack.api_url, key, user_at=1)
    yield s
    s.close()


def test_put_get_update_delete_read_their_own_writes(store: MemstreamStore) -> None:
    ns = (*PERSON, "kiln")
    store.put(ns, "favourite", {"glaze": "shino", "cone": 10})
    got = store.get(ns, "favourite")
    assert got is not None and got.value == {"glaze": "shino", "cone": 10}
    store.put(ns, "favourite", {"glaze": "tenmoku", "cone": 9})
    again = store.get(ns, "favourite")
    assert again is not None and again.value["glaze"] == "tenmoku"
    assert again.created_at <= again.updated_at and again.created_at == got.created_at
    store.delete(ns, "favourite")
    assert store.get(ns, "favourite") is None
    assert store.get(ns, "never-written") is None
    assert store.get(("people", "someone else", "kiln"), "favourite") is None


def test_search_ranks_by_meaning_and_filters(store: MemstreamStore) -> None:
    ns = (*PERSON, "notes")
    store.put(ns, "n1", {"text": "fires the wood kiln only at dusk in autumn", "kind": "habit"})
    store.put(
        ns, "n2", {"text": "owes the clay supplier for two bags of porcelain", "kind": "debt"}
    )
    store.put(ns, "n3", {"text": "prefers raku firings with horsehair", "kind": "habit"})
    found = store.search(PERSON, query="when does she fire the wood kiln?", limit=2)
    assert found and found[0].key == "n1" and found[0].score is not None
    habits = store.search(PERSON, filter={"kind": "habit"}, limit=10)
    assert {i.key for i in habits} == {"n1", "n3"}
    assert {i.key for i in store.search(("people",), filter={"kind": {"$ne": "habit"}})} >= {"n2"}
    assert store.search(("nobody",)) == []


def test_namespaces_list_by_prefix_suffix_and_depth(store: MemstreamStore) -> None:
    store.put((*PERSON, "kiln"), "k", {"x": 1})
    store.put(("studio", "Ostrowo", "kiln"), "k", {"x": 2})
    listed = store.list_namespaces(prefix=("people",))
    assert (*PERSON, "kiln") in listed and all(ns[0] == "people" for ns in listed)
    assert ("studio", "Ostrowo", "kiln") in store.list_namespaces(suffix=("kiln",))
    assert store.list_namespaces(prefix=("studio",), max_depth=2) == [("studio", "Ostrowo")]
    assert stream_of((*PERSON, "kiln")) != stream_of(("people", "Zofia Wróbel Ngata", "kiln"))


def test_the_async_api_does_the_same(store: MemstreamStore) -> None:
    ns = (*PERSON, "async")

    async def run() -> tuple[Any, Any, Any]:
        await store.aput(ns, "a", {"text": "glazes in a cold studio"})
        got = await store.aget(ns, "a")
        found = await store.asearch(ns, query="cold studio glaze")
        await store.adelete(ns, "a")
        return got, found, await store.aget(ns, "a")

    got, found, gone = asyncio.run(run())
    assert got.value == {"text": "glazes in a cold studio"} and found[0].key == "a"
    assert gone is None


class State(TypedDict, total=False):
    said: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> State:
    store.put((*PERSON, "memories"), "m1", {"text": state["said"]})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search((*PERSON, "memories"), query=state["said"], limit=3)
    return {"recalled": [h.value["text"] for h in hits]}


def graph(store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_conditional_edges(
        START, lambda s: "remember" if s["said"].startswith("note:") else "recall"
    )
    builder.add_edge("remember", END)
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_compiled_graph_remembers_in_one_run_and_recalls_in_the_next(
    stack: RunningStack, key: str
) -> None:
    first = MemstreamStore(stack.api_url, key, user_at=1)
    graph(first).invoke({"said": "note: Zofia bisque-fires her bowls at 950 °C before glazing"})
    first.close()
    second = MemstreamStore(stack.api_url, key, user_at=1)  # a new run: nothing in common
    asked: dict[str, Any] = {}

    def recalled() -> bool:
        asked.update(graph(second).invoke({"said": "what temperature does she bisque at?"}))
        return any("950 °C" in r for r in asked.get("recalled", []))

    wait_until(recalled, 90, "the second run recalling the first run's memory")
    second.close()


def test_a_key_scoped_to_one_user_keeps_to_that_users_namespaces(
    stack: RunningStack, store: MemstreamStore
) -> None:
    store.put(("people", "Ilse Brandt", "kiln"), "k", {"text": "Ilse's own note"})
    done = memstream("keys", "create", "--tenant", TENANT, "--scope", f"user={PERSON[1]}",
                     data_dir=stack.data_dir)  # fmt: skip
    scoped = MemstreamStore(stack.api_url, done.stdout.strip(), user_at=1)
    scoped.put((*PERSON, "scoped"), "s", {"text": "written under her own key"})
    assert scoped.get((*PERSON, "scoped"), "s") is not None
    with pytest.raises(MemstreamHttpError) as refused:
        scoped.put(("people", "Ilse Brandt", "kiln"), "k2", {"text": "not hers"})
    assert refused.value.status == 403
    assert scoped.get(("people", "Ilse Brandt", "kiln"), "k") is None
    listed = scoped.list_namespaces(prefix=("people",))
    assert listed and all(ns[1] == PERSON[1] for ns in listed)
    scoped.close()


def test_a_key_written_before_a_thousand_other_writes_is_still_found(
    stack: RunningStack, key: str, store: MemstreamStore
) -> None:
    ns = (*PERSON, "busy")
    store.put(ns, "early", {"text": "the first firing log"})
    other = {"type": "observation", "stream": stream_of(ns, user_at=1), "user": PERSON[1],
             "metadata": {KEY: "", NAMESPACE: "[]"}}  # fmt: skip
    filler = [{**other, "payload": {"text": f"someone else's write {i}"}} for i in range(1_200)]
    filler[-1]["metadata"] = {KEY: "late", NAMESPACE: json.dumps(list(ns)), VALUE: '{"n": 1}'}
    with MemoryHttpClient(stack.api_url, key) as client:
        _ids, position = client.emit_written(filler)
        newest = client.stream_events(stream_of(ns, user_at=1), limit=1000, after=position)
        assert len(newest) == 1000 and newest[0]["metadata"][KEY] == "late"
        assert "early" not in {e["metadata"].get(KEY) for e in newest}
        history = list(client.stream_history(stream_of(ns, user_at=1), after=position, page=500))
    assert len(history) == 1_201 and [e["seq"] for e in history] == sorted(
        (e["seq"] for e in history), reverse=True
    )
    early = store.get(ns, "early")
    assert early is not None and early.value == {"text": "the first firing log"}
    assert [i.key for i in store.search(ns, limit=5)] == ["late", "early"]


def test_a_namespace_is_registered_once_per_store(
    store: MemstreamStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[list[dict[str, Any]]] = []
    client = store._client
    real = client.emit_written

    def counted(events: list[dict[str, Any]]) -> tuple[list[str], str]:
        sent.append(events)
        return real(events)

    monkeypatch.setattr(client, "emit_written", counted)
    ns = (*PERSON, "glazes")
    for glaze in ("celadon", "ash", "celadon"):
        store.put(ns, glaze, {"text": f"{glaze} glaze on stoneware"})
    assert [len(batch) for batch in sent] == [2, 1, 1]  # the register with the first write only
    assert ns in store.list_namespaces(prefix=PERSON)


def test_only_the_first_page_of_a_history_waits_for_the_position(
    stack: RunningStack, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str | None] = []
    with MemoryHttpClient(stack.api_url, key) as client:
        events = [{"type": "observation", "stream": "lg-pages", "payload": {"text": f"n {i}"}}
                  for i in range(5)]  # fmt: skip
        _ids, position = client.emit_written(events)
        real = client._stream_page

        def paged(stream: str, limit: int, after: str | None, before: int | None) -> Any:
            asked.append(after)
            return real(stream, limit, after, before)

        monkeypatch.setattr(client, "_stream_page", paged)
        got = list(client.stream_history("lg-pages", after=position, page=2))
    assert [e["text"] for e in got] == [f"n {i}" for i in reversed(range(5))]
    assert asked == [position, None, None]


def test_a_nul_in_a_key_is_refused_with_its_reason_and_the_store_goes_on(
    store: MemstreamStore,
) -> None:
    ns = (*PERSON, "hostile")
    with pytest.raises(MemstreamHttpError) as refused:
        store.put(ns, "nul\x00key", {"text": "a"})
    assert refused.value.status == 422 and "U+0000" in str(refused.value)
    assert store.get(ns, "nul\x00key") is None
    # a value is a JSON document: its NUL and control characters are kept as it holds them
    odd = {"text": "a NUL \x00, a bell \x07 and a tab\t", "nested": ["\x1b[0m"]}
    store.put(ns, "after", odd)
    got = store.get(ns, "after")
    assert got is not None and got.value == odd


def test_a_nul_in_a_namespace_is_refused_before_anything_is_sent(store: MemstreamStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("people", "nul\x00part"), "k", {"text": "a"})


def test_a_purge_during_reads_fails_no_read_and_leaves_nothing_of_the_user(
    stack: RunningStack, key: str
) -> None:
    """A user's namespaces purged (``DELETE /v1/scopes``) while another store object reads
    them and a neighbour's: every read answers throughout, the neighbour's items never
    waver, and afterwards no read, record or file holds the user's values or name."""
    gone_user, kept_user = "Ørjan Vikstrøm-Lau", "Beatriz Quintela"
    gone_ns, kept_ns = ("potters", gone_user, "glazes"), ("potters", kept_user, "glazes")
    writer = MemstreamStore(stack.api_url, key, user_at=1)
    for i in range(5):
        writer.put(gone_ns, f"g{i}", {"text": f"celadon glaze qvx{i}rk fired at cone six"})
        writer.put(kept_ns, f"k{i}", {"text": f"tenmoku glaze {i} fired at cone ten"})
    writer.close()
    reader = MemstreamStore(stack.api_url, key, user_at=1)
    wait_until(lambda: reader.get(gone_ns, "g4") is not None, 60, "the writes applied")
    failures: list[str] = []
    reads = 0
    stop = threading.Event()

    def read_on() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                reader.get(gone_ns, "g0")
                reader.search(("potters",), query="glaze fired at cone", limit=20)
                reader.list_namespaces(prefix=("potters",))
                if reader.get(kept_ns, "k3") is None:
                    failures.append("the neighbour's item went missing")
            except Exception as exc:  # every kind counts: the reads must all answer
                failures.append(repr(exc))
            reads += 1

    thread = threading.Thread(target=read_on, daemon=True)
    thread.start()
    with MemoryHttpClient(stack.api_url, key, timeout=180) as admin:
        report = admin.purge_scope({"user": gone_user}, wait_s=90)
    done_at = reads
    wait_until(lambda: reads >= done_at + 3, 60, "reads after the purge")
    stop.set()
    thread.join(timeout=60)
    assert report["complete"] is True and report["removed"]["events"] >= 5, report
    assert failures == [] and done_at > 0, failures[:5]
    assert reader.get(gone_ns, "g0") is None
    found = reader.search(("potters",), query="celadon glaze fired at cone six", limit=50)
    assert {i.namespace for i in found} == {kept_ns}
    assert gone_ns not in reader.list_namespaces(prefix=("potters",))
    assert reader.get(kept_ns, "k3") is not None
    reader.close()
    markers = (*(f"qvx{i}rk" for i in range(5)), "Vikstr")
    assert topics_holding(stack.bootstrap, markers) == {}
    no_file_holds(stack.data_dir, markers, timeout=120)
    assert files_holding(stack.data_dir.parent / f"{stack.data_dir.name}-up.log", markers) == {}


def test_the_users_part_of_a_namespace_stays_out_of_its_streams_name() -> None:
    ns = ("memories", "Ørjan Vikstrøm-Lau", "kiln")
    assert "Vikstr" in stream_of(ns) and "Vikstr" not in stream_of(ns, user_at=1)
    assert stream_of(ns, user_at=1).startswith("lg.memories.kiln.")
    # the digest still tells one user's namespace from another's
    assert stream_of(ns, user_at=1) != stream_of(("memories", "Beatriz", "kiln"), user_at=1)
