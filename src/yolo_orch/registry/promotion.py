"""A promotion (`kind: promote`, a chain's last step): move `name@alias` to the job's model if
the gate passes on the validation that scored it, and on the alias's current model scored on
the same split in the same chain (`not_worse`). The move is a compare-and-set: if the alias
moved since the chain looked (another promotion, a person), nothing is promoted. A promotion run
again after a crash finds the alias already moved and says so, promoted."""

from __future__ import annotations

from yolo_orch.domain import Job, JobResult, JobState, JsonObject
from yolo_orch.domain.aliases import parse_alias_ref
from yolo_orch.domain.chains import Gate, GateDecision, decide
from yolo_orch.domain.specs import PromoteSpec
from yolo_orch.errors import AliasMoved, AliasNotFound, DependencyFailed, InvalidJobInput
from yolo_orch.params.chains import PromoteParams
from yolo_orch.registry.aliases import AliasRegistry
from yolo_orch.store.base import JobStore


class Promotions:
    def __init__(self, jobs: JobStore, aliases: AliasRegistry) -> None:
        self._jobs = jobs
        self._aliases = aliases

    async def run(self, job: Job) -> JobResult:
        spec = job.spec_as(PromoteSpec)
        ref = parse_alias_ref(spec.alias)
        if ref is None:  # the request's pattern refuses it first
            raise InvalidJobInput(f"{spec.alias!r} is not name@alias")
        current = await self._target(ref.name, ref.alias)
        params = PromoteParams.from_job(job.params)
        gate = None if params.gate is None else params.gate.gate()
        summary: JsonObject = {
            "promoted": False,
            "alias": spec.alias,
            "from_model_id": current,
            "to_model_id": None,
            "gate": None,
            "reason": None,
        }
        if job.model_id is None:  # submission refuses a model the registry does not have
            raise InvalidJobInput(f"{job.model!r} is not a registry model")
        expected = current
        if gate is not None:
            decision, baseline_model = await self._decision(spec, gate)
            summary["gate"] = decision.figures(gate)
            if not decision.passed:
                return _result(summary, reason="the gate failed: " + "; ".join(decision.reasons))
            if spec.baseline is not None:
                expected = baseline_model  # the model the chain scored as the alias's
        if current == job.model_id:  # moved by an attempt before a crash, or by hand
            return _result(summary, promoted=True, to=job.model_id)
        try:
            await self._aliases.move(
                ref.name,
                ref.alias,
                job.model_id,
                actor=f"chain:{job.chain_id or job.id}",
                reason=f"promoted by job {job.id}",
                expected_model_id=expected,
            )
        except AliasMoved as exc:
            return _result(summary, reason=f"the alias moved during the chain ({exc.message})")
        return _result(summary, promoted=True, to=job.model_id)

    async def _target(self, name: str, alias: str) -> str | None:
        try:
            return (await self._aliases.get(name, alias)).model_id
        except AliasNotFound:
            return None

    async def _decision(self, spec: PromoteSpec, gate: Gate) -> tuple[GateDecision, str | None]:
        """The gate's decision, and the model the baseline validation ran (if any)."""
        if spec.candidate is None:  # refused at submission
            raise InvalidJobInput("a gate needs the candidate's validation")
        candidate = await self._scored(spec.candidate)
        baseline, baseline_model = None, None
        if spec.baseline is not None:
            validation = await self._scored(spec.baseline)  # a failed one scored nothing
            baseline, baseline_model = _metrics(validation), validation.model_id
        return decide(gate, _metrics(candidate), baseline), baseline_model

    async def _scored(self, job_id: str) -> Job:
        validation = await self._jobs.get(job_id)
        if validation.state is not JobState.SUCCEEDED:
            raise DependencyFailed(job_id, validation.state)
        return validation


def _metrics(validation: Job) -> dict[str, float | None]:
    metrics = (validation.result or {}).get("metrics") or {}
    return {str(k): v if isinstance(v, int | float) else None for k, v in metrics.items()}


def _result(
    summary: JsonObject, *, promoted: bool = False, to: str | None = None, reason: str | None = None
) -> JobResult:
    done = {**summary, "promoted": promoted, "to_model_id": to, "reason": reason}
    return JobResult(summary=done, detail=done)
