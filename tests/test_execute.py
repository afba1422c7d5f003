"""``execute.require_python_kernel``: a slot forks Python kernels only.  A notebook that asks for a
kernel this machine lacks fails as under nbgrader's own Execute; one that asks for another
language is refused; the lookup is made once a process for each kernel name."""
from __future__ import annotations

import json

import nbformat
import pytest
from jupyter_client.kernelspec import NoSuchKernel

from autograder.grading import execute


def asking_for(name: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": name, "display_name": name, "language": "python"}
    return nb


def test_a_python_kernel_passes_and_a_missing_one_fails_as_nbgrader_would():
    execute.require_python_kernel(asking_for("python3"))
    execute.require_python_kernel(nbformat.v4.new_notebook())      # no kernelspec: the default
    with pytest.raises(NoSuchKernel):
        execute.require_python_kernel(asking_for("no-such-kernel-anywhere"))


def test_a_kernel_of_another_language_is_refused_whatever_the_notebook_says(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "ruby-for-this-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["ruby", "{connection_file}"],
                                                  "display_name": "Ruby", "language": "ruby"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="ruby kernel 'ruby-for-this-test'.*Python only"):
        execute.require_python_kernel(asking_for("ruby-for-this-test"))


def test_each_kernel_name_is_looked_up_once(monkeypatch):
    import jupyter_client.manager

    looked_up = []
    real = jupyter_client.manager.KernelManager

    class Counting(real):
        def __init__(self, **kwargs):
            looked_up.append(kwargs.get("kernel_name"))
            super().__init__(**kwargs)

    monkeypatch.setattr(jupyter_client.manager, "KernelManager", Counting)
    execute._kernel_language.cache_clear()
    for _ in range(5):
        execute.require_python_kernel(asking_for("python3"))
    assert looked_up == ["python3"]
