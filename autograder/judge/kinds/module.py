"""Modules by value: an ``nn.Module`` of a class of torch.nn, of the package's fixtures or of a
course's fixtures (allow.py) goes as its class's (module, qualname), its attributes (any value a kind
sends: numbers, tuples, lists, a torch.Size, an activation function, weak references to its own
parameters ...), its parameters, buffers, submodules and the fixtures' forward pre-hooks; the agent
rebuilds it without calling a constructor.  What the call did to it comes back (``modules``): its
training flag and the parameters or buffers it replaced, each of the shape and dtype the judge sent
(a layer whose weight came back with another shape would fail, or worse, later).  A module the call
made comes back by value the same way; one of any other class stays in the kernel (a handle).
"""
from __future__ import annotations

import importlib
import inspect

import torch

from ..allow import HOOK_SLOTS, MAX_SLOTS, MODULE_INTERNALS, module_class, module_name
from ..wire import JudgeError
from .base import Kind

_Module, _Parameter = torch.nn.Module, torch.nn.Parameter
_module_init = torch.nn.Module.__init__
_type, _id, _len, _isinstance, _bool = type, id, len, isinstance, bool
_SLOTS = ("attrs", "params", "buffers", "children")


def refusal(m: torch.nn.Module) -> str:
    """Why a module cannot go, and what the test's author can do."""
    cls = type(m)
    if getattr(m, "has_uninitialized_params", lambda: False)():
        become = getattr(cls, "cls_to_become", None)
        return (f"the judge cannot send a {cls.__name__} whose parameters are not made yet (a lazy module): run "
                f"it once on an input in the test first (it becomes a {getattr(become, '__name__', 'plain layer')}), "
                "or build that layer with its sizes")
    where = "in the test" if cls.__module__ in ("__judge__", "__main__", "builtins") else f"in {cls.__module__}"
    return (f"the judge cannot send a {cls.__qualname__} (a class defined {where}): only classes of torch.nn and of "
            f"the course's fixtures go to the learner's function; put {cls.__name__} in the assignment's "
            "fixtures.py, which learners see, and import it from there")


def _hooks_refused(m) -> bool:
    return any(getattr(m, h) for h in HOOK_SLOTS if h != "_forward_pre_hooks")


class _Received:
    def __init__(self):
        self.modules: dict[int, object] = {}       # by the judge's number
        self.slots: dict[int, tuple] = {}
        self.courses: dict[str, object] = {}       # a course's fixtures, imported by name


def _slots(m) -> tuple:
    return ({k: _id(p) for k, p in m._parameters.items()}, {k: _id(b) for k, b in m._buffers.items()},
            {k: _id(c) for k, c in m._modules.items()}, m.training)


