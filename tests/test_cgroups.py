"""cgroup v2 delegation on a fake cgroup tree (this machine runs cgroup v1): the grader's own group
holds the grader, so its processes go into a leaf before the controllers are enabled for the
slots ("no internal processes"), as a service under systemd's ``Delegate=yes`` does."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading import cgroups


def _group(path: Path, procs: list[int], controllers: str = "cpu memory pids", enabled: str = "") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs))
    (path / "cgroup.controllers").write_text(controllers + "\n")
    (path / "cgroup.subtree_control").write_text(enabled + "\n")
    return path


class FakeKernel:
    """The two rules that matter here: a pid written to a group's cgroup.procs leaves its old
    group, and controllers cannot be enabled in a group that still holds processes."""

    def __init__(self, monkeypatch, parent: Path):
        self.parent, self.order = parent, []
        monkeypatch.setattr(cgroups, "_move", self.move)
        real_write = Path.write_text

        def write_text(path, data, *args, **kwargs):
            if path.name == "cgroup.subtree_control" and path.parent == self.parent:
                if (self.parent / "cgroup.procs").read_text().split():
                    raise OSError(16, "Device or resource busy")      # EBUSY: internal processes
                self.order.append("enable")
                data = " ".join(c.lstrip("+") for c in data.split())
            return real_write(path, data, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", write_text)

    def move(self, pid: str, leaf: Path) -> None:
        procs = (self.parent / "cgroup.procs").read_text().split()
        (self.parent / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs if p != pid))
        if pid == "999":                     # a process that ended before it was moved
            raise ProcessLookupError(pid)
        with open(leaf / "cgroup.procs", "a") as f:
            f.write(pid + "\n")
        self.order.append(f"move {pid}")


def test_the_graders_processes_move_into_a_leaf_before_the_controllers_are_enabled(tmp_path, monkeypatch):
    mount = tmp_path / "cgroup"
    parent = _group(mount / "system.slice" / "grader.service", [101, 102, 999])
    kernel = FakeKernel(monkeypatch, parent)
    assert cgroups._v2_parent(mount, "/system.slice/grader.service") == parent
    assert kernel.order == ["move 101", "move 102", "enable"]
    assert (parent / cgroups.LEAF / "cgroup.procs").read_text().split() == ["101", "102"]
    assert set((parent / "cgroup.subtree_control").read_text().split()) == {"memory", "pids"}
    assert "2 process(es) moved" in cgroups._v2_note


def test_without_the_leaf_the_kernel_refuses(tmp_path, monkeypatch):
    """The control: enabling controllers with the grader still in its group fails, as it did
    before the move (and the grader fell back to per-process limits)."""
    mount = tmp_path / "cgroup"
    parent = _group(mount / "grader.service", [101])
    FakeKernel(monkeypatch, parent)
    with pytest.raises(OSError):
        (parent / "cgroup.subtree_control").write_text("+memory +pids")


def test_a_grader_already_in_the_leaf_uses_its_parent(tmp_path, monkeypatch):
    mount = tmp_path / "cgroup"
    parent = _group(mount / "grader.service", [], enabled="memory pids")
    _group(parent / cgroups.LEAF, [101])
    assert cgroups._v2_parent(mount, f"/grader.service/{cgroups.LEAF}") == parent
    assert cgroups._v2_note == "controllers already enabled"


def test_controllers_not_delegated_are_said(tmp_path, monkeypatch):
    mount = tmp_path / "cgroup"
    _group(mount / "grader.service", [101], controllers="cpu")
    assert cgroups._v2_parent(mount, "/grader.service") is None
    assert "memory, pids are not delegated" in cgroups._v2_note


def test_a_group_not_delegated_to_the_grader_is_not_used(tmp_path, monkeypatch):
    mount = tmp_path / "cgroup"
    _group(mount / "grader.service", [101])
    monkeypatch.setattr(cgroups.os, "access", lambda path, mode: False)
    assert cgroups._v2_parent(mount, "/grader.service") is None


@pytest.mark.parametrize("version,stat,expected", [
    ("v2", "anon 1000\nfile 50000\nshmem 300\n", 1300),
    ("v1", "cache 50000\nrss 1000\nshmem 300\ntotal_rss 9\n", 1300),
])
def test_resident_memory_leaves_the_page_cache_out(tmp_path, version, stat, expected):
    group = object.__new__(cgroups.SlotCgroup)
    group.version, group.dirs = version, [tmp_path]
    (tmp_path / "memory.stat").write_text(stat)
    assert group.resident() == expected


def test_a_slot_that_holds_more_than_when_it_was_clean_says_how_much(tmp_path):
    from autograder.grading.sandbox import Slot

    group = object.__new__(cgroups.SlotCgroup)
    group.version, group.dirs = "v2", [tmp_path]
    slot = object.__new__(Slot)
    slot.cgroup = group
    (tmp_path / "memory.stat").write_text("anon 100\nshmem 0\n")
    slot.clean_resident = group.resident()
    (tmp_path / "memory.stat").write_text(f"anon 100\nshmem {256 << 20}\n")   # a segment left behind
    assert slot.held_since_clean() == 256 << 20
    slot.cgroup = None
    assert slot.held_since_clean() == 0
