"""``make conformance``: nbgrader's own test suite, run with and without the course's grading settings.

nbgrader ships its tests in the installed package.  This runs the autograde, generate_feedback and
validate modules twice, each time in a fresh Jupyter configuration folder:

1. empty: plain nbgrader;
2. holding the course's ``nbgrader_config.py`` without its course-specific lines (the
   ``CourseDirectory`` settings: folders, course id, database), so that every course nbgrader's
   tests make is graded the way this course grades: warnings ignored, missing cells restored,
   the feedback filter, and student code run by the sandboxed executor.

It prints both counts and fails when the second run passes fewer tests than the first, or fails
any test the first passes.  An instructor turns the same settings on for another course with the
same file: see the README's grading section.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["nbgrader.tests.apps.test_nbgrader_autograde", "nbgrader.tests.apps.test_nbgrader_generate_feedback",
           "nbgrader.tests.apps.test_nbgrader_validate"]
COURSE_SPECIFIC = re.compile(r"^c\.CourseDirectory\.")


def grading_settings(course_config: str) -> str:
    """The course's configuration with its course-specific lines dropped."""
    return "\n".join(line for line in course_config.splitlines() if not COURSE_SPECIFIC.match(line)) + "\n"


def run(label: str, config: str | None, work: Path) -> dict[str, dict[str, str]]:
    """Outcome per test, per module: 'passed', 'failed', 'error' or 'skipped'."""
    config_dir = work / f"config-{label}"
    config_dir.mkdir()
    if config is not None:
        (config_dir / "nbgrader_config.py").write_text(config)
    report = work / f"{label}.xml"
    # nbgrader runs `alembic` by name: the environment's bin folder goes first on PATH
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config_dir), JUPYTER_CONFIG_PATH="", PATH=path)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
           "--rootdir", str(work), "--junitxml", str(report), "--pyargs", *MODULES]
    print(f"--- {label}: {' '.join(cmd[1:])}", flush=True)
    # from a folder of its own, so that no nbgrader_config.py of this course is found
    subprocess.run(cmd, cwd=work, env=env, timeout=3600)
    outcomes: dict[str, dict[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        # nbgrader's tests are classes, one per module (TestNbGraderAutograde, ...)
        module = case.get("classname", "").rsplit(".", 1)[-1] or "?"
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        outcomes.setdefault(module, {})[name] = outcome
    return outcomes


def count(outcomes: dict[str, dict[str, str]], what: str = "passed") -> int:
    return sum(o == what for tests in outcomes.values() for o in tests.values())


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="copy-that-conformance-") as tmp:
        work = Path(tmp)
        plain = run("plain", None, work)
        course = run("course", grading_settings((ROOT / "nbgrader_config.py").read_text()), work)
    print("\nnbgrader's own tests, passed (failed, skipped) per module:")
    print(f"  {'module':<40} {'plain nbgrader':>18} {'course settings':>18}")
    for module in sorted(set(plain) | set(course)):
        row = []
        for outcomes in (plain, course):
            tests = outcomes.get(module, {})
            row.append(f"{sum(o == 'passed' for o in tests.values())} "
                       f"({sum(o in ('failed', 'error') for o in tests.values())}, "
                       f"{sum(o == 'skipped' for o in tests.values())})")
        print(f"  {module:<40} {row[0]:>18} {row[1]:>18}")
    print(f"  {'total passed':<40} {count(plain):>18} {count(course):>18}")
    regressions = sorted(name for module, tests in plain.items() for name, o in tests.items()
                         if o == "passed" and course.get(module, {}).get(name) != "passed")
    for name in regressions:
        print(f"  passes with plain nbgrader, not with the course settings: {name}")
    if count(plain) == 0:
        print("plain nbgrader passed no test: the run itself is broken")
        return 1
    return 1 if regressions or count(course) < count(plain) else 0


if __name__ == "__main__":
    raise SystemExit(main())
