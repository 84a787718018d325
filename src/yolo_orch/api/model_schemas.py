"""The registry's request and response models (`/v1/models`): pydantic only, so that the client
reads the server's answers with the server's own models."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN, Model
from yolo_orch.domain.aliases import Alias, AliasMove
from yolo_orch.domain.variants import Variant
from yolo_orch.domain.views import model_view, variant_view

ModelName = Annotated[
    str, Field(min_length=1, max_length=MODEL_NAME_MAX_LENGTH, pattern=MODEL_NAME_PATTERN)
]
DERIVED_NAME = (
    "Default: the file's stem, each run of characters other than A-Z, a-z, 0-9, `.`, `_` and "
    "`-` made one `-`, cut to 200 characters, without leading or trailing `.` and `-` "
    '("model" if nothing is left).'
)


class ModelImportFromPath(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="A .pt file, relative to a model root: an absolute path, `..` or a NUL byte "
        "is refused (422 `path_outside_roots`).",
    )
    name: ModelName | None = Field(default=None, description=DERIVED_NAME)


class ModelPublic(BaseModel):
    id: str
    name: str
    sha256: str
    size_bytes: int
    task: str
    class_names: list[str]
    source: str
    created_at: datetime
    usable: bool

    @classmethod
    def of(cls, model: Model) -> ModelPublic:
        return cls.model_validate(model_view(model))


class ModelImported(ModelPublic):
    name_applied: bool = Field(
        description="False when these bytes were registered before under another name than "
        "the one asked for (or made from the file's name): the existing model is returned "
        "(200) as it is, and `note` says so. A file is registered once, under one name."
    )
    note: str | None = Field(default=None, description="Why the name was not applied.")

    @classmethod
    def of_import(cls, model: Model, asked: str) -> ModelImported:
        if model.name == asked:
            return cls(**ModelPublic.of(model).model_dump(), name_applied=True)
        note = (
            f"these bytes are already model {model.name!r} (id {model.id}), returned as it is: "
            f"the name {asked!r} was not applied"
        )
        return cls(**ModelPublic.of(model).model_dump(), name_applied=False, note=note)


class ModelList(BaseModel):
    models: list[ModelPublic]


class LineagePublic(BaseModel):
    source_sha256: str = Field(
        description="The .pt it was exported from, or (imported) the .pt it was run beside and "
        "reproduced at import; empty for variants imported before that check."
    )
    imgsz: int
    half: bool
    int8: bool
    dynamic: bool
    batch: int
    device: str | None = Field(default=None, description="The lane it was built on.")
    gpu_name: str | None = None
    compute_capability: str | None = None
    tensorrt_version: str | None = None
    ultralytics_version: str | None = None


class VariantPublic(BaseModel):
    id: str
    model_id: str
    format: str = Field(examples=["onnx", "openvino", "torchscript", "engine"])
    sha256: str = Field(description="Digest over `files`, the manifest.")
    size_bytes: int
    files: dict[str, str] = Field(description="Each file and its SHA-256.")
    lineage: LineagePublic
    source: str
    created_at: datetime
    usable: bool = Field(
        description="False once its files no longer matched their fingerprints, or once it "
        "failed variant_retire_after_failures consecutive jobs with runtime_error: jobs no "
        "longer run it (`format: auto` runs the next fitting variant or the .pt)."
    )
    unusable_reason: str | None = Field(
        default=None, description="Why it is no longer usable; null while it is."
    )

    @classmethod
    def of(cls, variant: Variant) -> VariantPublic:
        return cls.model_validate(variant_view(variant))


class ModelDetail(ModelPublic):
    variants: list[VariantPublic] = Field(description="Exported variants, newest first.")
    aliases: list[str] = Field(
        default_factory=list, description="The aliases (`name@alias`) that point to it now."
    )


class AliasSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        min_length=1,
        max_length=264,
        description="The model to point to: its id, its name, or another alias (`name@alias`: "
        "the model that alias points to now).",
    )
    reason: str | None = Field(default=None, max_length=1000, description="Kept in the history.")
    expected_model_id: str | None = Field(
        default=None,
        max_length=200,
        description="Move only if the alias points to this model now (compare-and-set): "
        "otherwise 409 `alias_moved` and nothing moves. Null: no check.",
    )


class AliasRollback(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=1000, description="Kept in the history.")


class AliasPublic(BaseModel):
    ref: str = Field(description="`name@alias`: what a job's `model` names it by.")
    name: str
    alias: str
    model_id: str
    updated_at: datetime
    updated_by: str = Field(
        description="Who moved it last: the token's `name` (`token:<hash start>` for a token "
        "without one), `anonymous` on a server without tokens, or `chain:<job id>`."
    )

    @classmethod
    def of(cls, alias: Alias) -> AliasPublic:
        return cls(
            ref=str(alias.ref),
            name=alias.name,
            alias=alias.alias,
            model_id=alias.model_id,
            updated_at=alias.updated_at,
            updated_by=alias.updated_by,
        )


class AliasMovePublic(BaseModel):
    seq: int = Field(description="Increasing over all moves: the history's order.")
    from_model_id: str | None = Field(description="Null: this move made the alias.")
    to_model_id: str | None = Field(description="Null: this move deleted the alias.")
    actor: str
    reason: str | None
    at: datetime

    @classmethod
    def of(cls, move: AliasMove) -> AliasMovePublic:
        return cls(
            seq=move.seq,
            from_model_id=move.from_model_id,
            to_model_id=move.to_model_id,
            actor=move.actor,
            reason=move.reason,
            at=move.at,
        )


class AliasMoved(AliasPublic):
    move: AliasMovePublic = Field(description="This move, as the history keeps it.")


class AliasList(BaseModel):
    aliases: list[AliasPublic] = Field(description="By name, then alias.")


class AliasHistory(BaseModel):
    moves: list[AliasMovePublic] = Field(description="Newest first.")
    next_cursor: int | None = Field(
        description="Pass as `cursor` for the older moves; null on the last page."
    )


class VariantImportFromPath(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="An .onnx file or an OpenVINO model folder, relative to a model root.",
    )
