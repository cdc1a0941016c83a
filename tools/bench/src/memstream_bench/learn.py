"""``memstream bench learn``: does memory learn which of two answers leads to success?

The generator writes task families: a question about one attribute of one subject, and two or
three memories that answer it with different values, told by different agents at different
times; one value (drawn at random, not the newest by design) is the one a task succeeds with.
Agents run rounds: checkout (with a task id) → the task uses the top answer → it succeeds iff
that answer is the right memory → ``task.outcome`` with ``used_ids``. Two tenants get the
same memories in the same run: one reports outcomes (learning on), one does not (learning
off, the same-run baseline). Per round: the share of checkouts whose top answer is the memory
that succeeds. Then a burst of adversarial praise (explicit feedback +1, many times) on
memories that do not answer the question: bounded means they do not come out on top.

The how-to case: two memories answer "how do I …?", and the misleading one repeats the
question's words (the closer lexical match, which ranks first on its own). Each round the agent
follows the first answer; when that fails, a second task checks out again and follows the other
memory, and succeeds. Per round: the share of first checkouts whose first answer is the right
memory, learning on and off.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from memstream.client import MemoryHttpClient, MemstreamHttpError
from memstream.graph.factory import open_graph_store
from memstream.graph.port import GraphStore
from memstream.keys import KeyStore
from memstream.projection.versions import FileProjectionRegistry, registry_path
from memstream.settings import Settings
from memstream_cli.progress import Report

from memstream_bench.stack import throwaway_stack

SUBJECTS = (
    "the staging database",
    "the billing service",
    "the nightly backup job",
    "the search cluster",
    "Zoë's build runner",
    "the München office VPN",
    "the mobile release train",
    "the ledger archive bucket",
)
ATTRIBUTES = {
    "port": ("5433", "6432", "7001", "8125"),
    "owner": ("Ana Souza", "Jörg Weber", "li wei", "Priya Natarajan"),
    "region": ("eu-west-3", "us-east-2", "ap-south-1", "ca-central-1"),
    "retry limit": ("3 attempts", "5 attempts", "8 attempts", "12 attempts"),
    "maintenance window": ("Tuesday 14:00", "Friday 09:00", "Sunday 22:00", "Monday 06:30"),
}
SAYS = (
    "{who}: the {attr} of {subject} is {value}.",
    "{who}: for {subject}, the {attr} is {value} now.",
    "{who}: note that {subject} has {attr} {value}.",
)
# A note about the subject that answers no question: the target of adversarial praise.
ASIDE = "{who}: the team behind {subject} ordered new chairs."
ASKS = ("What is the {attr} of {subject}?", "Which {attr} does {subject} have?")
AGENTS = ("ops-bot", "Marta", "deploy-agent", "the user")
CHATTER = (
    "Lunch at Café Noir on Thursday was lovely.",
    "Remember to water the office ferns before the long weekend.",
    "The quarterly offsite moved to the lake house.",
)
# verb, object, where: the misleading memory repeats all three, the right one the first two.
HOWTOS = (
    ("restart", "the payment worker", "on the staging cluster"),
    ("rotate", "the TLS certificate of the billing gateway", "for the weekend freeze"),
    ("clear", "the search index cache", "on the eu-west nodes"),
    ("unlock", "the release branch of the mobile app", "on a failed build"),
    ("reset", "Zoë's VPN token", "on the office network"),
    ("rerun", "the nightly backup job", "for the archive bucket"),
    ("renew", "the ledger archive lease", "in the cold storage tier"),
    ("drain", "the queue of the invoice mailer", "during a release freeze"),
)
WRONG_STEPS = (
    "reboot the whole host",
    "edit the files by hand",
    "delete the data directory",
    "force-push over the lock",
)
RIGHT_STEPS = (
    "the runbook command opsctl {verb} --safe",
    "the self-service portal, then wait for the green check",
    "kubectl rollout of its deployment",
    "the admin endpoint, one replica at a time",
)
HOWTO_ASK = "How do I {verb} {obj} {where}?"
MISLEADING = "{who}: to {verb} {obj} {where}, {step}."
RIGHT = "{who}: {obj}: {verb} it with {step}."
TENANTS = {"on": "learn-on", "off": "learn-off"}
PRAISE_REPEAT = 10


@dataclass(frozen=True)
class Family:
    """One question and its competing memories; ``right`` is the one tasks succeed with."""

    name: str
    question: str
    memories: dict[str, str]  # event id → text
    right: str
    aside: str  # text of a note about the same subject that answers nothing

    @property
    def aside_id(self) -> str:
        return f"{self.name}-aside"


def families(n: int, seed: int) -> list[Family]:
    """``n`` task families with two or three competing memories each (seeded)."""
    rng = random.Random(seed)
    pairs = [(s, a) for s in SUBJECTS for a in ATTRIBUTES]
    rng.shuffle(pairs)
    out = []
    for i, (subject, attr) in enumerate(pairs[:n]):
        values = rng.sample(ATTRIBUTES[attr], 2 + i % 2)
        memories = {
            f"f{i}-m{j}": rng.choice(SAYS).format(
                who=rng.choice(AGENTS), attr=attr, subject=subject, value=v
            )
            for j, v in enumerate(values)
        }
        right = rng.choice(sorted(memories))
        question = rng.choice(ASKS).format(attr=attr, subject=subject)
        aside = ASIDE.format(who=rng.choice(AGENTS), subject=subject)
        out.append(Family(f"f{i}", question, memories, right, aside))
    return out


def howto_families(n: int, seed: int) -> list[Family]:
    """``n`` how-to questions, each with a misleading memory that repeats its words and a
    right one that says less of them (seeded)."""
    rng = random.Random(seed)
    out = []
    for i, (verb, obj, where) in enumerate(rng.sample(HOWTOS, min(n, len(HOWTOS)))):
        wrong = rng.choice(WRONG_STEPS)
        right = rng.choice(RIGHT_STEPS).format(verb=verb)
        close = MISLEADING.format(
            who=rng.choice(AGENTS), verb=verb, obj=obj, where=where, step=wrong
        )
        far = RIGHT.format(
            who=rng.choice(AGENTS), verb=verb, obj=obj[0].upper() + obj[1:], step=right
        )
        name = f"h{i}"
        memories = {f"{name}-right": far, f"{name}-close": close}  # the misleading one is newer
        question = HOWTO_ASK.format(verb=verb, obj=obj, where=where)
        aside = ASIDE.format(who=rng.choice(AGENTS), subject=obj)
        out.append(Family(name, question, memories, f"{name}-right", aside))
    return out


def memory_events(fams: list[Family], start: datetime) -> list[dict[str, Any]]:
    """Every family's memories (an hour apart) and some chatter, as envelopes."""
    events: list[dict[str, Any]] = []
    at = start
    for f in fams:
        for event_id, text in [*f.memories.items(), (f.aside_id, f.aside)]:
            agent, said = text.split(": ", 1)
            events.append(
                {"id": event_id, "stream": f"notes-{f.name}", "type": "observation",
                 "agent": agent, "occurred_at": at.isoformat(), "payload": {"text": said}}
            )  # fmt: skip
            at += timedelta(hours=1)
    for i, text in enumerate(CHATTER):
        events.append(
            {"id": f"chatter-{i}", "stream": "chatter", "type": "message.user",
             "agent": "the user", "occurred_at": at.isoformat(), "payload": {"text": text}}
        )  # fmt: skip
    return events


