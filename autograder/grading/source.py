"""The assignment as the course's source folder has it: the gradebook brought in line with
``solutions/`` (``sync.py``), the release that submissions are repaired against, the assignment's
fixtures, and the key of the tests every submission is graded with.

:class:`FollowsSource` is that part of :class:`~autograder.grading.runner.Grader`; it needs the
grader's ``root``, ``assignment``, ``coursedir``, ``config``, ``db_url``, ``log``, ``_path`` and
``_gradebook``.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # nbformat loads when a release is read: `grade` starts its slots first
    import nbformat


class GradingError(RuntimeError):
    """Grading could not start or go on (the assignment is not in the source folder, nbgrader failed)."""


class FollowsSource:
    """The source-following half of a grader."""

    def follow_source(self) -> None:
        """Bring the gradebook's assignment in line with the source folder when they differ (an
        edit of ``solutions/``): first what nbgrader refuses once there are submissions (cells and
        notebooks added or removed), then ``generate_assignment --force`` (see ``sync.py``)."""
        from . import sync

        source = self._path(self.coursedir.source_directory)
        if not source.is_dir():
            return
        with self._gradebook() as gb:
            current = sync.from_gradebook(gb, self.assignment)
        if not current:
            return           # not in the gradebook yet: add_assignment adds it
        wanted = sync.from_source(source, self.assignment, self.config)
        changes = sync.compare(wanted, current)
        if changes.none:
            return
        with self._gradebook() as gb:
            dropped = sync.make_room(gb, self.assignment, wanted, changes)
        self.add_assignment(f"{self.coursedir.source_directory}/{self.assignment} changed since the gradebook "
                            f"took it ({changes.describe()}): updating the gradebook (nbgrader generate_assignment"
                            f"{', hand grades kept' if not dropped else ''})")
        with self._gradebook() as gb:
            sync.complete_submissions(gb, self.assignment)
        self.retired = {cell for _, _, cell in changes.removed}
        if dropped:
            self.log(f"hand grades dropped with the cells removed from {self.coursedir.source_directory}/: "
                     f"{', '.join(dropped)}; the others are kept")

    def add_assignment(self, why: str | None = None) -> None:
        """Put the assignment in the gradebook from ``solutions/``, as ``nbgrader generate_assignment``
        does, without touching the committed ``exercises/`` (nbgrader itself would skip an
        assignment whose release exists).  nbgrader runs on a copy, writing to this gradebook; the
        release it makes is what this run repairs submissions against (``generated``)."""
        from ..course.build import run_nbgrader

        source = self._path(self.coursedir.source_directory)
        if not source.is_dir():
            raise GradingError(f"no assignment {self.assignment!r} in {self.coursedir.source_directory}/, so "
                               f"nbgrader generate_assignment cannot add it to the gradebook")
        self.log(why or f"adding {self.assignment} to the gradebook from {self.coursedir.source_directory}/ "
                        f"(nbgrader generate_assignment)")
        with tempfile.TemporaryDirectory(prefix="copy-that-release-") as tmp:
            work = Path(tmp)
            if (self.root / "nbgrader_config.py").is_file():
                shutil.copy2(self.root / "nbgrader_config.py", work / "nbgrader_config.py")
            shutil.copytree(source, work / self.coursedir.source_directory / self.assignment,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            done = run_nbgrader("generate_assignment", self.assignment, "--force",
                                f"--CourseDirectory.root={work}", f"--CourseDirectory.db_url={self.db_url}",
                                f"--CourseDirectory.course_id={self.coursedir.course_id}",
                                f"--CourseDirectory.source_directory={self.coursedir.source_directory}",
                                f"--CourseDirectory.release_directory={self.coursedir.release_directory}",
                                cwd=work)
            if done.returncode != 0:
                raise GradingError(f"nbgrader generate_assignment {self.assignment} failed:\n"
                                   f"{(done.stdout + done.stderr)[-3000:]}")
            release = self._path(self.coursedir.release_directory)
            made = work / self.coursedir.release_directory / self.assignment
            if not release.exists():    # no committed release: nbgrader's own goes in its place
                shutil.copytree(made, release)
            import nbformat

            self.generated = {p.stem: nbformat.read(p, as_version=4) for p in sorted(made.glob("*.ipynb"))}
            stale = [p.name for p in made.glob("*.ipynb")
                     if not (release / p.name).is_file() or (release / p.name).read_bytes() != p.read_bytes()]
            if stale:
                self.log(f"{self.coursedir.release_directory}/{self.assignment} is not what "
                         f"{self.coursedir.source_directory}/ makes ({', '.join(sorted(stale))}): this run grades "
                         f"with the new release; give it to learners with `python -m autograder build --only "
                         f"{self.assignment}`")

    def _release(self, notebook: str) -> nbformat.NotebookNode:
        """The released notebook (the one nbgrader made in this run, if it made one), read and
        validated once a run; each call gets a copy of its own."""
        import nbformat

        if notebook in self.generated:
            return nbformat.from_dict(self.generated[notebook])
        read = self.__dict__.setdefault("_releases_read", {})
        if notebook not in read:
            path = self._path(self.coursedir.release_directory) / f"{notebook}.ipynb"
            if not path.exists():
                raise GradingError(f"no released notebook {path}: run `nbgrader generate_assignment {self.assignment}`")
            read[notebook] = nbformat.read(path, as_version=4)
        return nbformat.from_dict(read[notebook])

    def _fixtures(self) -> tuple[dict[str, str], dict[str, bytes]]:
        """The assignment's fixtures, read once: module name -> the instructor's source (for the
        judge), and file name -> the released copy (for the kernel's folder; the source's copy
        where the release has none)."""
        from .judged import fixture_files, fixture_sources

        if "_fixtures_read" not in self.__dict__:
            source = self._path(self.coursedir.source_directory)
            release = self._path(self.coursedir.release_directory)
            released = {p.name: ((release / p.name) if (release / p.name).is_file() else p).read_bytes()
                        for p in fixture_files(source)}
            self._fixtures_read = (fixture_sources(source), released)
        return self._fixtures_read

    def tests_key(self) -> str:
        """A hash of the tests every submission is graded with: the gradebook's cells of the
        assignment and its fixtures (see ``sync.tests_key``), read once a run."""
        import hashlib

        from . import sync

        if "_tests_key" not in self.__dict__:
            with self._gradebook() as gb:
                cells = sync.from_gradebook(gb, self.assignment)
            sources, released = self._fixtures()
            fixtures = {**sources, **{f"released {k}": hashlib.sha256(v).hexdigest() for k, v in released.items()}}
            self._tests_key = sync.tests_key(cells, fixtures)
        return self._tests_key
