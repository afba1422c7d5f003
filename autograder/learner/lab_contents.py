"""The course lab's contents manager: notebooks open unmodified.

When JupyterLab connects a notebook to its kernel it writes the kernel's ``language_info`` into the
notebook's metadata, and marks the notebook modified when that differs from what is stored (the
course stores ``"version": "3.11"`` in the exercises and the full version of the machine that ran
each lecture).  This manager fills in, as it reads a notebook that runs on this environment's
``python3`` kernel, the ``language_info`` that kernel will report, so nothing changes on connect.
The file on disk is untouched until the learner saves.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

KERNEL = "python3"


@lru_cache(maxsize=1)
def kernel_language_info() -> dict[str, Any] | None:
    """The ``language_info`` this environment's ``python3`` kernel reports (None when that kernel
    does not run this interpreter, so what it reports is not known here)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        return None
    program = spec.argv[0] if spec.argv else ""
    if program not in ("python", "python3", sys.executable) or spec.language != "python":
        return None
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def fill_language_info(nb: dict) -> bool:
    """Put the kernel's ``language_info`` into a Python notebook of the ``python3`` kernel; True when
    it changed anything."""
    meta = nb.setdefault("metadata", {})
    if meta.get("kernelspec", {}).get("name") != KERNEL or meta.get("language_info", {}).get("name", "python") != "python":
        return False
    info = kernel_language_info()
    if info is None or meta.get("language_info") == info:
        return False
    meta["language_info"] = dict(info)
    return True


class CourseContentsManager(AsyncLargeFileManager):
    """Jupyter's file contents manager; a notebook read for the lab gets its kernel's ``language_info``."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
            fill_language_info(model["content"])
        return model
