"""Jobs that wait for others: dependencies (`after`, `after_ok`), chains of steps a training
starts (`then`), and unique keys. Plain values: the store keeps them, the dispatcher obeys."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dependency:
    """A job another waits for: it stays queued, unstartable, until `job_id` has ended; with
    `ok_only` (`after_ok`), it is cancelled (`dependency_failed`) unless that job succeeded."""

    job_id: str
    ok_only: bool = False

    def released_by(self, succeeded: bool) -> bool:
        """Whether the end of `job_id` (`succeeded` or not) lets the waiting job go on, rather
        than cancel it."""
        return succeeded or not self.ok_only


MAX_DEPENDENCIES = 32
"""How many jobs one job may wait for: a bound on the work one submission's check costs."""

PRODUCED_BY = "job:"
"""A model reference that means the model a job produced (`job:<id>`): the steps of a chain
name their training's model so, before it exists; it resolves when the step starts."""


def produced_by(job_id: str) -> str:
    return f"{PRODUCED_BY}{job_id}"


def producer_of(model_ref: str) -> str | None:
    """The job id of a `job:<id>` reference; None for any other reference."""
    return model_ref[len(PRODUCED_BY) :] if model_ref.startswith(PRODUCED_BY) else None
