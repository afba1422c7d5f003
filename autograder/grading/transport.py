"""The judge's requests to the learner's kernel: Jupyter messages, their budgets and their waits.

Each request of the judge (a call of the learner's function, a name to look up) is one silent
``execute_request`` whose user expression calls the kernel's agent and evaluates to its answer:

    __copy_that_judge.serve('<request as JSON>', globals()) or __copy_that_judge.last_reply

The request travels in the user expression, not in the cell code: the kernel runs cell code through
IPython's input transformers and ipykernel's pure-Python hash of the code (for its file name),
seconds for the megabytes a storage can take; an expression is only evaluated.  Its value comes
back in the execute reply as text (the repr of a str).  That text is only size-checked here and
handed on as it came: the judge's process parses it (``judgeserver.parse_answer``), never the
grader.  What the learner's function prints on the way is collected from IOPub and counted against
the notebook's output budget; the requests and answers themselves count against a budget of their
own (``JUDGE_DATA_LIMIT``): storages and files of a megabyte or two are values, not output.

A request past the test's deadline interrupts the kernel and raises ``TimeoutError``; a kernel
found dead while waiting (checked once a second) raises nbclient's ``DeadKernelError``; no answer,
or one past its size, raises :class:`NoAnswer`.
"""
from __future__ import annotations

import asyncio
import json
import queue

from nbclient.exceptions import DeadKernelError

from ..kernel import guard

AGENT = "__copy_that_judge"    # the name the kernel's agent is imported under (jobs.INSTALL_SOURCE)
MAX_REPLY = 64 << 20           # one answer of the agent, in characters
# the judge's requests and the agent's answers of one notebook, in bytes (each answer is at most
# MAX_REPLY; the test decides how many calls there are, the kernel only how big the answers)
JUDGE_DATA_LIMIT = 256 << 20


class NoAnswer(Exception):
    """The kernel gave no usable answer to a request (the agent replaced, a budget passed)."""


class KernelTransport:
    """Sends the judge's requests to the kernel of one notebook (``client``: its ``jobs.LimitedClient``,
    whose kernel, output budget and pending guard restore the requests share)."""

    def __init__(self, client):
        self.client = client
        self.data = 0           # the requests and answers so far, in bytes

    async def request(self, request: str, deadline: float) -> tuple[str, str]:
        """Send one request (JSON text) to the agent; (the answer's raw text, what the call printed)."""
        client = self.client
        expression = f"{AGENT}.serve({request!r}, globals()) or {AGENT}.last_reply"
        code = ""
        restore, client.restore_pending = client.restore_pending, None
        if restore is not None:
            # the restore cell's code runs first: its report is taken out of what this request
            # printed and becomes that cell's output, as if it had run on its own (a failing
            # restore stays silent, which _finish flags, and the request still runs)
            code = f"try:\n    {guard.RESTORE_SOURCE}\nexcept BaseException:\n    pass\n"
        # silent: the kernel does not echo the code back on IOPub (one message in five) or count it
        # as a cell; what the learner's function prints still comes
        msg_id = client.kc.execute(code, silent=True, store_history=False, allow_stdin=False,
                                   user_expressions={"reply": expression})
        printed: list[str] = []
        try:
            text = await self._answer(msg_id, expression, printed, deadline)
        finally:
            if restore is not None:
                client.restored(restore, printed)
        return text, "".join(printed)

    async def _answer(self, msg_id: str, sent: str, printed: list[str], deadline: float) -> str:
        """The agent's answer to one request (``sent``: the expression that carried it), as the text
        the kernel sent, read from its messages; ``printed`` collects what the request printed."""
        client = self.client
        try:
            while True:
                msg = await self._next_msg(client.kc.get_iopub_msg, deadline)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                client.output_total += len(json.dumps(msg.get("content", {}), default=str))
                if client.output_total > client.output_limit:
                    self._flood()
                    raise NoAnswer("the output passed its limit")
                kind, content = msg["header"]["msg_type"], msg.get("content", {})
                if kind == "stream" and isinstance(content.get("text"), str):
                    printed.append(content["text"])
                elif kind == "status" and content.get("execution_state") == "idle":
                    break
            while True:
                reply = await self._next_msg(client.kc.get_shell_msg, deadline)
                if reply.get("parent_header", {}).get("msg_id") == msg_id:
                    break
        except (asyncio.TimeoutError, TimeoutError):   # the deadline passed (_next_msg)
            await self._interrupt()
            await self._until_idle(msg_id, grace=10)   # the interrupt must end this request, not the next
            raise TimeoutError("the learner's function ran past the test's time limit") from None
        expression = reply.get("content", {}).get("user_expressions", {}).get("reply", {})
        text = expression.get("data", {}).get("text/plain") if isinstance(expression, dict) else None
        if not isinstance(text, str) or len(text) > MAX_REPLY:
            raise NoAnswer("the kernel's agent gave no answer (was it replaced?)")
        # values by the megabyte both ways (a6b sends a 1.6 MB storage, and gets back the file a wrong
        # answer wrote from it) count against a budget of their own, not against the output's
        self.data += len(text) + len(sent)
        if self.data > JUDGE_DATA_LIMIT:
            self._flood()
            raise NoAnswer("the output passed its limit")
        return text

    def _flood(self) -> None:
        client = self.client
        client.flooded = client.kernel_died = True   # on_flood kills the kernel
        client.on_flood()

    async def _next_msg(self, get, deadline: float) -> dict:
        """The next message from one of the kernel's channels, by ``deadline``; a kernel that died
        on the way (killed for its output or memory, or ended by the learner's code) ends the
        notebook within a second, as nbclient's own wait does, instead of at the deadline."""
        loop = asyncio.get_running_loop()
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise asyncio.TimeoutError
            try:
                return await get(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not await self.client.km.is_alive():
                    self.client.kernel_died = True
                    raise DeadKernelError("the kernel died while the judge waited for its answer") from None

    async def _until_idle(self, msg_id: str, grace: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + grace
        while loop.time() < end:
            try:
                msg = await self.client.kc.get_iopub_msg(timeout=max(0.1, end - loop.time()))
            except Exception:
                return
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg["header"]["msg_type"] == "status"
                    and msg.get("content", {}).get("execution_state") == "idle"):
                return

    async def _interrupt(self) -> None:
        try:
            await self.client.km.interrupt_kernel()
        except Exception:
            pass
