"""A small decoder for server-sent events (the `text/event-stream` format of the HTML standard).

Feed it the bytes of a response as they arrive; it hands back each complete event. Lines end in
LF, CR LF or CR (a line ending may be split across chunks); a blank line dispatches the event;
lines starting with `:` are comments (keep-alives); an event cut off by the end of the stream is
dropped, as the standard says.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSentEvent:
    event: str
    """The `event:` field; `message` when the event has none."""
    data: str
    """The `data:` lines, joined with newlines."""
    id: str | None
    """The last event id in effect when this event was dispatched (send it back as
    `Last-Event-ID` when reconnecting); None until the stream sets one."""
    retry_ms: int | None = None
    """The reconnection delay the stream asked for, if it did."""


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last complete line
        self._started = False  # a byte-order mark is skipped at the start only
        self._event = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry_ms: int | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events that `chunk` completes."""
        text = self._pending + self._text.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            cr, lf = text.find("\r", start), text.find("\n", start)
            if cr == -1 and lf == -1:
                break
            if cr != -1 and (lf == -1 or cr < lf):
                if cr + 1 == len(text):
                    break  # a CR at the end: the LF of a CR LF may come in the next chunk
                end, next_start = cr, cr + 2 if text[cr + 1] == "\n" else cr + 1
            else:
                end, next_start = lf, lf + 1
            event = self._line(text[start:end])
            if event is not None:
                events.append(event)
            start = next_start
        self._pending = text[start:]
        return events

    def close(self) -> list[ServerSentEvent]:
        """The end of the stream: a final line ended by a lone CR still counts, but an event
        without its blank line is dropped."""
        events: list[ServerSentEvent] = []
        if self._pending.endswith("\r"):
            event = self._line(self._pending[:-1])
            if event is not None:
                events.append(event)
        self._pending = ""
        self._event, self._data = "", []
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return ServerSentEvent(
            event=event or "message",
            data="\n".join(data),
            id=self._last_id,
            retry_ms=self._retry_ms,
        )


def decode_events(chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """Every complete event in a stream of byte chunks."""
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()
