"""What ``grade`` shows while it runs: a line per finished submission, or a progress bar."""
from __future__ import annotations

from rich.console import Console

console = Console()


class ProgressView:
    """Progress of a grading run: a bar on a terminal; elsewhere (nohup, a log file, CI) a line
    every ``every`` seconds or every 10 submissions, the preparation included."""

    def __init__(self, assignment: str, every: float):
        import threading
        import time

        self.assignment, self.every = assignment, every
        self.phase, self.done, self.total = "starting", 0, 0
        self.start = self.last = time.monotonic()
        self.last_count = -1
        self.terminal = console.is_terminal
        self.bar = self.task = None
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.thread = None

    def __enter__(self):
        import threading

        if self.terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=console, transient=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(f"{self.assignment}: starting", total=None)
        else:
            self.thread = threading.Thread(target=self._tick, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.finished.set()
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def _line(self) -> None:
        import time

        elapsed = time.monotonic() - self.start
        print(f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}] {self.assignment}: {self.phase} "
              f"{self.done}/{self.total}", flush=True)
        self.last = time.monotonic()

    def _tick(self) -> None:
        import time

        while not self.finished.wait(min(1.0, self.every / 4)):
            with self.lock:
                if time.monotonic() - self.last >= self.every and self.total:
                    self._line()

    def event(self, phase: str, done: int, total: int) -> None:
        if not total:
            return
        with self.lock:
            changed = phase != self.phase
            self.phase, self.done, self.total = phase, done, total
            if self.bar is not None:
                self.bar.update(self.task, description=f"{self.assignment}: {phase}", completed=done, total=total)
            elif changed or done == total or done - self.last_count >= 10:
                self._line()
                self.last_count = done
