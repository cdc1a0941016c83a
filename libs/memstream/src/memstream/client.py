"""``MemoryHttpClient``: the HTTP API from Python (ingest, checkout, recall, summarize_recall,
search, feedback, lineage, latent artifacts, purges, the calling key).

Every read takes ``scope``: ``{"user": …, "agent": …, "stream": …}``, each a value or a list
(AND across fields, OR within one); ``stream=`` is shorthand for its stream."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx

from memstream.checkout.retrieve.config import LEVERS


class MemstreamError(RuntimeError):
    """The API could not be reached or refused the call; ``str()`` is one line naming what
    failed and what to do."""


# What a caller can do about each refusal, after the server's own reason.
_NEXT_STEP = {
    400: "send a body that decodes as JSON",
    401: "check the API key (MEMSTREAM_API_KEY or --key): missing, unknown or revoked",
    403: "use a key with that permission and scope (memstream keys create)",
    404: "check the id or path",
    408: "send the request again",
    413: "send less: split the batch or shorten the event",
    422: "correct the field named",
    429: "slow down: retry after the seconds the server gave",
    503: "the stack is starting or a store is down: retry in a few seconds",
}


class MemstreamHttpError(MemstreamError):
    """A 4xx/5xx from the API: ``status``, ``detail`` (the server's reason) and, in the
    message, the call that failed and what to do."""

    def __init__(self, status: int, detail: str, call: str = "") -> None:
        step = _NEXT_STEP.get(status, "the API failed: see its log" if status >= 500 else "")
        where = f"{call} " if call else ""
        then = f" — {step}" if step else ""
        super().__init__(f"{where}refused (HTTP {status}): {detail}{then}")
        self.status = status
        self.detail = detail


class MemstreamUnreachableError(MemstreamError, ConnectionError):
    """No answer from the API: nothing listens at the address, or it did not answer in time."""

    def __init__(self, base_url: str, why: str) -> None:
        super().__init__(
            f"memstream API at {base_url} {why} — is the stack running (memstream up, "
            "memstream status) and is this its address?"
        )
        self.base_url = base_url


def _reason(resp: httpx.Response) -> str:
    """The server's ``detail`` on one line (a validation refusal's fields joined)."""
    try:
        doc = resp.json()
    except ValueError:
        return " ".join(resp.text.split())[:300] or resp.reason_phrase
    detail = doc.get("detail") if isinstance(doc, dict) else None
    problems = doc.get("errors") if isinstance(doc, dict) else None
    if isinstance(problems, list) and problems:
        return "; ".join(
            f"{p.get('field') or 'body'}: {p.get('message')}"
            for p in problems
            if isinstance(p, dict)
        )
    if isinstance(detail, list):  # FastAPI's own shape, where a route answers it
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
    return " ".join(str(detail if detail is not None else doc).split())


class StaleRead(UserWarning):
    """A read given ``after=`` answered before every projection it reads applied that
    position (the answer's stale warning, raised as a Python warning where the client returns
    only the items)."""


ScopeArg = Mapping[str, str | list[str]]


def _scoped(body: dict[str, Any], scope: ScopeArg | None, stream: str | None) -> dict[str, Any]:
    """``body`` with the read's scope and stream shorthand, where given."""
    if scope is not None:
        body["scope"] = dict(scope)
    if stream is not None:
        body["stream"] = stream
    return body


def _scope_params(scope: ScopeArg | None) -> list[tuple[str, str | int]]:
    """A scope as repeated query parameters (``user=a&user=b&agent=c``)."""
    params: list[tuple[str, str | int]] = []
    for field, values in (scope or {}).items():
        params += [(field, v) for v in ([values] if isinstance(values, str) else values)]
    return params


