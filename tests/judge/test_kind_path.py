"""kinds/path.py: a path in a folder of the test's goes as a fresh folder of the kernel's, holding the
same files; the files found there afterwards come back (no link followed, capped)."""
from __future__ import annotations

import pytest

from judge_helpers import fails, refused, run

FOLDER = "with tempfile.TemporaryDirectory() as d:\n    r = f(os.path.join(d, 'x'))"


def test_a_path_in_a_folder_of_the_test_goes_as_a_fresh_folder_and_its_files_come_back():
    test = """
with tempfile.TemporaryDirectory() as folder:
    with open(os.path.join(folder, "in.txt"), "w") as f:
        f.write("hello")
    path = os.path.join(folder, "x.pt")
    ck.check_equal(save(torch.arange(3.0), path), "hello", "what the kernel read from in.txt")
    ck.check_equal(sorted(os.listdir(folder)), ["x.pt"], "the folder after the call")
    ck.check_close(torch.load(path), [0.0, 1.0, 2.0], "torch.load(path)")
ck.ok("files")
"""
    learner = ("import os\ndef save(t, path):\n    folder = os.path.dirname(path)\n"
               "    text = open(os.path.join(folder, 'in.txt')).read()\n    os.remove(os.path.join(folder, 'in.txt'))\n"
               "    torch.save(t, {target})\n    return text\n")
    errors, printed, seen = run(learner.format(target="path"), test)
    assert not errors and printed == "\u2713 files\n", errors
    assert not any("judge-" in s for s in seen)       # the grader's folder's name never reaches the kernel
    fails(learner.format(target="path + '.bak'"), test, "the folder after the call is")


def test_links_are_not_followed_and_big_or_many_files_come_back_capped():
    learner = """
import os
def make(path, kind):
    folder = os.path.dirname(path)
    if kind == "link":
        secret = os.path.join(os.path.dirname(folder), "secret-of-the-kernel")
        with open(secret, "w") as f:
            f.write("kernel")
        os.symlink(secret, path)
        os.mkdir(os.path.join(folder, "sub"))
    elif kind == "big":
        with open(path, "wb") as f:
            f.write(b"x" * (9 << 20))
    else:
        for i in range(70):
            open(os.path.join(folder, f"{i:03}"), "w").close()
"""
    test = """
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "x.pt")
    make(path, "link")
    ck.check_equal(os.listdir(folder), [], "the folder after a link and a folder were made there")
    make(path, "big")
    ck.check_equal(os.path.getsize(path), 9 << 20, "the size of a file over the cap")
    with open(path, "rb") as f:
        ck.check_equal(f.read(4), bytes(4), "the bytes of a file over the cap (never sent)")
    os.remove(path)
    make(path, "many")
    ck.check_equal(len(os.listdir(folder)), 64, "files that came back")
ck.ok("capped")
"""
    errors, printed, _ = run(learner, test)
    assert not errors and printed == "\u2713 capped\n", errors


@pytest.mark.parametrize("entries", [
    [{"name": "../x", "size": 1, "data": "AA=="}], [{"name": "a/b", "size": 1, "data": "AA=="}],
    [{"name": "..", "size": 0, "data": ""}], [{"name": "x", "size": -1, "data": None}],
    [{"name": "x", "size": 2, "data": "AA=="}], [{"name": "x", "size": 1 << 50, "data": None}],
    [{"name": "x", "size": 1, "data": "AA=="}, {"name": "x", "size": 1, "data": "AA=="}],
    [{"name": str(i), "size": 0, "data": ""} for i in range(65)], "x", [["x", 1]],
    [{"name": "x", "size": 9 << 20, "data": "AAAA"}],
])
def test_a_forged_answer_about_a_folder_is_an_error_never_a_pass(entries):
    refused({"result": {"k": "v", "v": None}, "folders": [entries]}, FOLDER + "\nck.ok('passed')")


def test_a_forged_answer_about_folders_not_sent_is_an_error_never_a_pass():
    refused({"result": {"k": "v", "v": None}, "folders": [[], []]}, FOLDER + "\nck.ok('passed')")
    refused({"result": {"k": "path", "p": 0, "name": "x"}}, FOLDER + "\nck.ok('passed')")
