"""The README's tour, run as written (steps 1 to 5) against a running stack: the only changes
are the stack's address, a key file and tenant of the test's own, and the repository's path.
Step 2 reads its own write at once through ``after``; step 3 asks what nobody said."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from stackproc import BIN, RunningStack, memstream

ROOT = Path(__file__).resolve().parents[1]
TENANT = "tour-readme"


def tour_steps(until: str = "# 6.") -> str:
    """The README's tour block, up to the step ``until``."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A five-minute tour", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return block.split(until, 1)[0]


def test_the_tour_answers_as_it_says(stack: RunningStack, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(
        memstream("keys", "create", "--tenant", TENANT, data_dir=stack.data_dir).stdout
    )
    script = (
        tour_steps()
        .replace("localhost:8080", stack.api_url.removeprefix("http://"))
        .replace(".memstream/dev-api-key", str(key_file))
        .replace("--tenant dev", f"--tenant {TENANT}")
        .replace(".venv/bin/memstream", str(BIN / "memstream"))
    )
    steps = [s for s in re.split(r"\n(?=# \d\. )", script) if s.startswith("# ")]
    marked = "".join(f'{s}\necho "@@ step {s[2]}"\n' for s in steps)
    env = {**os.environ, "MEMSTREAM_DATA_DIR": str(stack.data_dir)}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script.split("# 1.")[0] + marked],
                          capture_output=True, text=True, timeout=240, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = {n: out for out, n in re.findall(r"(?s)(.*?)@@ step (\d)\n", done.stdout)}
    assert set(said) == {"1", "2", "3", "4", "5"}, done.stdout
    # 2: the write of step 1, read at once: answered from it, and cited.
    assert "**Answerability:** answer_from_memory" in said["2"], said["2"]
    answer = said["2"].split("## Answer", 1)[1].split("##", 1)[0]
    assert "Lisbon" in answer and "tour-1" in said["2"]
    # 3: nothing was said of a car: memory does not answer from memory.
    assert "answer_from_memory" not in said["3"] and "**Answerability:**" in said["3"]
    # 4: lineage leads to the ledger entry of step 1.
    leaves = json.loads(said["4"])["leaves"]
    assert [leaf["event_id"] for leaf in leaves] == ["tour-1"]
    # 5: the feedback is accepted as an event of its own.
    assert json.loads(said["5"]).get("id"), said["5"]
