"""A training's chain (`then`), or a tune's: the jobs its steps become, stored with it in one
write. Each waits (`after_ok`) for the steps before it, names the model the training will
produce (`job:<training id>`; a tune's best trial's, as its result names it), resolved when it
starts, and shares the training's chain id, priority and webhook. Nothing here runs a step:
the store and the dispatcher treat them as any job."""

from __future__ import annotations

from dataclasses import replace

from yolo_orch.domain import SIM_MODEL, JobKind, NewJob
from yolo_orch.domain.chains import Dependency, produced_by
from yolo_orch.domain.specs import (
    ExportSpec,
    JobSpec,
    PromoteSpec,
    TrainingSpec,
    TuneSpec,
    ValidationSpec,
)
from yolo_orch.params.chains import PromoteParams, ThenSteps
from yolo_orch.params.export import ExportParams
from yolo_orch.params.validation import ValidationParams


def chain_of(training: NewJob, then: ThenSteps, *, baseline_alias: bool) -> list[NewJob]:
    """`training` (checked) and the jobs of its steps, in the order they run. With
    `baseline_alias` (the promotion's alias points to a model now and its gate asks for
    `not_worse`), the alias's current model is validated on the same split too, just before
    the promotion, as a job of the chain."""
    training = replace(training, chain_id=training.id)
    spec = training.spec
    assert isinstance(spec, TrainingSpec | TuneSpec)
    trained_imgsz = _trained_imgsz(spec)
    # The simulated model produces no registry model: its steps run the simulated model too.
    model = SIM_MODEL if training.model == SIM_MODEL else produced_by(training.id)
    jobs = [training]

    def step(kind: JobKind, step_spec: JobSpec, after: list[NewJob], on: str = model) -> NewJob:
        new = NewJob(
            kind=kind,
            model=on,
            spec=step_spec,
            priority=training.priority,
            max_attempts=training.max_attempts,
            after=tuple(Dependency(job.id, ok_only=True) for job in after),
            parent_id=training.id,
            chain_id=training.id,
            webhook=training.webhook,
        )
        jobs.append(new)
        return new

    previous = [training]
    validation = None
    if (validate := then.validate_) is not None:
        validation = step(
            JobKind.VALIDATION,
            ValidationSpec(
                dataset=validate.dataset or spec.dataset,
                split=validate.split,
                params=_validation_params(validate.params, trained_imgsz),
            ),
            previous,
        )
        previous = [validation]
    if then.export is not None:
        previous = [
            step(JobKind.EXPORT, ExportSpec(params=_export_params(fmt, trained_imgsz)), previous)
            for fmt in then.export.formats
        ]
    if (promote := then.promote) is not None:
        baseline = None
        if validation is not None and baseline_alias:
            assert isinstance(validation.spec, ValidationSpec)
            baseline = step(JobKind.VALIDATION, validation.spec, previous, on=promote.alias)
            previous = [*previous, baseline]
        params = PromoteParams(gate=promote.gate).model_dump(mode="json", exclude_none=True)
        step(
            JobKind.PROMOTE,
            PromoteSpec(
                alias=promote.alias,
                candidate=None if validation is None else validation.id,
                baseline=None if baseline is None else baseline.id,
                params=params,
            ),
            previous,
        )
    return jobs


def _trained_imgsz(spec: TrainingSpec | TuneSpec) -> int | None:
    """The size the model is trained at: a tune's every trial's (`base`); None where a tune
    searches it (the steps' own default then, unless their params name one)."""
    if isinstance(spec, TuneSpec) and "imgsz" in spec.params.get("space", {}):
        return None
    params = spec.params if isinstance(spec, TrainingSpec) else spec.params.get("base", {})
    imgsz = params.get("imgsz")
    return imgsz if isinstance(imgsz, int) else None


def _export_params(export_format: str, imgsz: int | None) -> dict[str, object]:
    """The format at the size the model was trained at (the export's default otherwise)."""
    params = (
        {"format": export_format} if imgsz is None else {"format": export_format, "imgsz": imgsz}
    )
    return ExportParams.model_validate(params).model_dump(mode="json", exclude_none=True)


def _validation_params(params: ValidationParams, imgsz: int | None) -> dict[str, object]:
    """The step's params, at the size the model was trained at unless they name one (as
    ultralytics validates after a training: its default 640 would score a model trained at 128
    on images it never saw at that scale)."""
    chosen = params.model_dump(exclude_none=True)
    if imgsz is not None and "imgsz" not in params.model_fields_set:
        chosen["imgsz"] = imgsz
    return chosen