def top_answer(packet: dict[str, Any]) -> str | None:
    """The memory behind the packet's top answer (a fact's id names its event)."""
    answers = packet.get("answer_candidates") or []
    if not answers or not answers[0]["support_ids"]:
        return None
    return str(answers[0]["support_ids"][0]).split("#", 1)[0]


def shown_memories(packet: dict[str, Any]) -> list[str]:
    """The memories a packet shows (answers, evidence, snippets), as event ids, in order."""
    ids = [i for a in packet.get("answer_candidates") or [] for i in a["support_ids"]]
    ids += [r["support_id"] for r in packet.get("evidence") or []]
    ids += [s["item_id"] for s in packet.get("snippets") or []]
    return list(dict.fromkeys(str(i).split("#", 1)[0] for i in ids))


@dataclass
class Arm:
    """One tenant's rounds."""

    client: MemoryHttpClient
    learn: bool
    shares: list[float] = field(default_factory=list)
    howto_shares: list[float] = field(default_factory=list)
    outcomes: int = 0

    def _report(self, f: Family, task: str, packet: dict[str, Any], used: str, ok: bool) -> None:
        self.client.emit(
            [{"stream": f"tasks-{f.name}", "type": "task.outcome", "agent": "bench-agent",
              "payload": {"task_id": task, "status": "success" if ok else "failure",
                          "checkout_ids": [packet["packet_id"]], "used_ids": [used]}}]
        )  # fmt: skip
        self.outcomes += 1

    def howto_round(self, fams: list[Family], label: str) -> float:
        """One checkout per how-to family; the task follows the first answer. With learning,
        its outcome is reported, and after a failure a second task follows the other memory
        the packet shows."""
        right = 0
        for f in fams:
            task = f"{label}-{f.name}"
            packet = self.client.checkout(f.question, task_id=task)
            top = top_answer(packet)
            right += top == f.right
            if not self.learn or top is None:
                continue
            self._report(f, task, packet, top, top == f.right)
            if top != f.right:
                retry = self.client.checkout(f.question, task_id=f"{task}-retry")
                other = [i for i in shown_memories(retry) if i in f.memories and i != top]
                if other:
                    self._report(f, f"{task}-retry", retry, other[0], other[0] == f.right)
        share = right / len(fams)
        self.howto_shares.append(share)
        return share

    def round(self, fams: list[Family], label: str) -> float:
        """One checkout per family; with learning, its task's outcome is reported."""
        right = 0
        outcomes = []
        for f in fams:
            task = f"{label}-{f.name}"
            packet = self.client.checkout(f.question, task_id=task)
            top = top_answer(packet)
            ok = top == f.right
            right += ok
            if self.learn and top is not None:
                outcomes.append(
                    {"stream": f"tasks-{f.name}", "type": "task.outcome", "agent": "bench-agent",
                     "payload": {"task_id": task, "status": "success" if ok else "failure",
                                 "checkout_ids": [packet["packet_id"]], "used_ids": [top]}}
                )  # fmt: skip
        if outcomes:
            self.client.emit(outcomes)
            self.outcomes += len(outcomes)
        share = right / len(fams)
        self.shares.append(share)
        return share


