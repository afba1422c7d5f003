"""The grader's configuration, read the way nbgrader reads its own.

Every setting of ``grade``, ``feedback`` and ``export`` is a traitlets option, and they come
from the files nbgrader loads, in nbgrader's order (later ones win):

1. ``nbgrader_config.py`` (and ``.json``) in each folder of ``jupyter_core.paths.jupyter_config_path()``,
   the system folders first and the user's ``JUPYTER_CONFIG_DIR`` (``~/.jupyter``) last;
2. ``nbgrader_config.py`` in the working folder;
3. ``nbgrader_config.py`` in the course root (``CourseDirectory.root`` where a file above set it);
4. the command line: each flag of ``grade`` is an alias for one option (``ALIASES``).

Where the options live:

- the database: nbgrader's ``CourseDirectory.db_url`` and ``CourseDirectory.course_id``;
- the per-cell time limit: nbgrader's ``Execute.timeout`` (the course sets it once, in its
  ``nbgrader_config.py``); the other limits and the sandbox policy: ``SandboxedExecute``'s
  options, which plain ``nbgrader autograde`` reads too;
- what only ``grade`` has (parallel jobs, Dask, reports): :class:`GradeOptions`,
  ``c.GradeOptions.<name>``.  (``c.GradeOptions.processes`` is the older spelling of
  ``c.SandboxedExecute.processes``, still read where the newer one is not set.)
"""
from __future__ import annotations

import os
from pathlib import Path

from traitlets import Bool, Integer, Unicode
from traitlets.config import Config, Configurable
from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

CONFIG_NAME = "nbgrader_config"


class GradeOptions(Configurable):
    """What ``python -m autograder grade`` adds to nbgrader's options."""

    jobs = Integer(0, help="Submissions graded at once (0: one more than the number of cores).").tag(config=True)
    scheduler = Unicode("", help="A Dask scheduler to run the jobs on, e.g. tcp://127.0.0.1:8786 "
                                 "('': local sandboxed slots).").tag(config=True)
    processes = Integer(None, allow_none=True,
                        help="The older spelling of SandboxedExecute.processes, read where that is "
                             "not set.").tag(config=True)
    force = Bool(False, help="Grade every submission again, changed or not (default: only new or "
                             "changed submissions).").tag(config=True)
    report_directory = Unicode("reports", help="Where each run's report goes, relative to the course "
                                               "root: <report_directory>/<assignment>/report.html "
                                               "and report.csv.").tag(config=True)
    similarity = Bool(False, help="After grading, write the similarity report of the assignment "
                                  "(<report_directory>/<assignment>/similarity.html; options: "
                                  "c.SimilarityOptions).").tag(config=True)
    progress_seconds = Integer(10, help="Without a terminal, a progress line at least this often "
                                        "(and every 10 submissions).").tag(config=True)


# grade's command-line flags -> the option each one sets (the flag is only another way to write it)
ALIASES = {
    "jobs": "GradeOptions.jobs",
    "scheduler": "GradeOptions.scheduler",
    "processes": "SandboxedExecute.processes",
    "force": "GradeOptions.force",
    "require_sandbox": "SandboxedExecute.require_sandbox",
    "memory": "SandboxedExecute.memory_bytes",
    "cell_timeout": "Execute.timeout",
    "notebook_timeout": "SandboxedExecute.notebook_timeout",
    "cpu_seconds": "SandboxedExecute.cpu_seconds",
    "max_output": "SandboxedExecute.output_bytes",
    "judge_memory": "SandboxedExecute.judge_memory_bytes",
    "judge_cpu_seconds": "SandboxedExecute.judge_cpu_seconds",
    "db": "CourseDirectory.db_url",
    "similarity": "GradeOptions.similarity",
}


def config_paths() -> list[str]:
    """The folders nbgrader reads ``nbgrader_config`` from, highest priority first
    (``JupyterApp.config_file_paths``: the user's config folder, then the environment's, then the system's)."""
    from jupyter_core.paths import jupyter_config_dir, jupyter_config_path

    paths = list(jupyter_config_path())
    if jupyter_config_dir() not in paths:
        paths.insert(0, jupyter_config_dir())
    return paths


def _load_folder(cfg: Config, folder: str | os.PathLike) -> None:
    for ext, loader in ((".py", PyFileConfigLoader), (".json", JSONFileConfigLoader)):
        if (Path(folder) / f"{CONFIG_NAME}{ext}").is_file():
            cfg.merge(loader(f"{CONFIG_NAME}{ext}", path=str(folder)).load_config())


def user_config(cwd: Path | None = None) -> Config:
    """What nbgrader reads before the course root's file: the config folders and the working folder."""
    cfg = Config()
    for folder in reversed(config_paths()):
        _load_folder(cfg, folder)
    _load_folder(cfg, cwd or Path.cwd())
    return cfg


def course_root(cfg: Config, fallback: Path | None = None) -> Path | None:
    """The course root a configuration names (``CourseDirectory.root``), else ``fallback``."""
    root = cfg.CourseDirectory.get("root") if "CourseDirectory" in cfg else None
    return Path(root).resolve() if root else fallback


def load_config(root: Path, overrides: Config | None = None, cwd: Path | None = None) -> Config:
    """The configuration ``grade``, ``feedback`` and ``export`` run with for the course at ``root``,
    as nbgrader builds it: the config folders, the working folder's file, the course's file, then
    ``overrides`` (the command line).  ``root`` is the course root whatever a file says (the command
    line finds it with ``course_root``)."""
    root = Path(root).resolve()
    cwd = (cwd or Path.cwd()).resolve()
    cfg = user_config(cwd)
    if root != cwd:               # (the working folder's file is loaded already)
        _load_folder(cfg, root)
    if overrides is not None:
        cfg.merge(overrides)
    cfg.CourseDirectory.root = str(root)
    return cfg


def command_line(values: dict) -> Config:
    """A Config of the flags that were given (``None``: not given), through ``ALIASES``."""
    cfg = Config()
    for name, value in values.items():
        if value is None or name not in ALIASES:
            continue
        section, trait = ALIASES[name].split(".")
        cfg[section][trait] = value
    return cfg


def limits(cfg: Config):
    """The per-submission limits: nbgrader's ``Execute.timeout`` and ``SandboxedExecute``'s options,
    the ones plain ``nbgrader autograde`` runs with (``GradeOptions.processes`` where
    ``SandboxedExecute.processes`` is not set)."""
    from .execute import SandboxedExecute

    executor = SandboxedExecute(config=cfg)
    base = executor.limits()
    older = GradeOptions(config=cfg).processes
    if older is not None and "processes" not in cfg.get("SandboxedExecute", {}):
        base.processes = older
    if executor.timeout is None or executor.timeout <= 0:
        base.cell_timeout = base.notebook_timeout   # "no per-cell limit": the notebook's limit holds
    return base


def require_sandbox(cfg: Config) -> bool:
    from .execute import SandboxedExecute

    return bool(SandboxedExecute(config=cfg).require_sandbox)


def default_jobs() -> int:
    """Submissions graded at once when nothing says: one more than the cores.  A kernel and the
    grader wait on each other's messages in turn, so with one job per core a core is often idle;
    with one more, 160 notebooks on 2 cores took 45 s instead of 55 s (a fourth job added nothing)."""
    return (os.cpu_count() or 1) + 1
