"""The pipe between the grader and a submission's judge process: framed messages, each bounded.

One stream socket per submission: the grader keeps one end, the judge server forks that
submission's judge with the other.  A message is a frame: one byte saying its kind, four its
length (big-endian), then that many bytes.  The reader checks the kind and the length against
what it expects before it reads the rest, so a judge that sends garbage or too much is found
before anything of it is parsed.

grader -> judge:

- ``CELL``: a judged test's source (UTF-8), from the gradebook; the judge runs it and answers
  ``OUTPUTS`` after any number of ``REQUEST`` / ``ANSWER`` or ``FAILED`` round trips;
- ``ANSWER``: the kernel's answer to the last request, four bytes the length of what the call
  printed, that text, then the answer's raw text exactly as the kernel sent it (the repr of a str,
  which the judge parses, never the grader);
- ``FAILED``: no answer to the last request (JSON: ``{"error": TimeoutError | DeadKernel |
  NoAnswer, "message": ...}``).

judge -> grader:

- ``REQUEST``: a request for the kernel's agent, JSON text that the grader does not parse (it
  goes into the user expression as a str);
- ``OUTPUTS``: the cell's outputs as JSON, which the grader checks (:func:`checked_outputs`):
  at most a few, stream text and an error's name (from a safe alphabet) and value, each bounded.

When the grader is done with a submission it closes its end; the judge exits at end of file.
"""
from __future__ import annotations

import asyncio
import json
import re
import struct

CELL, ANSWER, FAILED = b"c", b"a", b"f"
REQUEST, OUTPUTS = b"r", b"o"
HEADER = struct.Struct(">cI")
MAX_REQUEST = 64 << 20          # one request of the judge (arguments by value), like one answer
MAX_OUTPUTS = 4                 # outputs of one cell: what it printed, and its error
MAX_EVALUE = 64 << 10           # an error's value, in characters
ENAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")
GRACE = 10.0                    # seconds past a cell's deadline before a silent judge is stopped


class JudgeStopped(Exception):
    """The judge stopped answering as a judge does: it ended (a crash, a limit), sent what is not a
    judge's message, or ran past its time.  ``str()`` says which, in words."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def answer_payload(text: str, printed: str) -> bytes:
    """An ``ANSWER`` frame's payload: what the call printed, then the kernel's text as it came."""
    said = printed.encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(said)) + said + text.encode("utf-8", "surrogatepass")


def split_answer(payload: bytes) -> tuple[str, str]:
    """(the kernel's text, what the call printed) from an ``ANSWER`` payload."""
    (n,) = struct.unpack_from(">I", payload)
    printed = payload[4:4 + n].decode("utf-8", "surrogatepass")
    return payload[4 + n:].decode("utf-8", "surrogatepass"), printed


def checked_outputs(payload: bytes, text_limit: int) -> list[dict]:
    """A cell's outputs as the judge sent them, checked and rebuilt from their allowed fields
    (nbformat's stream and error outputs); anything else raises :class:`JudgeStopped`."""
    broken = JudgeStopped("it sent outputs that are not a cell's outputs")
    try:
        items = json.loads(payload)
    except (ValueError, RecursionError):
        raise broken from None
    if not isinstance(items, list) or len(items) > MAX_OUTPUTS:
        raise broken
    outputs = []
    for item in items:
        if not isinstance(item, dict):
            raise broken
        kind = item.get("output_type")
        if kind == "stream" and item.get("name") in ("stdout", "stderr") and isinstance(item.get("text"), str) \
                and len(item["text"]) <= text_limit:
            outputs.append({"output_type": "stream", "name": item["name"], "text": item["text"]})
        elif kind == "error" and isinstance(item.get("ename"), str) and ENAME.fullmatch(item["ename"]) \
                and isinstance(item.get("evalue"), str) and len(item["evalue"]) <= MAX_EVALUE:
            ename, evalue = item["ename"], item["evalue"]
            outputs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                            "traceback": [f"{ename}: {evalue}"]})
        else:
            raise broken
    return outputs