def _first(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _warn_stale(doc: dict[str, Any]) -> None:
    for w in doc.get("warnings") or []:
        if isinstance(w, dict) and w.get("kind") == "stale":
            warnings.warn(StaleRead(str(w.get("message", ""))), stacklevel=3)


class MemoryHttpClient:
    """One tenant's view of memstream over HTTP (the key decides the tenant)."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
        )

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        base = str(self._http.base_url).rstrip("/")
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.ConnectError as exc:
            raise MemstreamUnreachableError(base, f"cannot be reached ({_first(exc)})") from exc
        except httpx.TimeoutException as exc:
            raise MemstreamUnreachableError(base, "did not answer in time") from exc
        except httpx.TransportError as exc:
            raise MemstreamUnreachableError(base, f"broke the connection ({_first(exc)})") from exc
        if resp.status_code >= 400:
            raise MemstreamHttpError(resp.status_code, _reason(resp), f"{method} {path}")
        return resp

    def emit(self, events: list[dict[str, Any]]) -> list[str]:
        """Post events (envelopes without tenant); returns their ids once produced."""
        return self.emit_written(events)[0]

    def emit_written(self, events: list[dict[str, Any]]) -> tuple[list[str], str]:
        """Post events like :meth:`emit`; returns their ids and the write's position, an
        opaque token a later read can wait for (``after``) to see them."""
        body = self._call("POST", "/v1/events", json={"events": events}).json()
        return list(body["ids"]), str(body["position"])

    def checkout(
        self,
        query: str,
        *,
        as_of: datetime | str | None = None,
        max_tokens: int = 1500,
        k: int = 10,
        stream: str | None = None,
        scope: ScopeArg | None = None,
        purpose: str | None = None,
        task_id: str | None = None,
        format: Literal["json", "markdown", "gathered"] = "json",
        preset: Literal["plain", "checkout", "learned", "wide"] | None = None,
        episode_lane: bool | None = None,
        time_lane: bool | None = None,
        second_hop: bool | None = None,
        rerank: bool | None = None,
        top_votes: bool | None = None,
        text_rows: bool | None = None,
        expand: bool | None = None,
        coverage: bool | None = None,
        after: str | None = None,
        levers: Mapping[str, bool] | None = None,
        explain: bool = False,
    ) -> Any:
        """The packet as a dict (``json``) or the rendered Markdown text; ``task_id`` ties it
        to the task whose ``task.outcome`` memory learns from; ``preset`` names the levers to
        start from (None: the service's ``checkout``); ``episode_lane`` turns the
        episode lane on or off, ``time_lane``, ``second_hop``, ``rerank``, ``top_votes``,
        ``expand`` and ``coverage`` the query-side levers, ``text_rows`` the packet's text rows
        (None: the service default); ``levers`` switches levers by their request names (a
        caller that picks the lever at run time), over the named arguments; ``explain``: with
        the ``calibrated`` lever, ``meta.answerable`` also gives the features it read."""
        body: dict[str, Any] = {"query": query, "max_tokens": max_tokens, "k": k, "format": format}
        if explain:
            body["explain"] = True
        if as_of is not None:
            body["as_of"] = as_of.isoformat() if isinstance(as_of, datetime) else as_of
        _scoped(body, scope, stream)
        if purpose is not None:
            body["purpose"] = purpose
        if task_id is not None:
            body["task_id"] = task_id
        if after is not None:
            body["after"] = after
        if preset is not None:
            body["preset"] = preset
        named = {"episode_lane": episode_lane, "time_lane": time_lane, "second_hop": second_hop}
        named |= {"rerank": rerank, "top_votes": top_votes, "text_rows": text_rows}
        named |= {"expand": expand, "coverage": coverage}
        body |= {name: on for name, on in named.items() if on is not None}
        unknown = set(levers or {}) - set(LEVERS)
        if unknown:  # a lever's name only: never a way to overwrite the query or the format
            raise ValueError(f"unknown levers: {', '.join(sorted(unknown))}")
        body |= dict(levers or {})
        resp = self._call("POST", "/v1/checkout", json=body)
        return resp.json() if format == "json" else resp.text

    def recall(
        self,
        query: str,
        k: int = 10,
        stream: str | None = None,
        mode: Literal["fused", "hybrid", "dense", "sparse"] = "fused",
        as_of: datetime | str | None = None,
        after: str | None = None,
        scope: ScopeArg | None = None,
    ) -> list[dict[str, Any]]:
        """Raw top-k items: every lane fused, or one vector-index lane."""
        body: dict[str, Any] = {"query": query, "k": k, "mode": mode}
        if as_of is not None:
            body["as_of"] = as_of.isoformat() if isinstance(as_of, datetime) else as_of
        _scoped(body, scope, stream)
        if after is not None:
            body["after"] = after
        doc = self._call("POST", "/v1/recall", json=body).json()
        _warn_stale(doc)
        items: list[dict[str, Any]] = doc["items"]
        return items

    def ranked(
        self, query: str, k: int = 10, preset: str = "checkout"
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The top-k as a checkout with ``preset`` orders it, and the fused top before any
        reordering, each item's id with the features a ranker reads (``explain``)."""
        body = {"query": query, "k": k, "preset": preset, "explain": True}
        doc = self._call("POST", "/v1/recall", json=body).json()
        _warn_stale(doc)
        return list(doc["items"]), list(doc["ranked"])

    def summarize_recall(
        self,
        query: str,
        *,
        k: int = 10,
        max_tokens: int = 500,
        include_citations: bool = True,
        force_refresh: bool = False,
        after: str | None = None,
        scope: ScopeArg | None = None,
        stream: str | None = None,
    ) -> dict[str, Any]:
        """Recall ``k`` memories and synthesize them (an LLM call unless cached):
        ``{summary, citations, sources_used, cache_hit, model, unsupported, warnings}``;
        503 when the server has no ANTHROPIC_API_KEY."""
        body: dict[str, Any] = {
            "query": query,
            "k": k,
            "max_tokens": max_tokens,
            "include_citations": include_citations,
            "force_refresh": force_refresh,
        }
        _scoped(body, scope, stream)
        if after is not None:
            body["after"] = after
        doc: dict[str, Any] = self._call("POST", "/v1/summarize_recall", json=body).json()
        return doc

    def feedback(
        self,
        target_ids: list[str],
        signal: float,
        *,
        packet_id: str | None = None,
        reason: str | None = None,
        stream: str | None = None,
    ) -> str:
        """Explicit feedback on memories (-1 harmful .. +1 helpful); returns the event id.
        Raises :class:`MemstreamHttpError` with status 404, listing them, when an id names
        no event or fact of the tenant (a typo, a latent artifact's id): nothing is written."""
        body: dict[str, Any] = {"target_ids": target_ids, "signal": signal}
        for name, value in (("packet_id", packet_id), ("reason", reason), ("stream", stream)):
            if value is not None:
                body[name] = value
        event_id: str = self._call("POST", "/v1/feedback", json=body).json()["id"]
        return event_id

    def invalidate(
        self,
        target_ids: list[str],
        reason: str,
        *,
        stream: str | None = None,
        after: str | None = None,
    ) -> str:
        """Invalidate memories (fact ids, or event ids with their facts); the event id.
        ``after``: a write's position (of the targets, say), checked for once memory applied
        it, so a memory written a moment ago can be invalidated at once."""
        body: dict[str, Any] = {"target_ids": target_ids, "reason": reason}
        if stream is not None:
            body["stream"] = stream
        if after is not None:
            body["after"] = after
        event_id: str = self._call("POST", "/v1/invalidate", json=body).json()["id"]
        return event_id

    def invalidations(
        self, status: Literal["proposed", "accepted", "rejected"] | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Invalidations and proposals, newest first (``status="proposed"``: the proposals,
        each with its ``decisions``; none = still open)."""
        params: dict[str, str | int] = {"limit": limit}
        if status is not None:
            params["status"] = status
        found: list[dict[str, Any]] = self._call("GET", "/v1/invalidations", params=params).json()[
            "invalidations"
        ]
        return found

    def decide(self, proposal_id: str, accept: bool, *, reason: str | None = None) -> str:
        """Accept (its targets are invalidated) or reject a proposal; the decision's event id."""
        verb = "accept" if accept else "reject"
        body = {"reason": reason} if reason is not None else {}
        path = f"/v1/invalidations/{quote(proposal_id, safe='')}/{verb}"
        event_id: str = self._call("POST", path, json=body).json()["id"]
        return event_id

    def search(
        self,
        query: str,
        altitude: Literal["event", "fact", "episode", "latent"] = "event",
        k: int = 10,
        as_of: datetime | str | None = None,
        after: str | None = None,
        scope: ScopeArg | None = None,
        stream: str | None = None,
    ) -> list[dict[str, Any]]:
        """The best ``k`` items at one altitude: ``{id, kind, altitude, text, score, sources}``
        each, ``sources`` being the ledger event ids beneath the hit."""
        body = _scoped({"query": query, "altitude": altitude, "k": k}, scope, stream)
        if as_of is not None:
            body["as_of"] = as_of.isoformat() if isinstance(as_of, datetime) else as_of
        if after is not None:
            body["after"] = after
        doc = self._call("POST", "/v1/search", json=body).json()
        _warn_stale(doc)
        hits: list[dict[str, Any]] = doc["hits"]
        return hits

    def purge(self, subject: str, *, dry_run: bool = False, wait_s: float = 30.0) -> Any:
        """Purge a data subject (``DELETE /v1/subjects/{subject}``); the report of what was
        (with ``dry_run``: would be) removed where, and which stores completed."""
        params = {"dry_run": "true" if dry_run else "false", "wait_s": wait_s}
        path = f"/v1/subjects/{quote(subject, safe='')}"
        return self._call("DELETE", path, params=params).json()

    def purge_scope(self, scope: ScopeArg, *, dry_run: bool = False, wait_s: float = 30.0) -> Any:
        """Purge every event of a scope (``DELETE /v1/scopes``) and all derived from them;
        the report lists the events (with ``dry_run``: that would go)."""
        params = _scope_params(scope)
        params += [("dry_run", "true" if dry_run else "false"), ("wait_s", str(wait_s))]
        return self._call("DELETE", "/v1/scopes", params=params).json()

    def key(self) -> dict[str, Any]:
        """The calling key: id, tenant, name, permissions, scope (never its secret)."""
        doc: dict[str, Any] = self._call("GET", "/v1/keys/me").json()
        return doc

    def producer_config(self) -> dict[str, Any]:
        """What a Kafka producer of this key needs (``MemoryClient.connect`` reads it)."""
        doc: dict[str, Any] = self._call("GET", "/v1/producer").json()
        return doc

    def data_keys(self, ids: list[str]) -> dict[str, Any]:
        """Data keys to seal this key's own events with: ``{keys, taken, purged}``."""
        doc: dict[str, Any] = self._call("POST", "/v1/data-keys", json={"ids": ids}).json()
        return doc

    def latents(
        self,
        types: list[str] | None = None,
        stream: str | None = None,
        include_stale: bool = False,
        limit: int = 100,
        scope: ScopeArg | None = None,
    ) -> list[dict[str, Any]]:
        """The tenant's latent artifacts (of ``types``; resting on an event of ``scope`` or
        ``stream``), newest first; stale ones only with ``include_stale``."""
        params: list[tuple[str, str | int]] = [("type", t) for t in types or []]
        params += _scope_params(scope)
        if stream is not None:
            params.append(("stream", stream))
        params += [("include_stale", "true" if include_stale else "false"), ("limit", limit)]
        doc = self._call("GET", "/v1/latents", params=params).json()
        artifacts: list[dict[str, Any]] = doc["artifacts"]
        return artifacts

    def stream_events(
        self,
        stream: str,
        *,
        limit: int = 100,
        after: str | None = None,
        before: int | None = None,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` of ``stream``'s events, newest written first, with their
        metadata (below seq ``before``, if given); ``after``: a write's position to wait
        for (a :class:`StaleRead` warning when the wait ended first)."""
        return self._stream_page(stream, limit, after, before)[0]

    def stream_history(
        self, stream: str, *, after: str | None = None, page: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Every event of ``stream``, newest written first, read ``page`` at a time. Only the
        first page waits for ``after``: the pages after it hold older events."""
        events, before = self._stream_page(stream, page, after, None)
        yield from events
        while before is not None:
            events, before = self._stream_page(stream, page, None, before)
            yield from events

    def _stream_page(
        self, stream: str, limit: int, after: str | None, before: int | None
    ) -> tuple[list[dict[str, Any]], int | None]:
        params: dict[str, str | int] = {"limit": limit}
        if after is not None:
            params["after"] = after
        if before is not None:
            params["before"] = before
        doc = self._call("GET", f"/v1/streams/{quote(stream, safe='')}/events", params=params)
        body: dict[str, Any] = doc.json()
        _warn_stale(body)
        return body["events"], body.get("next_before")

    def lineage(self, item_id: str) -> dict[str, Any]:
        """Sources and leaves of an event, fact, artifact or packet id."""
        # quoted: a fact id's '#' would otherwise start a URL fragment and name its event
        doc: dict[str, Any] = self._call("GET", f"/v1/lineage/{quote(item_id, safe='')}").json()
        return doc

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryHttpClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
