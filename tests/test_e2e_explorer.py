"""The explorer in a real headless Chromium against the running stack.

Two sessions told by "Anaïs Dubois-Lefèvre" and "the user" become episodes; the page searches
at the episode altitude, drills from the episode to exactly that session's ledger events (seq
and hash as the ledger holds them), shows a checkout packet with its citations' ledger refs,
shows the API's reason for a bad key, and prints event text as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from memstream.client import MemoryHttpClient
from playwright.sync_api import Browser, Page, expect, sync_playwright
from stackproc import RunningStack, memstream, wait_until
from test_e2e_learning import settled

TENANT = "atelier.apicole"
PERSON = "Anaïs Dubois-Lefèvre"
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
XSS = '<img src=x onerror="window.__pwned = 1">'


def turn(i: str, stream: str, at: str, agent: str, text: str) -> dict[str, Any]:
    return {"id": i, "stream": stream, "type": "message.user", "agent": agent,
            "occurred_at": at, "payload": {"text": text}}  # fmt: skip


HIVES = [
    turn("hive-1", "ruches:nord", "2026-04-11T09:00:00Z", PERSON,
         "I opened the three beehives behind the orchard for the spring inspection."),
    turn("hive-2", "ruches:nord", "2026-04-11T09:04:00Z", "the user",
         "Did the second beehive have a laying queen?"),
    turn("hive-3", "ruches:nord", "2026-04-11T09:07:00Z", PERSON,
         "Yes, fresh eggs in the second beehive; I added a honey super to the third one."),
]  # fmt: skip
VIOLIN = [
    turn("violin-1", "atelier", "2026-04-14T16:00:00Z", "the user",
         "The luthier quoted 240 euros to reglue the violin's cracked top."),
    turn("violin-2", "atelier", "2026-04-14T16:02:00Z", PERSON,
         f"Put the luthier's violin invoice note under {XSS} in the folder."),
]  # fmt: skip


@pytest.fixture(scope="module")
def key(stack: RunningStack) -> str:
    return memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout.strip()


@pytest.fixture(scope="module")
def http(stack: RunningStack, key: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=stack.api_url, headers=headers, timeout=60) as c:
        yield c


def hive_episode(http: httpx.Client) -> str | None:
    """The episode search finds for the hive session, once it is projected."""
    resp = http.post(
        "/v1/search", json={"query": "beehive spring inspection", "altitude": "episode"}
    )
    hits = resp.json()["hits"] if resp.status_code == 200 else []
    ids = [h["id"] for h in hits if h["sources"] == [t["id"] for t in HIVES]]
    return ids[0] if ids else None


@pytest.fixture(scope="module")
def episode(stack: RunningStack, key: str, http: httpx.Client) -> str:
    MemoryHttpClient(stack.api_url, key).emit([*HIVES, *VIOLIN])

    def built() -> bool:
        resp = http.get("/v1/latents", params={"type": "episode_latent"})
        return resp.status_code == 200 and len(resp.json()["artifacts"]) == 2 and settled(stack)

    wait_until(built, 120, "both episodes built and projected")
    wait_until(lambda: hive_episode(http) is not None, 60, "the hive episode searchable")
    found = hive_episode(http)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # A fresh context per test: its own sessionStorage, so no test inherits a key.
    context = browser.new_context(viewport={"width": 1440, "height": 1100})
    try:
        yield context.new_page()
    finally:
        context.close()


def open_with_key(page: Page, stack: RunningStack, key: str) -> None:
    page.goto(f"{stack.api_url}/explorer")
    page.get_by_label("API key").fill(key)
    page.get_by_test_id("key-submit").click()
    expect(page.get_by_test_id("key-state")).to_be_visible()
    expect(page.get_by_test_id("key-form")).to_be_hidden()


def search(page: Page, query: str, altitude: str) -> None:
    page.get_by_label("Search", exact=True).fill(query)
    page.get_by_label("at altitude").select_option(altitude)
    page.get_by_test_id("search-submit").click()


def ledger_refs(stack: RunningStack, ids: list[str]) -> list[tuple[str, str, int, str]]:
    """(id, stream, seq, hash) of ``ids`` as the ledger topic holds them, in ``ids`` order."""
    by_id = {e["id"]: e for e in stack.ledger() if e["tenant"] == TENANT}
    return [(i, by_id[i]["stream"], by_id[i]["seq"], by_id[i]["hash"]) for i in ids]


def shown_leaves(page: Page) -> list[tuple[str, str, int, str]]:
    leaves = page.get_by_test_id("leaf")
    return [
        (
            str(leaf.get_attribute("data-event-id")),
            leaf.get_by_test_id("ref").inner_text().split(" / ")[1].split(" #")[0],
            int(str(leaf.get_attribute("data-seq"))),
            str(leaf.get_attribute("data-hash")),
        )
        for leaf in leaves.all()
    ]


def test_drills_from_an_episode_to_its_ledger_events(
    stack: RunningStack, key: str, http: httpx.Client, episode: str, page: Page
) -> None:
    open_with_key(page, stack, key)
    search(page, "which morning did we look into the beehives?", "episode")
    result = page.locator(f'[data-testid="result"][data-id="{episode}"]')
    expect(result).to_contain_text("episode_latent")
    result.click()
    want = [t["id"] for t in HIVES]
    expect(page.get_by_test_id("source")).to_have_count(len(want))
    assert [s.get_attribute("data-id") for s in page.get_by_test_id("source").all()] == want
    expect(page.get_by_test_id("leaf")).to_have_count(len(want))
    lineage = http.get(f"/v1/lineage/{episode}").json()
    from_api = [(r["event_id"], r["stream"], r["seq"], r["hash"]) for r in lineage["leaves"]]
    assert [(e["event_id"], e["agent"]) for e in lineage["events"]] == [
        (t["id"], t["agent"]) for t in HIVES
    ]
    assert shown_leaves(page) == from_api == ledger_refs(stack, want)
    texts = page.get_by_test_id("leaf-text").all_inner_texts()
    assert texts == [t["payload"]["text"] for t in HIVES]
    first_hash = from_api[0][3]
    expect(page.get_by_test_id("hash").first).to_have_attribute("title", first_hash)
    # one source: its own leaf, the one ledger event
    page.locator('[data-testid="source"][data-id="hive-2"]').click()
    expect(page.get_by_test_id("leaf")).to_have_count(1)
    assert shown_leaves(page) == ledger_refs(stack, ["hive-2"])
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "explorer.png"
    page.locator('[data-testid="source"][data-id="hive-1"]').click()
    page.screenshot(path=str(shot), full_page=True)
    print(f"explorer screenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_packet_viewer_shows_answer_evidence_and_ledger_refs(
    stack: RunningStack, key: str, http: httpx.Client, episode: str, page: Page
) -> None:
    question = "How much did the luthier quote to reglue the violin?"
    packet = http.post("/v1/checkout", json={"query": question}).json()
    open_with_key(page, stack, key)
    page.get_by_label("Question").fill(question)
    page.get_by_test_id("checkout-submit").click()
    expect(page.get_by_test_id("answerability")).to_have_text(packet["answerability"])
    answers = [a["answer"] for a in packet["answer_candidates"]]
    assert answers and "240" in answers[0], packet
    expect(page.get_by_test_id("answer").first).to_have_text(answers[0])
    expect(page.get_by_test_id("evidence-row")).to_have_count(len(packet["evidence"]))
    expect(page.get_by_test_id("fact")).to_have_count(len(packet["facts"]))
    expect(page.get_by_test_id("snippet")).to_have_count(len(packet["snippets"]))
    # the top answer's citation shows the ledger ref of its event
    cited = packet["answer_candidates"][0]["support_ids"][0]
    citation = page.locator(f'[data-testid="answers"] [data-testid="citation"][data-id="{cited}"]')
    event_id = cited.split("#", 1)[0]
    [(_, stream, seq, hash_)] = ledger_refs(stack, [event_id])
    ref = citation.get_by_test_id("ref")
    expect(ref).to_contain_text(f"{TENANT} / {stream} #{seq}")
    expect(ref).to_have_attribute("data-hash", hash_)
    # its lineage link opens the drill-down at that item
    citation.get_by_test_id("lineage-link").click()
    expect(page.get_by_test_id("trail-step")).to_have_text([cited])
    expect(page.get_by_test_id("leaf")).to_have_count(1)
    assert shown_leaves(page) == ledger_refs(stack, [event_id])
    shot = ARTIFACTS / "explorer-packet.png"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(shot), full_page=True)
    print(f"explorer packet screenshot: {shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_bad_key_shows_the_reason_and_asks_again(
    stack: RunningStack, episode: str, page: Page
) -> None:
    open_with_key(page, stack, "not-a-key-" + "x" * 20)
    search(page, "beehive", "episode")
    expect(page.get_by_test_id("error")).to_have_text(
        "Not authorized: invalid API key (unknown or revoked)"
    )
    expect(page.get_by_test_id("key-form")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.get_by_test_id("result")).to_have_count(0)


def test_event_text_is_shown_as_text_never_as_markup(
    stack: RunningStack, key: str, episode: str, page: Page
) -> None:
    open_with_key(page, stack, key)
    search(page, "luthier violin invoice folder", "event")
    result = page.locator('[data-testid="result"][data-id="violin-2"]')
    expect(result.get_by_test_id("result-text")).to_have_text(VIOLIN[1]["payload"]["text"])
    result.click()
    expect(page.get_by_test_id("leaf-text")).to_have_text([VIOLIN[1]["payload"]["text"]])
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    assert XSS in page.get_by_test_id("leaves").inner_text()


HOSTILE_AGENT = '<img src=x onerror="window.__pwned = 2">'
HOSTILE_LINK = "[the manual](javascript:window.__pwned=3)"
HOSTILE = [
    turn("wax-1", "cire:sud", "2026-04-20T10:00:00Z", HOSTILE_AGENT,
         f"The beeswax candle order is 48 candles; see {HOSTILE_LINK} <script>window.__pwned=4"
         "</script> for the moulds."),
    turn("wax-2", "cire:sud", "2026-04-20T10:05:00Z", "the user",
         "How many beeswax candles did we order? `<b>` ```"),
]  # fmt: skip


def test_hostile_values_in_a_packet_render_as_text_in_the_page(
    stack: RunningStack, key: str, http: httpx.Client, episode: str, page: Page
) -> None:
    """Agent names, link syntax, script and backticks from memory: on the page as text."""
    MemoryHttpClient(stack.api_url, key).emit(HOSTILE)
    question = "How many beeswax candles were ordered?"

    def retrieved() -> bool:
        packet = http.post("/v1/checkout", json={"query": question}).json()
        return "wax-1" in {s["item_id"] for s in packet.get("snippets", [])}

    wait_until(retrieved, 90, "the hostile turn in a checkout's snippets")
    open_with_key(page, stack, key)
    page.get_by_label("Question").fill(question)
    page.get_by_test_id("checkout-submit").click()
    snippet = page.locator('[data-testid="snippet"]').filter(has_text="beeswax candle order")
    expect(snippet).to_have_count(1)
    shown = snippet.inner_text()
    assert HOSTILE_AGENT in shown and HOSTILE_LINK in shown and "<script>" in shown
    assert page.locator("img").count() == 0 and page.locator("script:not([src])").count() == 0
    links = page.locator("a").evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")
    assert not [h for h in links if h and "javascript" in h.lower()], links
    assert page.evaluate("window.__pwned === undefined")
