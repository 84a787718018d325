"""A head's role over its lease (`ops/leadership.py`), against a lease that does what the test
says: active at start when the lease is free, standby until it is, ready only after recovery,
and lost when another head has the lease or it could not be renewed for a whole timeout."""

from __future__ import annotations

import asyncio

import pytest

from yolo_orch.ops.leadership import Leadership, Role

TIMEOUT_S = 0.2


class FakeLease:
    def __init__(self) -> None:
        self.holder: str | None = None
        self.epoch = 0
        self.fences: list[int | None] = []
        self.renewals: list[bool | Exception] = []
        """What the next renewals answer; an empty list renews."""

    def fence(self, epoch: int | None) -> None:
        self.fences.append(epoch)

    async def try_take(self, holder: str, url: str, timeout_s: float) -> int | None:
        if self.holder not in (None, holder):
            return None
        self.holder, self.epoch = holder, self.epoch + 1
        return self.epoch

    async def renew(self, epoch: int, timeout_s: float) -> bool:
        answer = self.renewals.pop(0) if self.renewals else True
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def active_url(self) -> str | None:
        return None if self.holder is None else f"http://{self.holder}"


def leadership(lease: FakeLease, recovered: list[int], fail: bool = False) -> Leadership:
    async def on_active() -> None:
        assert head.role is Role.STANDBY  # not ready meanwhile
        assert head.active_url is None
        assert lease.fences[-1] == head.epoch  # recovery's writes are fenced by its epoch
        recovered.append(lease.epoch)
        if fail:
            raise RuntimeError("recovery failed")

    head = Leadership(lease, name="me", url="http://me", timeout_s=TIMEOUT_S, on_active=on_active)
    return head


async def test_a_head_finding_the_lease_free_is_active_before_it_serves() -> None:
    lease, recovered = FakeLease(), []
    head = leadership(lease, recovered)
    await head.start()
    assert (head.role, head.epoch, head.active_url) == (Role.ACTIVE, 1, "http://me")
    assert recovered == [1]
    assert lease.fences == [None, 1]


async def test_a_standby_points_at_the_active_head_and_takes_over_when_it_goes() -> None:
    lease, recovered = FakeLease(), []
    lease.holder = "other"
    head = leadership(lease, recovered)
    await head.start()
    task = asyncio.create_task(head.run())
    await asyncio.sleep(0.05)
    assert (head.role, head.active_url, lease.fences) == (Role.STANDBY, "http://other", [None])
    lease.holder = None  # the other head's session ended
    await asyncio.sleep(0.05)
    assert (head.role, head.epoch, recovered) == (Role.ACTIVE, 1, [1])
    task.cancel()


async def test_an_active_head_whose_lease_passed_to_another_is_lost() -> None:
    lease, recovered = FakeLease(), []
    head = leadership(lease, recovered)
    await head.start()
    lease.renewals = [True, False]
    await asyncio.wait_for(head.run(), timeout=1)
    assert head.lost.is_set()
    assert (head.role, head.active_url, lease.fences[-1]) == (Role.LOST, None, None)


@pytest.mark.parametrize(("failures", "lost"), [(2, False), (8, True)])
async def test_renewals_may_fail_for_less_than_a_timeout(failures: int, lost: bool) -> None:
    """Renewals come every quarter timeout: two failing in a row are survived, eight are not."""
    lease, recovered = FakeLease(), []
    head = leadership(lease, recovered)
    await head.start()
    lease.renewals = [ConnectionError("database down")] * failures
    run = asyncio.create_task(head.run())
    await asyncio.sleep(TIMEOUT_S / 4 * (failures + 2))
    assert head.lost.is_set() is lost
    assert head.role is (Role.LOST if lost else Role.ACTIVE)
    run.cancel()


async def test_a_takeover_whose_recovery_fails_gives_the_lease_up() -> None:
    lease, recovered = FakeLease(), []
    lease.holder = "other"
    head = leadership(lease, recovered, fail=True)
    await head.start()
    run = asyncio.create_task(head.run())
    lease.holder = None
    await asyncio.wait_for(run, timeout=1)
    assert recovered == [1]
    assert head.lost.is_set()
    assert head.role is Role.LOST
