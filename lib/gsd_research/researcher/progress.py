"""The rich progress bar of `researcher index` (on stderr, only when stderr is a terminal)."""

from __future__ import annotations


def index_with_progress(service, name: str):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    columns = (TextColumn(f"[bold]{name}[/]"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
               TextColumn("{task.description}", style="dim"))
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def on_plan(total: int) -> None:
            bar.update(task, total=total)

        def advance(n: int, path: str) -> None:
            bar.update(task, advance=n, description=path[-50:])

        return service.index_repository(progress=advance, on_plan=on_plan)