class Modules(Kind):
    """Modules of allowed classes, by value both ways."""
    name = "module"
    codes = ("module",)
    any_type = True
    request_sections = ("fixtures",)
    reply_sections = ("modules",)

    def judge_state(self):
        return []            # (module, training flag, [(slot table, its new entries)]) to set

    def agent_state(self):
        return _Received()

    # -- the judge's end --------------------------------------------------------------------
    def send(self, call, m, depth):
        if not isinstance(m, torch.nn.Module):
            return None
        named = module_name(type(m), call.session.fixtures)
        if named is None or getattr(m, "has_uninitialized_params", lambda: False)():
            raise JudgeError(refusal(m))
        if _hooks_refused(m):
            raise JudgeError(f"the judge cannot send a {type(m).__name__} with hooks (but the fixtures' forward "
                             "pre-hooks)")
        if not all(call.kind("hook").allowed(h) for h in m._forward_pre_hooks.values()):
            raise JudgeError(f"the judge cannot send a {type(m).__name__} with hooks (but the fixtures' forward "
                             "pre-hooks)")
        n = call.register(m)
        attrs = []
        for k, v in vars(m).items():
            if k in MODULE_INTERNALS:
                continue
            try:
                attrs.append([k, call.send(v, depth + 1)])
            except JudgeError as exc:
                raise JudgeError(f"the judge cannot send the attribute {k!r} of a {type(m).__name__}: {exc}") from None
        return {"k": "module", "n": n, "module": named[0], "type": named[1], "training": m.training,
                "attrs": attrs, "params": self._encoded(call, m._parameters, depth),
                "buffers": self._encoded(call, m._buffers, depth), "non_persistent": sorted(m._non_persistent_buffers_set),
                "children": self._encoded(call, m._modules, depth),
                "pre_hooks": [call.send(h, depth + 1) for h in m._forward_pre_hooks.values()]}

    @staticmethod
    def _encoded(call, table: dict, depth: int) -> list:
        return [[k, None if v is None else call.send(v, depth + 1)] for k, v in table.items()]

    def request(self, call):
        return {"fixtures": sorted(call.session.fixtures)} if call.session.fixtures else {}

    def rebuild(self, call, v, depth):
        """A module the call made, rebuilt from its class (allow.py) and its state, all checked."""
        cls = module_class(v.get("module"), v.get("type"), call.session.fixtures)
        if cls is None:
            raise JudgeError("the kernel's module is of a class the judge does not rebuild")
        if not isinstance(v.get("training"), bool):
            raise JudgeError("the kernel's training flag is not a bool")
        for field in _SLOTS + ("non_persistent",):
            if not isinstance(v.get(field), list) or len(v[field]) > MAX_SLOTS:
                raise JudgeError("the kernel's module is malformed")
        for entry in v["attrs"] + v["params"] + v["buffers"] + v["children"]:
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
                raise JudgeError("the kernel's module is malformed")
        m = cls.__new__(cls)
        torch.nn.Module.__init__(m)
        call.made_object(v, m)
        m.training = v["training"]
        for k, a in v["attrs"]:
            if (k in MODULE_INTERNALS or k.startswith("__") or not k.isidentifier()
                    or _behaviour(inspect.getattr_static(cls, k, None))):
                raise JudgeError(f"the kernel's module has an attribute {k[:40]!r} the judge does not set")
            m.__dict__[k] = call.decode(a, depth + 1)
        for k, p in v["params"]:
            m._parameters[k] = self._checked(call.decode(p, depth + 1) if p is not None else None, "params")
        for k, b in v["buffers"]:
            m._buffers[k] = self._checked(call.decode(b, depth + 1) if b is not None else None, "buffers")
        if not all(isinstance(k, str) for k in v["non_persistent"]):
            raise JudgeError("the kernel's module is malformed")
        m._non_persistent_buffers_set.update(v["non_persistent"])
        for k, c in v["children"]:
            c = None if c is None else call.decode(c, depth + 1)
            if c is not None and not isinstance(c, torch.nn.Module):
                raise JudgeError("the kernel's submodule is not a module")
            m._modules[k] = c
        hooks = v.get("pre_hooks", [])
        if not isinstance(hooks, list) or len(hooks) > 64:
            raise JudgeError("the kernel's module hooks are malformed")
        for h in hooks:
            m.register_forward_pre_hook(call.kind("hook").checked(call.decode(h, depth + 1)))
        return m

    @staticmethod
    def _checked(value, slot: str):
        if value is not None and not (type(value) is torch.nn.Parameter if slot == "params"
                                      else type(value) in (torch.Tensor, torch.nn.Parameter)):
            raise JudgeError(f"the kernel put a {type(value).__name__} among a module's {slot}")
        return value

    def late(self, call, reply):
        values = []
        for item in self._changed(reply):
            for slot in ("params", "buffers"):
                values += [v for _, v in self._entries(item, slot) if v is not None]
        return values

    def check(self, call, reply):
        """The new training flags and slot tables, in the form the judge sent them (applied by settle)."""
        planned = call.state(self)
        for item in self._changed(reply):
            m = call.sent_object(item.get("n"), (torch.nn.Module,))
            if item.get("children_changed"):
                raise JudgeError("the learner's function replaced a submodule, which the judge cannot mirror")
            if not isinstance(item.get("training"), bool):
                raise JudgeError("the kernel's training flag is not a bool")
            tables = []
            for slot, table in (("params", m._parameters), ("buffers", m._buffers)):
                if slot in item:
                    new = {k: None if v is None else self._checked(call.late(v), slot) for k, v in self._entries(item, slot)}
                    _same_form(m, slot, table, new)
                    tables.append((table, new))
            planned.append((m, item["training"], tables))

    def settle(self, call, reply):
        for m, training, tables in call.state(self):
            m.training = training
            for table, new in tables:
                table.clear()
                table.update(new)

    @staticmethod
    def _changed(reply: dict) -> list:
        changed = reply.get("modules", [])
        if not isinstance(changed, list) or len(changed) > MAX_SLOTS or not all(isinstance(x, dict) for x in changed):
            raise JudgeError("the kernel's answer about a module is malformed")
        return changed

    @staticmethod
    def _entries(item: dict, slot: str) -> list:
        entries = item.get(slot, [])
        if not isinstance(entries, list) or len(entries) > MAX_SLOTS or not all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in entries):
            raise JudgeError("the kernel's module slots are malformed")
        return entries

    # -- the agent's end --------------------------------------------------------------------
    def prepare(self, call, request):
        r = call.state(self)
        for name in request.get("fixtures", []):
            r.courses[name] = importlib.import_module(name)

    def receive(self, call, v):
        r = call.state(self)
        cls = module_class(v["module"], v["type"], r.courses)
        if cls is None:
            raise ValueError(f"the agent cannot rebuild a {str(v['type'])[:80]}")
        m = cls.__new__(cls)
        _module_init(m)
        call.keep(v["n"], m)
        r.modules[v["n"]] = m
        for k, a in v["attrs"]:
            if k in MODULE_INTERNALS or k.startswith("__"):
                raise ValueError(f"a module attribute {k!r}")
            m.__dict__[k] = call.receive(a)
        m.training = _bool(v["training"])
        for k, p in v["params"]:
            p = None if p is None else call.receive(p)
            if p is not None and _type(p) is not _Parameter:
                raise ValueError("a module parameter that is not a Parameter")
            m._parameters[k] = p
        for k, b in v["buffers"]:
            m._buffers[k] = None if b is None else call.receive(b)
        m._non_persistent_buffers_set.update(v["non_persistent"])
        for k, c in v["children"]:
            m._modules[k] = None if c is None else call.receive(c)
        for h in v.get("pre_hooks", []):
            m.register_forward_pre_hook(call.receive(h))
        return m

    def snapshot(self, call):
        r = call.state(self)
        r.slots = {n: _slots(m) for n, m in r.modules.items()}

    def answer(self, call, m, depth):
        """A module the call made (a copy of a model): its class by name, its state by value."""
        if not _isinstance(m, _Module):
            return None
        named = module_name(_type(m), call.state(self).courses)
        if named is None or _hooks_refused(m) or not all(call.kind("hook").allowed(h) for h in m._forward_pre_hooks.values()):
            return None      # kept in the kernel, by handle
        entry = {"k": "module", "n": call.tie(m), "module": named[0], "type": named[1], "training": m.training}
        entry["attrs"] = [[k, call.answer(v, depth + 1)] for k, v in m.__dict__.items() if k not in MODULE_INTERNALS]
        for slot, table in (("params", m._parameters), ("buffers", m._buffers)):
            entry[slot] = [[k, None if x is None else call.answer(x, depth + 1)] for k, x in table.items()]
        entry["non_persistent"] = sorted(m._non_persistent_buffers_set)
        entry["children"] = [[k, None if c is None else call.answer(c, depth + 1)] for k, c in m._modules.items()]
        entry["pre_hooks"] = [call.answer(h, depth + 1) for h in m._forward_pre_hooks.values()]
        return entry

    def report(self, call, returned):
        if not returned:
            return {}
        r, changed = call.state(self), []
        for n, m in r.modules.items():
            params, buffers, children, training = r.slots[n]
            now = _slots(m)
            entry = {"n": n, "training": m.training}
            if now[2] != children:
                entry["children_changed"] = True
            if now[0] != params:
                entry["params"] = [[k, None if p is None else call.answer(p)] for k, p in m._parameters.items()]
            if now[1] != buffers:
                entry["buffers"] = [[k, None if b is None else call.answer(b)] for k, b in m._buffers.items()]
            if _len(entry) > 2 or m.training != training:
                changed.append(entry)
        return {"modules": changed}


def _behaviour(attribute) -> bool:
    """A class attribute that an instance attribute of the same name would replace in behaviour: a
    method, a property or another descriptor (``forward``)."""
    return attribute is not None and (callable(attribute) or hasattr(attribute, "__get__"))


def _same_form(m, slot: str, before: dict, after: dict) -> None:
    """Parameters or buffers put back in the names, shapes and dtypes the judge sent them in."""
    what = type(m).__name__
    if set(before) != set(after):
        raise JudgeError(f"the learner's function added or removed {slot} of a {what}, which the judge does not mirror")
    for k, old in before.items():
        new = after[k]
        if (old is None) != (new is None):
            raise JudgeError(f"the kernel put back the {k} of a {what} as {'None' if new is None else 'a tensor'}, "
                             f"where the judge sent {'None' if old is None else 'a tensor'}")
        if old is not None and (new.shape != old.shape or new.dtype != old.dtype or new.device != old.device):
            raise JudgeError(f"the kernel put back the {k} of a {what} with shape {tuple(new.shape)} and {new.dtype}, "
                             f"where the judge sent {tuple(old.shape)} and {old.dtype}")