class JudgeChannel:
    """The grader's end of one submission's judge: runs cells there, relaying its requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, output_limit: int):
        self.reader, self.writer = reader, writer
        self.max_outputs = 2 * output_limit + (1 << 20)   # the learner's prints, and the test's own

    @classmethod
    async def open(cls, sock, output_limit: int) -> "JudgeChannel":
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except OSError:
            raise JudgeStopped("it ended") from None
        return cls(reader, writer, output_limit)

    async def run_cell(self, source: str, deadline: float, relay) -> list[dict]:
        """Run one judged test: its outputs, checked.  ``relay(request, deadline)`` sends a request
        to the kernel and returns (its raw answer text, what it printed), or raises TimeoutError,
        nbclient's DeadKernelError or ``transport.NoAnswer``, which the judge gets as ``FAILED``."""
        from nbclient.exceptions import DeadKernelError

        from .transport import NoAnswer

        loop = asyncio.get_running_loop()
        await self._send(CELL, source.encode("utf-8", "surrogatepass"))
        while True:
            kind, payload = await self._read(max(deadline, loop.time()) + GRACE, loop)
            if kind == OUTPUTS:
                return checked_outputs(payload, self.max_outputs)
            try:
                request = payload.decode("utf-8")
            except UnicodeDecodeError:
                raise JudgeStopped("it sent something that is not a judge's message") from None
            try:
                text, printed = await relay(request, deadline)
            except (TimeoutError, asyncio.TimeoutError) as exc:
                await self._failed("TimeoutError", str(exc))
            except DeadKernelError as exc:
                await self._failed("DeadKernel", str(exc))
            except NoAnswer as exc:
                await self._failed("NoAnswer", str(exc))
            else:
                await self._send(ANSWER, answer_payload(text, printed))

    async def _failed(self, error: str, message: str) -> None:
        await self._send(FAILED, json.dumps({"error": error, "message": message}).encode())

    async def _send(self, kind: bytes, payload: bytes) -> None:
        try:
            self.writer.write(frame(kind, payload))
            await self.writer.drain()
        except (ConnectionError, OSError):
            raise JudgeStopped("it ended") from None

    async def _read(self, until: float, loop) -> tuple[bytes, bytes]:
        """The judge's next frame, a ``REQUEST`` or ``OUTPUTS`` within its size, by ``until``."""
        try:
            header = await asyncio.wait_for(self.reader.readexactly(HEADER.size), max(0.0, until - loop.time()))
            kind, size = HEADER.unpack(header)
            limit = {REQUEST: MAX_REQUEST, OUTPUTS: self.max_outputs}.get(kind)
            if limit is None or size > limit:
                raise JudgeStopped("it sent something that is not a judge's message")
            payload = await asyncio.wait_for(self.reader.readexactly(size), max(0.0, until - loop.time()))
        except (asyncio.TimeoutError, TimeoutError):
            raise JudgeStopped("it ran past the test's time limit") from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            raise JudgeStopped("it ended") from None
        return kind, payload

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


class JudgeEnd:
    """The judge's end of the pipe (blocking): frames from and to the grader."""

    MAX_IN = {CELL: 16 << 20, ANSWER: 2 * MAX_REQUEST + (16 << 20), FAILED: 1 << 20}

    def __init__(self, sock):
        self.sock = sock
        self.file = sock.makefile("rb")

    def read(self) -> tuple[bytes, bytes]:
        """The grader's next frame; ``EOFError`` when it closed the pipe (the submission is done)."""
        header = self.file.read(HEADER.size)
        if len(header) < HEADER.size:
            raise EOFError
        kind, size = HEADER.unpack(header)
        if size > self.MAX_IN.get(kind, -1):
            raise EOFError
        payload = self.file.read(size)
        if len(payload) < size:
            raise EOFError
        return kind, payload

    def send(self, kind: bytes, payload: bytes) -> None:
        self.sock.sendall(frame(kind, payload))
