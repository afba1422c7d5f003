"""The package's layers hold, and the package works installed from its wheel.

- ``kernel/`` (runs inside learners' and graders' kernels) imports only the standard library,
  torch and the drawing libraries, and nothing else of the package;
- ``judge/`` imports nothing of ``grading/`` (nor ``course/``, ``learner/``); its kinds and the agent,
  which run inside grading kernels, import only the standard library, torch, the package's fixtures
  and the judge itself at load (NumPy only inside functions); its modules form no import circle;
- ``learner/`` (the learner's machine, shipped in the handout) imports nothing of ``course/`` or
  ``grading/``;
- a grading kernel has nothing of ``autograder.grading`` (nor ``course``) in ``sys.modules``;
- the wheel holds every subpackage and the message catalogs, and every module imports from it, outside the checkout.
"""
from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import autograder
from harness import ROOT, SANDBOX

PACKAGE = Path(autograder.__file__).resolve().parent
KERNEL_MAY_IMPORT = {"torch", "graphviz", "torchviz"}


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved to absolute names."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = ".".join(rel.parts[:-1]) if rel.name != "__init__" else ".".join(rel.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
                found |= {module} if node.module else {f"{module}.{a.name}" for a in node.names}
            else:
                found.add(node.module)
    # strings run by exec() in a kernel (the guard's cells) count as imports too
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("import "):
            found |= {line.split()[1] for line in node.value.splitlines() if line.startswith("import ")}
    return found


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def test_imports_of_resolves_relative_imports():
    names = imports_of(PACKAGE / "learner" / "progress.py")
    assert "autograder.learner.cells" in names and "autograder.__version__" in names


@pytest.mark.parametrize("path", modules("kernel"), ids=lambda p: p.name)
def test_kernel_imports_only_the_standard_library_torch_and_itself(path):
    stdlib = sys.stdlib_module_names
    bad = sorted(name for name in imports_of(path)
                 if name.split(".")[0] not in stdlib | KERNEL_MAY_IMPORT | {"__future__"}
                 and not name.startswith("autograder.kernel"))
    assert not bad, f"{path.name} (runs inside kernels) imports {bad}"


def module_level_imports(path: Path) -> set[str]:
    """The modules a file imports at load (not inside a function), relative imports resolved."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = ".".join(rel.parts[:-1])
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            found |= {f"{module}.{a.name}" if f"{module}.{a.name}".replace(".", "/") + ".py" in _FILES
                      or f"{module}.{a.name}".replace(".", "/") + "/__init__.py" in _FILES else module
                      for a in node.names}
    return found


_FILES = {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py")}
AGENT_SIDE = ["kinds", "agent.py", "agent_call.py", "allow.py", "data.py", "wire.py", "session.py", "lookup.py",
              "facts.py", "files.py", "autograd.py", "recorder.py", "__init__.py"]


@pytest.mark.parametrize("path", modules("judge"), ids=lambda p: p.relative_to(PACKAGE / "judge").as_posix())
def test_the_judge_imports_nothing_of_the_grading_side(path):
    bad = sorted(n for n in imports_of(path) if n.startswith(("autograder.grading", "autograder.course",
                                                               "autograder.learner", "autograder.cli")))
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", [p for p in modules("judge") if p.relative_to(PACKAGE / "judge").parts[0] in AGENT_SIDE],
                         ids=lambda p: p.relative_to(PACKAGE / "judge").as_posix())
def test_what_a_grading_kernel_loads_of_the_judge_imports_only_the_standard_library_torch_and_itself(path):
    stdlib = sys.stdlib_module_names
    bad = sorted(name for name in module_level_imports(path)
                 if name.split(".")[0] not in stdlib | {"torch", "__future__"}
                 and not name.startswith(("autograder.judge", "autograder.kernel.fixtures"))
                 and name not in ("autograder.kernel", "autograder.kernel.checks"))
    assert not bad, f"{path.name} (loaded in grading kernels) imports {bad} at load"


def test_the_agent_loads_nothing_of_the_package_but_the_judge_and_the_fixtures():
    code = "import sys, autograder.judge.agent\nprint(sorted(m for m in sys.modules if m.startswith('autograder')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    loaded = eval(out.stdout)
    assert loaded and all(m.startswith(("autograder.judge", "autograder.kernel")) or m == "autograder" for m in loaded), loaded
    # the judge's own end (its cells, calls and namespace) stays out of the kernel
    assert not {"autograder.judge.judge", "autograder.judge.call", "autograder.judge.namespace"} & set(loaded), loaded


def test_the_judges_modules_form_no_import_circle():
    judge = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in modules("judge")}
    edges = {name: {m for m in module_level_imports(path) if m in judge and m != name} for name, path in judge.items()}
    # a package imports its own submodules in its __init__: not a circle unless a submodule imports it back
    visiting, done, circles = set(), set(), []

    def visit(name, trail):
        if name in visiting:
            circles.append(trail[trail.index(name):] + [name])
            return
        if name in done:
            return
        visiting.add(name)
        for nxt in sorted(edges[name]):
            visit(nxt, trail + [name])
        visiting.discard(name)
        done.add(name)
    for name in sorted(edges):
        visit(name, [])
    assert not circles, circles


@pytest.mark.parametrize("layer", ["judge", "kernel"])
def test_no_module_of_the_judge_or_the_kernel_is_over_500_lines(layer):
    long = {p.name: n for p in modules(layer) if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


@pytest.mark.parametrize("path", modules("learner"), ids=lambda p: p.name)
def test_learner_tools_import_nothing_of_the_instructor_side(path):
    bad = sorted(n for n in imports_of(path) if n.startswith(("autograder.course", "autograder.grading")))
    assert not bad, f"{path.name} (shipped to learners) imports {bad}"


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports, anywhere in it
    (inside functions too: an import made late is still an import)."""
    modules = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for imported in imports_of(path):
            while imported and imported not in modules:      # autograder.grading.jobs.Job -> ...jobs
                imported = imported.rpartition(".")[0]
            if imported and imported not in (name, "autograder"):
                graph[name].add(imported)
    return graph


