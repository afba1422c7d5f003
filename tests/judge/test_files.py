"""files.py: torch.load in a judged cell reads weights only, whatever the test or the environment
asks, and reads only an archive that torch.save could have written, checked entry by entry before
torch reads a byte of it (a small file that would expand to gigabytes is refused)."""
from __future__ import annotations

import io
import struct
import zipfile

import pytest
import torch

from autograder.judge import JudgeError
from autograder.judge.allow import MAX_LOAD_BYTES
from autograder.judge.files import check_archive, load_weights_only
from judge_helpers import run
from judge_corpus import judged_cells, only_exercise, source_cells


EVIL_SAVE = """
import builtins

class Evil:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.JUDGE_RAN_A_PICKLE = True",))

def save_compact(t, path):
    torch.save({"t": t.clone(), "evil": Evil()}, path)
"""


def test_a_malicious_pickle_from_the_kernel_never_runs_in_the_grader(monkeypatch):
    """A learner's file whose pickle would run code: judged, torch.load reads weights only whatever the
    test or the environment asks, and the test fails without the code running in the grader."""
    import builtins

    from harness import reference_answers

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    cells = only_exercise(source_cells("a6b_boundaries"), "save_compact")
    judged = judged_cells(cells, reference_answers("a6b_boundaries") | {"save_compact": EVIL_SAVE})
    assert not hasattr(builtins, "JUDGE_RAN_A_PICKLE")
    assert "UnpicklingError" in judged["test_save_compact"] and "UnpicklingError" in judged["test_save_compact_hidden"]
    for load in ("torch.load(path, weights_only=False)", "torch.load(path, None, pickle)",
                 "__import__('torch').load(path, weights_only=False)"):
        test = f"""
import pickle
import torch
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "evil.pt")
    save_compact(torch.ones(2), path)
    {load}
"""
        errors, _, _ = run(EVIL_SAVE, test)
        assert errors and errors[0]["ename"] == "UnpicklingError", (load, errors)
        assert not hasattr(builtins, "JUDGE_RAN_A_PICKLE")


def _zip(entries: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return out.getvalue()


def _declaring(data: bytes, parts: int, declared: int) -> bytes:
    """A zip archive of ``parts`` stored entries of ``data`` whose central directory declares ``declared``
    bytes each (more than the data: a reader that trusts it allocates that much)."""
    raw = bytearray(_zip({f"archive/data/{i}": data for i in range(parts)}))
    at = 0
    for _ in range(parts):
        at = raw.index(b"PK\x01\x02", at) + 4
        struct.pack_into("<I", raw, at + 20, declared)        # the uncompressed size, 4 bytes
    return bytes(raw)


def test_a_file_torch_save_wrote_is_loaded(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    check_archive(str(path))
    assert torch.equal(load_weights_only(str(path))["w"], torch.arange(4.0))
    buffer = io.BytesIO()
    torch.save(torch.ones(2), buffer)
    buffer.seek(0)
    assert torch.equal(load_weights_only(buffer), torch.ones(2)) and buffer.tell() > 0


def test_a_small_file_that_expands_past_the_caps_is_refused_before_torch_reads_it(tmp_path):
    """2 MB that declare 6 GB; 64 KB that inflate to 64 MB; too many entries; not a zip at all."""
    bomb = _declaring(bytes(1 << 20), 2, 3 << 30)
    assert len(bomb) < (2 << 20) + 4096
    assert sum(e.file_size for e in zipfile.ZipFile(io.BytesIO(bomb)).infolist()) == 6 << 30
    deflated = _zip({"archive/data/0": bytes(64 << 20)}, zipfile.ZIP_DEFLATED)
    assert len(deflated) < 128 << 10
    many = _zip({f"archive/data/{i}": b"" for i in range(10_001)})
    for data, message in ((bomb, "declares"), (deflated, "declares"), (many, "entries"),
                          (b"\x80\x02legacy pickle", "not an archive")):
        path = tmp_path / "x.pt"
        path.write_bytes(data)
        with pytest.raises(JudgeError, match=message):
            load_weights_only(str(path))
    assert 6 << 30 > MAX_LOAD_BYTES


def test_a_bomb_the_learners_function_writes_fails_the_test_with_the_judges_error():
    learner = """
import zipfile
def save_compact(t, path):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", bytes(32 << 20))
"""
    test = """
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "x.pt")
    save_compact(torch.ones(2), path)
    ck.check_close(torch.load(path), [1.0, 1.0], "torch.load(path)")
"""
    errors, _, _ = run(learner, test)
    assert errors and errors[0]["ename"] == "JudgeError" and "not loaded" in errors[0]["evalue"], errors
