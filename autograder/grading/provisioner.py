"""How jupyter_client starts and watches a kernel that a slot's fork server forks.

nbclient starts a kernel through a kernel manager; here its provisioner asks the slot's fork
server for a fork instead of starting a process, and answers jupyter_client's questions about
that process (alive? signal it, wait for it) through the same server.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import time
from queue import Empty

import zmq
from jupyter_client import AsyncKernelClient, AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from .bwrap import SlotError

# one message from the kernel, in bytes: a judged request's answer (transport.MAX_REPLY, 64 MiB of
# text) with room for its envelope; outputs are far below it (the notebook's budget is 2 MiB)
MAX_MESSAGE = 96 << 20


def _user_tasks() -> int:
    """Processes and threads of this user (what RLIMIT_NPROC counts)."""
    import psutil

    uid, count = os.getuid(), 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = proc.info["uids"], proc.info["num_threads"]
        if uids is not None and uids.real == uid:
            count += threads or 0
    return count


class QuickReadyClient(AsyncKernelClient):
    """jupyter_client's kernel client, with a shorter wait in its readiness check, and a cap on the
    size of one message from the kernel.

    ``wait_for_ready`` asks for ``kernel_info`` and then waits 0.2 s for any IOPub message, to be
    sure IOPub is connected; a forked kernel is up in a few hundredths of a second, so that wait
    was most of a kernel's start.  This asks again every 20 ms instead: the same two conditions.
    Its sockets connect before the forked kernel has bound its ports, and zmq tries a refused
    connection again only after ``RECONNECT_IVL``, 100 ms by default: here 5 ms, doubling up to
    the same 100 ms (about 0.1 s less for every submission).

    Budgets count a message once the grader holds it, decoded: one message of 300 MB made the
    grader grow by 860 MiB before the output budget stopped the kernel.  zmq drops a message past
    ``MAX_MESSAGE`` as it arrives (and the connection it came on, which is made again), so the
    grader never holds one; what it carried is lost, as if the kernel had not sent it.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)   # for every socket made after this
        self.context.setsockopt(zmq.RECONNECT_IVL, 5)
        self.context.setsockopt(zmq.RECONNECT_IVL_MAX, 100)

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else 60)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=0.5)
            except Empty:
                msg = None
            if msg is not None and msg["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=0.02)
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(msg)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")

    wait_for_ready = _async_wait_for_ready


class SlotKernelManager(AsyncKernelManager):
    """jupyter_client's kernel manager, with a quicker look at a kernel it has just killed.

    Once it has signalled the kernel, jupyter_client waits for its end in steps of 100 ms, and the
    first step is always taken: a forked kernel killed with SIGKILL is gone within milliseconds,
    so each submission's teardown paid about 0.1 s for nothing.  This looks after 2 ms, then
    after twice as long each time, up to the same 100 ms."""

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        pause = 0.002
        while await self._async_is_alive():
            await asyncio.sleep(pause)
            pause = min(pause * 2, pollinterval)


class _ForkedKernel:
    """Enough of ``subprocess.Popen`` for jupyter_client, answered by the fork server."""

    stdin = stdout = stderr = None

    def __init__(self, slot, pid: int):   # slot: a sandbox.Slot
        self.slot = slot
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.slot.request({"op": "poll"})["status"]
            except SlotError:
                self.returncode = -9
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                self.slot.request({"op": "signal", "signum": int(signum)})
            except SlotError:
                self.returncode = -9

    def kill(self) -> None:
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)


class SlotProvisioner(LocalProvisioner):
    """Launches the kernel by asking the slot's fork server to fork one."""

    slot = None      # the sandbox.Slot whose fork server forks the kernel
    limits = None    # its sandbox.Limits

    async def launch_kernel(self, cmd, **kwargs):
        conn = self.parent.connection_file
        if self.slot.uid is not None:
            os.chown(conn, self.slot.uid, self.slot.uid)
        limits = self.limits.kernel_limits()
        if self.slot.uid is None:
            # RLIMIT_NPROC counts every task of the real user: leave room for what already runs
            limits["processes"] = 0 if os.geteuid() == 0 else _user_tasks() + limits["processes"]
        reply = self.slot.request({"op": "run", "connection_file": conn, "cwd": str(self.slot.dir),
                                   "limits": limits})
        self.process = _ForkedKernel(self.slot, reply["pid"])
        self.pid = reply["pid"]
        self.pgid = None
        self.cwd = str(self.slot.dir)
        return self.connection_info
