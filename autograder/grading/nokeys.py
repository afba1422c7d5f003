"""No kernel keyrings in a sandbox: a seccomp filter that answers ``add_key``, ``request_key`` and
``keyctl`` with EPERM.

A key outlives the process that made it: it sits in its user's keyring in the kernel, where no
process, file, mount or IPC namespace of the sandbox holds it, so neither the fork server's reap
nor a slot's restart would see it, and the next submission run as the same user could read it
(a channel from one student's grading to another's).  Nothing a notebook of this course does needs
a keyring, so the fork server and the judge's server install this filter for themselves and every
process they fork before any submission runs.

The filter is a few classic BPF instructions built here (no libseccomp): for x86_64 (and its
i386 and x32 entry points) and aarch64; on another architecture nothing is installed and
:func:`deny_keyrings` says so.
"""
from __future__ import annotations

import ctypes
import errno
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
LD_ABS_W, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
ARCH_OFFSET, NR_OFFSET = 4, 0
X32_BIT = 0x40000000
KEY_CALLS = {                           # audit arch -> (add_key, request_key, keyctl)
    0xC000003E: (248, 249, 250),        # x86_64
    0x40000003: (286, 287, 288),        # i386 (int 0x80 from a 64-bit process)
    0xC00000B7: (217, 218, 219),        # aarch64
}


def program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; labels resolved to relative jumps."""
    code: list[list] = [[LD_ABS_W, 0, 0, ARCH_OFFSET]]
    for arch, numbers in KEY_CALLS.items():
        code.append([JEQ_K, 0, f"next-{arch}", arch])
        code.append([LD_ABS_W, 0, 0, NR_OFFSET])
        if arch == 0xC000003E:
            code.append([JGE_K, "deny", 0, X32_BIT])     # the x32 entry point: refused whole
        for nr in numbers:
            code.append([JEQ_K, "deny", 0, nr])
        code.append([RET_K, 0, 0, RET_ALLOW])
        code.append(f"next-{arch}")
    code.append([RET_K, 0, 0, RET_ALLOW])
    code.append("deny")
    code.append([RET_K, 0, 0, RET_EPERM])
    labels, out = {}, []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(out)
        else:
            out.append(item)
    for i, ins in enumerate(out):
        for j in (1, 2):
            if isinstance(ins[j], str):
                ins[j] = labels[ins[j]] - i - 1
    return [tuple(ins) for ins in out]


def deny_keyrings() -> str | None:
    """Install the filter on this process (inherited by all it forks); None, or why not."""
    import platform

    if platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return f"no keyring filter for {platform.machine()}"
    instructions = program()
    raw = b"".join(struct.pack("HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(instructions), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"seccomp refused: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"
    return None
