"""The rich progress bar of `researcher index` (on stderr, only when stderr is a terminal)."""

from __future__ import annotations


def index_with_progress(service, name: str, wait: float | None = None):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from gsd_research.researcher.render import safe

    console = Console(stderr=True, emoji=False, highlight=False)
    columns = (TextColumn(f"[bold]{safe(name)}[/]"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
               TextColumn("{task.description}", style="dim"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def advance(n: int, path: str) -> None:
            bar.update(task, advance=n, description=safe(path[-50:]))  # a file name is not markup

        return service.index_repository(progress=advance, on_plan=lambda total: bar.update(task, total=total), wait=wait)
