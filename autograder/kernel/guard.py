"""Cells the grader slips between a submission's cells (and removes before scoring).

``install()`` runs first and remembers torch's functions, ``torch.Tensor``'s methods and the
test helpers.  ``restore()`` runs just before every test cell: whatever learner code replaced is
put back (so a patched ``torch.allclose`` or ``ck.check_close`` cannot pass a test) and named in
a line the grader turns into a flag for manual review.  A learner determined enough can still
break this from inside the kernel; when the guard's own output goes missing or is garbled, that
too is flagged.
"""
from __future__ import annotations

import json
import sys
import types

MARK = "@@copy-that-guard@@"

_saved: dict[str, tuple[object, dict]] = {}


def _targets() -> dict[str, object]:
    import torch
    import torch.nn.functional

    import autograder.kernel.checks

    return {"torch": torch, "torch.Tensor": torch.Tensor, "torch._C.TensorBase": torch._C.TensorBase,
            "torch.nn.functional": torch.nn.functional, "autograder.kernel.checks": autograder.kernel.checks}


def install() -> None:
    for name, obj in _targets().items():
        _saved[name] = (obj, dict(vars(obj)))


def restore(user_ns: dict) -> None:
    changed: list[str] = []
    for name, (obj, attrs) in _saved.items():
        now = vars(obj)
        for key, value in attrs.items():
            if now.get(key, _saved) is not value:
                changed.append(f"{name}.{key}")
                try:
                    setattr(obj, key, value)
                except (AttributeError, TypeError):
                    pass
        for key in [k for k in now if k not in attrs]:
            # a new attribute on a class shadows what its bases define (Tensor methods live on
            # TensorBase); modules legitimately gain submodules as they are imported
            if isinstance(obj, type) or not isinstance(now[key], types.ModuleType):
                changed.append(f"{name}.{key}")
                try:
                    delattr(obj, key)
                except (AttributeError, TypeError):
                    pass
    # the names the test cells use
    for alias, module in (("torch", _saved["torch"][0]), ("ck", _saved["autograder.kernel.checks"][0])):
        if alias in user_ns and user_ns[alias] is not module:
            changed.append(f"the name {alias!r}")
            user_ns[alias] = module
    # one write: print() writes the line and its end apart, and a stream flush between the two let
    # a warning the next call printed on stderr land inside the report's line ("garbled")
    sys.stdout.write(MARK + json.dumps(sorted(set(changed))) + "\n")


INSTALL_SOURCE = "import autograder.kernel.guard as __copy_that_guard\n__copy_that_guard.install()"
RESTORE_SOURCE = "__copy_that_guard.restore(get_ipython().user_ns)"
