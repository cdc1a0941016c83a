"""What a long command is doing: a rich progress bar on a terminal, plain lines or nothing
elsewhere.

The bar goes to stderr and only to a terminal, so stdout keeps nothing but the command's
result (its table or its ``--json`` document), and pipes, logs and tests never see control
codes. Benches report through a ``Report`` callback (one message per stage); ``stage()``
adds a count to a stage when the callback is a ``Stages``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Literal

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from memstream_cli.common import err

Report = Callable[[str], None]
Mode = Literal["bar", "lines", "off"]


class _Count(ProgressColumn):
    """``done/total`` for a stage that counts something; blank for one that does not."""

    def render(self, task: Task) -> Text:
        if not task.fields.get("counted") or task.total is None:
            return Text("")
        return Text(f"{task.completed:,.0f}/{task.total:,.0f}", style="progress.download")


class _Done(SpinnerColumn):
    """A tick for a finished stage, even one whose count stopped short of its total (a
    replay after a purge projects fewer events than the ledger holds)."""

    def render(self, task: Task) -> RenderableType:
        return self.finished_text if task.fields.get("done") else super().render(task)


class Stage:
    """One stage's bar; without a bar (pipes, ``--json``, a plain callback) updates do nothing."""

    def __init__(self, bar: Progress | None = None, task: TaskID | None = None) -> None:
        self._bar = bar
        self._task = task

    def update(self, done: float, total: float | None = None) -> None:
        """How much of the stage's total is done (``total`` when it changes)."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total, counted=True)

    def advance(self, step: float = 1) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=step, counted=True)


class Stages:
    """A long command's stages, one after the other (or side by side with ``keep``).

    ``bar``: a progress bar per stage on stderr, finished ones left on screen as a record.
    ``lines``: each stage's message as a dim line on stderr, as the benches print in pipes.
    ``off``: nothing.
    """

    def __init__(self, mode: Mode, console: Console = err) -> None:
        self.mode = mode
        self._console = console
        self._bar: Progress | None = None
        self._open: list[TaskID] = []
        if mode == "bar":
            self._bar = Progress(
                _Done(finished_text="[green]✓[/green]"),
                # The message gives way on a narrow terminal; the bar, count and time do not.
                TextColumn(
                    "{task.description}",
                    markup=False,  # messages name subjects and files as written
                    table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
                ),
                BarColumn(bar_width=24),
                _Count(),
                TimeElapsedColumn(),
                console=console,
                redirect_stdout=False,
                redirect_stderr=False,
                expand=True,
                refresh_per_second=4,  # benches share the machine with what they measure
            )

    def __enter__(self) -> Stages:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is None:
            return
        if exc_type is None:  # a failed stage stays unfinished on screen: it shows where
            self._finish_open()
        self._bar.stop()

    def __call__(self, message: str) -> None:
        self.stage(message)

    def stage(self, message: str, total: float | None = None, *, keep: bool = False) -> Stage:
        """Start a stage (``total``: what it counts to); the stages still open end first,
        unless ``keep`` runs this one beside them."""
        if self.mode == "lines":
            self._console.print(Text(message, style="dim"))
        if self._bar is None:
            return Stage()
        if not keep:
            self._finish_open()
        task = self._bar.add_task(message, total=total, counted=total is not None)
        self._open.append(task)
        return Stage(self._bar, task)

    def _finish_open(self) -> None:
        assert self._bar is not None
        counted = {t.id for t in self._bar.tasks if t.fields.get("counted")}
        for task_id in self._open:
            if task_id in counted:
                self._bar.update(task_id, done=True)  # the count stays as it was
            else:
                self._bar.update(task_id, total=1, completed=1, done=True)
            self._bar.stop_task(task_id)
        self._open.clear()


def stages(json_out: bool, *, lines: bool = True) -> Stages:
    """Bars when stderr is a terminal; otherwise plain lines (``lines``, not with ``--json``,
    whose stdout holds only the JSON and whose stderr stays quiet) or nothing."""
    if err.file.isatty() and err.is_interactive:
        return Stages("bar")
    return Stages("lines" if lines and not json_out else "off")


def stage(report: Report, message: str, total: float | None = None) -> Stage:
    """A stage of ``report``; a plain callback (e.g. a list's ``append``) gets the message."""
    if isinstance(report, Stages):
        return report.stage(message, total)
    report(message)
    return Stage()