def test_the_package_has_no_import_circle():
    graph = import_graph()
    circles = []

    def visit(name: str, path: list[str]) -> None:
        for imported in sorted(graph[name]):
            if imported in path:
                circles.append(path[path.index(imported):] + [imported])
            elif imported not in done:
                visit(imported, path + [imported])
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_import_circle_check_finds_a_circle(monkeypatch):
    """The check above can fail: with one module made to import another that imports it back."""
    real = import_graph()
    monkeypatch.setattr(sys.modules[__name__], "import_graph",
                        lambda: {**real, "autograder.grading.files": real["autograder.grading.files"] | {"autograder.grading.pool"}})
    with pytest.raises(AssertionError, match="import circles"):
        test_the_package_has_no_import_circle()


def kernel_modules(km_factory) -> list[str]:
    """``autograder`` modules loaded in a kernel started by ``km_factory()``, after the course's setup."""
    from nbclient import NotebookClient
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, torch\nfrom autograder.kernel import checks as ck\n"
        "print(sorted(m for m in sys.modules if m.startswith('autograder')))")])
    km = km_factory()
    client = NotebookClient(nb, km=km, timeout=60)
    try:
        client.execute()
    finally:
        if km.has_kernel:
            asyncio.run(km.shutdown_kernel(now=True))
    return eval(nb.cells[0].outputs[0]["text"])  # a list literal the cell printed


def test_a_grading_kernel_never_imports_the_grading_side(tmp_path):
    from autograder.grading.bwrap import bwrap_path
    from autograder.grading.sandbox import Slot, Limits

    slot = Slot(0, tmp_path, sandboxed=bwrap_path() is not None)
    slot.start()
    try:
        loaded = kernel_modules(lambda: slot.kernel_manager(Limits()))
    finally:
        slot.request({"op": "reap"}, timeout=30)
        slot.release()
    assert "autograder.kernel.checks" in loaded
    assert not [m for m in loaded if m.startswith(("autograder.grading", "autograder.course", "autograder.learner"))], loaded


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [whl] = out.glob("copy_that_autograder-*.whl")
    return whl


def test_the_wheel_holds_every_subpackage(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    catalogs = sorted(PACKAGE.rglob("locale/*.json"))
    assert catalogs, "the message catalogs are in the package"
    for path in [*PACKAGE.rglob("*.py"), *catalogs]:
        rel = path.relative_to(PACKAGE.parent).as_posix()
        assert rel in names, f"{rel} is missing from the wheel"


def test_every_module_imports_from_the_installed_wheel(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the dependencies come from the course's environment, added as a plain path: its .pth files
    # (the editable install of this checkout among them) are not run, so autograder comes from the wheel
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "course-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    names = sorted(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                   for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")
    script = ("import importlib, autograder\n"
              f"for name in {names!r}:\n    importlib.import_module(name)\n"
              "print(autograder.__file__)")
    out = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert Path(out.stdout.strip()).is_relative_to(venv), f"imported {out.stdout.strip()}, not the wheel"
    usage = subprocess.run([str(python), "-m", "autograder", "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert "grade" in usage.stdout, "an instructor's install has the grading commands"


@SANDBOX
def test_the_grader_never_loads_torch(tmp_path):
    """The judge runs in a process of its own: grading a judged assignment (a1) loads no torch (some
    230 MB) in the grader; before, the grader loaded it for the first judged test."""
    from harness import scratch_course, submission, submit

    root = scratch_course(tmp_path / "course", "a1_views")
    submit(root, "a1_views", "alice", submission("a1_views"))
    code = ("import sys\nfrom pathlib import Path\nfrom autograder.grading.runner import Grader\n"
            f"[r] = Grader(Path({str(root)!r}), 'a1_views', jobs=1, log=lambda m: None).run()\n"
            "print(r.score, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.stdout.split() == ["13.0", "False"], out.stdout + out.stderr[-3000:]