@dataclass
class FeedbackProbe:
    """Counts feedback events the live graph holds about some memories."""

    settings: Settings
    ids: list[str]
    graphs: dict[str, GraphStore] = field(default_factory=dict)

    def seen(self, tenant: str) -> int:
        reg = FileProjectionRegistry(registry_path(self.settings.data_dir)).load()
        if reg.live is None:
            return 0
        info = reg.versions[reg.live]
        if info.name not in self.graphs:
            self.graphs[info.name] = open_graph_store(self.settings, info.graph_namespace)
        return len({b.event_id for b in self.graphs[info.name].feedback(tenant, self.ids)})


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``cond`` holds (polled), or TimeoutError."""
    started = time.monotonic()
    while not cond():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - started


def run_learn_bench(
    n_families: int, rounds: int, seed: int, progress: Report, n_howtos: int = len(HOWTOS)
) -> dict[str, Any]:
    """The whole bench in a throw-away stack; returns the JSON document."""
    fams = families(n_families, seed)
    howtos = howto_families(n_howtos, seed)
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    with throwaway_stack(progress) as (stack, settings):
        ids = [i for f in [*fams, *howtos] for i in [*f.memories, f.aside_id]]
        ids += [f"chatter-{i}" for i in range(len(CHATTER))]
        probe = FeedbackProbe(settings, ids)
        keys = KeyStore.from_settings(settings)
        assert stack.info is not None
        arms = {
            arm: Arm(MemoryHttpClient(stack.info.api_url, keys.create(tenant)), learn=arm == "on")
            for arm, tenant in TENANTS.items()
        }
        for arm in arms.values():
            arm.client.emit(memory_events([*fams, *howtos], start))
        progress("waiting for the memories to be visible")
        shown = [*fams, *howtos]
        _wait(lambda: all(_visible(a, shown) for a in arms.values()), 120, "memories")
        waits = []
        for r in range(rounds):
            for name, arm in arms.items():
                arm.round(fams, f"{name}-r{r}")
                if howtos:
                    arm.howto_round(howtos, f"{name}-h{r}")
            progress(
                f"round {r + 1}: right answer on top, off {arms['off'].shares[-1]:.2f}, "
                f"on {arms['on'].shares[-1]:.2f}"
            )
            waits.append(_wait(_seen(probe, TENANTS["on"], arms["on"].outcomes), 180, "feedback"))
        before = {name: _snapshot(arm, fams) for name, arm in arms.items()}
        praised = _praise(arms, fams)
        progress("adversarial praise sent; waiting for it to be projected")
        for arm_name, arm in arms.items():
            want = (arm.outcomes if arm.learn else 0) + len(praised)
            _wait(_seen(probe, TENANTS[arm_name], want), 180, "praise in the graph")
        praise = {
            "events_per_arm": len(praised),
            "targets": len(praise_targets(fams)),
            "before": before,
            "after": {name: _snapshot(arm, fams) for name, arm in arms.items()},
        }
        doc = _report(arms, fams, praise, rounds, seed, waits)
        doc["howto"] = {
            "families": len(howtos),
            "per_round": [
                {
                    "round": r + 1,
                    "learning_off": round(arms["off"].howto_shares[r], 3),
                    "learning_on": round(arms["on"].howto_shares[r], 3),
                }
                for r in range(len(arms["on"].howto_shares))
            ],
        }
        return doc


def _seen(probe: FeedbackProbe, tenant: str, n: int) -> Callable[[], bool]:
    return lambda: probe.seen(tenant) >= n


def _visible(arm: Arm, fams: list[Family]) -> bool:
    try:
        packet = arm.client.checkout(fams[-1].question)
    except MemstreamHttpError as e:
        if e.status == 503:  # the live version's index is still opening
            return False
        raise
    return top_answer(packet) in fams[-1].memories


def praise_targets(fams: list[Family]) -> list[str]:
    """Memories that answer no question: each family's aside (same subject, no answer) and
    the chatter."""
    return [f.aside_id for f in fams] + [f"chatter-{i}" for i in range(len(CHATTER))]


def _praise(arms: dict[str, Arm], fams: list[Family]) -> list[str]:
    """Explicit praise, ``PRAISE_REPEAT`` times each, on every praise target."""
    targets = praise_targets(fams)
    events = [
        {"stream": "praise", "type": "memory.feedback", "agent": "adversary",
         "payload": {"target_ids": [t], "signal": 1.0, "reason": "great memory"}}
        for t in targets
        for _ in range(PRAISE_REPEAT)
    ]  # fmt: skip
    for arm in arms.values():
        arm.client.emit(events)
    return [f"{t}#{n}" for t in targets for n in range(PRAISE_REPEAT)]


def _snapshot(arm: Arm, fams: list[Family]) -> dict[str, float]:
    """Right answer on top, a praise target on top, praise targets shown per packet."""
    targets = set(praise_targets(fams))
    packets = [arm.client.checkout(f.question) for f in fams]
    tops = [top_answer(p) for p in packets]
    shown = [sum(s["item_id"] in targets for s in p["snippets"]) for p in packets]
    n = len(fams)
    return {
        "right_on_top": round(sum(t == f.right for t, f in zip(tops, fams, strict=True)) / n, 3),
        "praised_on_top": round(sum(t in targets for t in tops) / n, 3),
        "praised_shown_per_packet": round(sum(shown) / n, 3),
    }


def _report(
    arms: dict[str, Arm],
    fams: list[Family],
    praise: dict[str, Any],
    rounds: int,
    seed: int,
    waits: list[float],
) -> dict[str, Any]:
    return {
        "families": len(fams),
        "memories_per_family": [len(f.memories) for f in fams],
        "rounds": rounds,
        "seed": seed,
        "chance": round(sum(1 / len(f.memories) for f in fams) / len(fams), 3),
        "per_round": [
            {
                "round": r + 1,
                "learning_off": round(arms["off"].shares[r], 3),
                "learning_on": round(arms["on"].shares[r], 3),
            }
            for r in range(rounds)
        ],
        "outcomes_reported": arms["on"].outcomes,
        "feedback_visible_s": [round(w, 2) for w in waits],
        "adversarial_praise": praise,
    }
