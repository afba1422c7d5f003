"""The fixtures' forward pre-hook objects (``SnapshotBeforeForward``), with the module they are
registered on: the class by name (allow.HOOKS), the attributes by value (a list comes back, so the
snapshots the call's forward passes took reach the test)."""
from __future__ import annotations

from ..allow import HOOKS, MAX_SLOTS
from ..wire import JudgeError
from .base import Kind

_type, _get = type, HOOKS.get


class Hooks(Kind):
    """The fixtures' forward pre-hook objects."""
    name = "hook"
    codes = ("hook",)
    types = tuple(HOOKS.values())

    @staticmethod
    def allowed(h) -> bool:
        """Whether ``h`` is a hook object of the fixtures' classes."""
        return _get(_type(h).__name__) is _type(h)

    def checked(self, h):
        """A hook of the answer, refused unless it is the fixtures'."""
        if not self.allowed(h):
            raise JudgeError("the kernel's module hook is not one of the fixtures'")
        return h

    def send(self, call, h, depth):
        n = call.register(h)
        attrs = []
        for k, v in vars(h).items():
            try:
                attrs.append([k, call.send(v, depth + 1)])
            except JudgeError as exc:
                raise JudgeError(f"the judge cannot send the attribute {k!r} of a {type(h).__name__}: {exc}") from None
        return {"k": "hook", "n": n, "type": type(h).__name__, "attrs": attrs}

    def rebuild(self, call, v, depth):
        cls = HOOKS.get(v.get("type")) if type(v.get("type")) is str else None
        if cls is None or not isinstance(v.get("attrs"), list) or len(v["attrs"]) > MAX_SLOTS:
            raise JudgeError("the kernel's hook object is malformed")
        h = call.made_object(v, cls.__new__(cls))
        for entry in v["attrs"]:
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str) \
                    or entry[0].startswith("__") or not entry[0].isidentifier():
                raise JudgeError("the kernel's hook object is malformed")
            h.__dict__[entry[0]] = call.decode(entry[1], depth + 1)
        return h

    def receive(self, call, v):
        cls = HOOKS[v["type"]]
        h = call.keep(v["n"], cls.__new__(cls))
        for k, a in v["attrs"]:
            if k.startswith("__"):
                raise ValueError(f"a hook attribute {k!r}")
            h.__dict__[k] = call.receive(a)
        return h

    def answer(self, call, h, depth):
        if not self.allowed(h):
            return None
        entry = {"k": "hook", "n": call.tie(h), "type": _type(h).__name__}
        entry["attrs"] = [[k, call.answer(v, depth + 1)] for k, v in h.__dict__.items()]
        return entry
