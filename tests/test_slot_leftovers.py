"""The fork server's reap removes the kernel objects a submission leaves in the sandbox's IPC
namespace and POSIX IPC folders, and says what it removed.

Run in a new IPC namespace of its own (``unshare --ipc``), never in the test machine's: the
removal takes every SysV object of the namespace it runs in.  Skipped where that namespace cannot
be made; the sandboxed end-to-end case is ``leaves-ipc`` in the tamper corpus."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

SCRIPT = r"""
import ctypes, json, os, sys
from autograder.grading.forkserver import remove_leftovers
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
seg = libc.shmget(0, 8 << 20, 0o1600)
addr = libc.shmat(seg, None, 0)
ctypes.memset(addr, 1, 8 << 20)
libc.shmdt(ctypes.c_void_p(addr))
libc.semget(0, 3, 0o1600)
libc.msgget(0, 0o1600)
folder = sys.argv[1]
with open(os.path.join(folder, "psm_left"), "wb") as f:
    f.write(b"x" * 4096)
first = remove_leftovers(dirs=[folder])
second = remove_leftovers(dirs=[folder])
shm = open("/proc/sysvipc/shm").read().splitlines()[1:]
print(json.dumps({"first": first, "second": second, "shm_after": shm, "files": os.listdir(folder)}))
"""


def test_reap_removes_sysv_and_posix_objects_and_says_so(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--ipc", "true"], capture_output=True).returncode != 0:
        pytest.skip("no IPC namespace can be made here (unshare --ipc needs privileges)")
    folder = tmp_path / "shm"
    folder.mkdir()
    out = subprocess.run([unshare, "--ipc", sys.executable, "-c", SCRIPT, str(folder)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    first = " ".join(got["first"])
    assert "SysV shared memory segment of 8,388,608 bytes" in first
    assert "SysV semaphore set" in first and "SysV message queue" in first
    assert "psm_left (4,096 bytes)" in first
    assert got["second"] == [] and got["shm_after"] == [] and got["files"] == []


KEY_SCRIPT = r"""
import ctypes, json, os, platform
from autograder.grading.nokeys import deny_keyrings
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
def add(name):
    made = libc.syscall(ADD_KEY, b"user", name, b"x", 1, ctypes.c_int(-4))
    return "made" if made >= 0 else os.strerror(ctypes.get_errno())
before = add(b"copy-that-probe-before")
refused = deny_keyrings()
after = add(b"copy-that-probe-after")
read = libc.syscall(KEYCTL, 0, ctypes.c_int(-4), 0)     # KEYCTL_GET_KEYRING_ID of the user keyring
print(json.dumps({"before": before, "refused": refused, "after": after,
                  "keyctl": "allowed" if read >= 0 else os.strerror(ctypes.get_errno())}))
"""


def test_the_servers_filter_refuses_every_keyring_call():
    """What a sandbox's servers install before any submission runs (``nokeys``): add_key and keyctl
    answer EPERM, where the same process could make a key a moment before (the control)."""
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip(f"the filter knows x86_64 and aarch64, not {platform.machine()}")
    out = subprocess.run([sys.executable, "-c", KEY_SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    if seen["before"] != "made":
        pytest.skip(f"keyrings are closed here already ({seen['before']}): nothing to refuse")
    assert seen == {"before": "made", "refused": None, "after": "Operation not permitted",
                    "keyctl": "Operation not permitted"}, seen


def test_the_filter_jumps_land_inside_the_program():
    from autograder.grading.nokeys import RET_ALLOW, RET_EPERM, RET_K, program

    code = program()
    for i, (op, jt, jf, _) in enumerate(code):
        if op != RET_K:
            assert i + 1 + max(jt, jf) < len(code)
    assert code[-1] == (RET_K, 0, 0, RET_EPERM) and (RET_K, 0, 0, RET_ALLOW) in code
