"""The connection book's arithmetic and shedding order, with connections that are plain objects."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import pytest

from yolo_orch.api.connections import (
    LEAVING_CONNECTIONS,
    MIN_RESERVE,
    PENDING_CONNECTIONS,
    Admission,
    ConnectionBook,
    Hold,
    connection_limit,
)


@dataclass(eq=False)
class Conn:
    quiet: bool = True
    """Sheddable without pressure (idle, a held wait, a stalled body)."""
    fresh: bool = False
    """Just opened, nothing sent: sheddable only under pressure."""
    shed_calls: int = 0

    def sheddable(self, now: float, pressed: bool) -> bool:
        return self.quiet or (self.fresh and pressed)

    def shed(self) -> None:
        self.shed_calls += 1


@pytest.mark.parametrize(
    ("fd_limit", "expected"),
    [
        (1024, 1024 - MIN_RESERVE - PENDING_CONNECTIONS - LEAVING_CONNECTIONS),
        (20_000, 20_000 - 5_000 - PENDING_CONNECTIONS - LEAVING_CONNECTIONS),
        (200, 16),  # a tiny limit still takes some
    ],
)
def test_the_cap_keeps_a_reserve_of_descriptors(fd_limit: int, expected: int) -> None:
    assert connection_limit(fd_limit, None) == expected
    assert connection_limit(fd_limit, 7) == 7


def test_at_the_cap_the_quietest_sheddable_connection_gives_its_place() -> None:
    book = ConnectionBook(3, max_held=8)
    busy, idle_old, idle_new = Conn(quiet=False), Conn(), Conn()
    for conn in (busy, idle_old, idle_new):
        assert book.admit(conn) is Admission.ADMITTED
    newcomer = Conn()
    assert book.admit(newcomer) is Admission.ADMITTED
    assert (busy.shed_calls, idle_old.shed_calls, idle_new.shed_calls) == (0, 1, 0)
    book.touch(idle_new)  # it did something: now the last to go
    later = Conn()
    assert book.admit(later) is Admission.ADMITTED
    assert (newcomer.shed_calls, idle_new.shed_calls) == (1, 0)
    assert book.shed_total == 2


def test_with_none_to_shed_a_few_wait_for_their_request_then_the_rest_are_refused() -> None:
    book = ConnectionBook(1, max_held=8)
    book.admit(Conn(quiet=False))
    pending = [Conn() for _ in range(PENDING_CONNECTIONS)]
    assert all(book.admit(conn) is Admission.PENDING for conn in pending)
    assert book.admit(Conn()) is Admission.REFUSED
    assert book.refused_total == 1
    assert book.settle(pending[0]) is False  # still none to shed: only a probe is answered
    book.closed(pending[0], Admission.REFUSED)
    assert book.admit(Conn()) is Admission.PENDING  # its pending place came free


def test_a_request_in_hand_outranks_a_connection_that_sent_nothing() -> None:
    book = ConnectionBook(1, max_held=8)
    silent = Conn(quiet=False, fresh=True)
    book.admit(silent)
    speaker = Conn()
    assert book.admit(speaker) is Admission.PENDING  # the silent one may be about to speak
    assert book.settle(speaker) is True
    assert silent.shed_calls == 1


def test_once_pending_places_are_full_new_connections_displace_silent_ones() -> None:
    book = ConnectionBook(1, max_held=8)
    silent = Conn(quiet=False, fresh=True)
    book.admit(silent)
    for _ in range(PENDING_CONNECTIONS):
        book.admit(Conn(quiet=False))
    assert book.admit(Conn()) is Admission.ADMITTED
    assert silent.shed_calls == 1


def test_places_are_taken_from_leaving_connections_only_while_few_are_leaving() -> None:
    book = ConnectionBook(1, max_held=8)
    book.admit(Conn())
    for _ in range(LEAVING_CONNECTIONS):  # each sheds the one before, which has not closed
        assert book.admit(Conn()) is Admission.ADMITTED
    assert book.admit(Conn()) is Admission.PENDING
    assert book.open_count == 1 + LEAVING_CONNECTIONS + 1


def test_a_closed_connection_frees_its_place() -> None:
    book = ConnectionBook(1, max_held=8)
    first = Conn(quiet=False)
    book.admit(first)
    book.closed(first, Admission.ADMITTED)
    assert book.admit(Conn(quiet=False)) is Admission.ADMITTED
    assert book.open_count == 1


async def test_past_max_held_the_oldest_held_request_is_answered_now() -> None:
    book = ConnectionBook(100, max_held=2)
    holds = [Hold(book) for _ in range(3)]
    scopes = [anyio.CancelScope() for _ in holds]
    with holds[0].interrupting(scopes[0]), holds[1].interrupting(scopes[1]):
        assert not any(scope.cancel_called for scope in scopes)
        with holds[2].interrupting(scopes[2]):
            assert [scope.cancel_called for scope in scopes] == [True, False, False]
    assert book.shed_total == 1
    again = anyio.CancelScope()
    with Hold(book).interrupting(again):  # the ended ones were released
        assert not again.cancel_called
