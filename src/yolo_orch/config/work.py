"""Settings of the work: lanes and runtime, the queue and its time limits, the folders jobs read,
and what the server keeps of their results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.domain import JobKind
from yolo_orch.files.class_names import DEFAULT_MAX_CLASS_NAMES, DEFAULT_MAX_CLASS_NAMES_BYTES
from yolo_orch.files.images import DEFAULT_MAX_IMAGE_PIXELS
from yolo_orch.files.resultfile import DEFAULT_INLINE_RESULT_BYTES, DEFAULT_MAX_RESULT_BYTES
from yolo_orch.params.slicing import DEFAULT_MAX_SLICES_PER_IMAGE

LaneKind = Literal["cpu", "cuda", "sim"]
DEFAULT_BATCH_MAX_IMAGES: dict[LaneKind, int] = {"cpu": 8, "cuda": 32, "sim": 1}
DEFAULT_TIMEOUTS_S: dict[JobKind, float] = {
    JobKind.INFERENCE: 3600,
    JobKind.TRAINING: 0,  # a training run may take days: no limit unless a job sets one
    JobKind.VALIDATION: 3600,
    JobKind.EXPORT: 0,  # a TensorRT engine build can take long without a progress report
}
"""A kind without an entry here has no limit unless the settings or its job set one."""


class LanesAndRuntime(BaseModel):
    model_config = ConfigDict(title="Lanes and runtime")

    runtime: Literal["auto", "simulated"] = Field(
        default="auto",
        description='"auto": ultralytics on the GPUs this host has (else its CPU); "simulated": '
        "fake jobs on `sim_lanes` lanes.",
    )
    lanes: list[str] = Field(
        default_factory=list, description="Explicit lane list (cuda:0, cpu, ...); empty = detect."
    )
    slots_per_lane: int = Field(default=1, ge=1, description="Jobs that may share one lane.")
    sim_lanes: int = Field(default=2, ge=1, le=64, description="Lanes of the simulated runtime.")
    cpu_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch threads of a job on the cpu lane (set in its worker thread); empty: "
        "the runners' default. CUDA lanes use 1.",
    )
    model_cache_size: int = Field(
        default=2, ge=0, description="Loaded models each lane keeps warm (LRU)."
    )
    batch_max_images: dict[LaneKind, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: dict(DEFAULT_BATCH_MAX_IMAGES),
        description="Images one forward pass may hold, by lane kind: queued inference jobs of "
        "one model and forward-pass params share a pass up to this; 1: no batching. A kind left "
        "out keeps its default.",
    )
    batch_window_ms: float = Field(
        default=0.0,
        ge=0,
        le=10_000,
        description="How long a lane with room in its batch waits for more jobs to join; 0: "
        "only jobs already queued join.",
    )
    decode_ahead_mb: int = Field(
        default=256,
        ge=0,
        le=1 << 20,
        description="Memory (MiB) for uploaded images decoded while their jobs wait, so that a "
        "lane finds their pixels ready; 0: a lane decodes its jobs' images itself.",
    )
    heap_retain_mb: int = Field(
        default=64,
        ge=0,
        le=4096,
        description="Freed memory (MiB) the server's heap keeps (glibc: one arena, blocks under "
        "half of it, at most 32 MiB, from the heap), so that a forward pass on the CPU reuses "
        "what the last one freed instead of faulting it in again; 0: glibc's defaults.",
    )


class JobLimits(BaseModel):
    model_config = ConfigDict(title="Jobs: queue, admission, time limits")

    max_queued: int = Field(default=1000, ge=1, description="Queued jobs allowed before 429.")
    max_attempts: int = Field(
        default=3, ge=1, description="Runs a job gets before a crash fails it as `interrupted`."
    )
    priority_aging_per_minute: float = Field(
        default=1.0,
        ge=0,
        le=1000,
        description="Priority a queued job gains per minute waited, so none waits forever; 0: off.",
    )
    timeout_s: dict[JobKind, float] = Field(
        default_factory=lambda: dict(DEFAULT_TIMEOUTS_S),
        description="Each kind's time limit in seconds when a job's `params.timeout_s` sets "
        "none; 0: none. A job past it fails `timeout`. A kind left out keeps its default.",
    )
    stall_after_s: float = Field(
        default=3600.0,
        ge=0,
        description="A running job whose progress has not moved this long fails `stalled`; 0: off.",
    )
    wedge_grace_s: float = Field(
        default=60.0,
        gt=0,
        description="Time a stopped job's thread gets to return before its lanes are wedged and "
        "the server restarts (exit 76) once the other jobs end.",
    )
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, description="Time running jobs get to finish on SIGTERM."
    )
    variant_retire_after_failures: int = Field(
        default=3,
        ge=1,
        description="Consecutive jobs a variant may fail with runtime_error before it is retired "
        "(usable false, the reason in its JSON) and `format: auto` runs the next fitting variant "
        "or the .pt; a success starts the count again.",
    )


class DataAndModelRoots(BaseModel):
    model_config = ConfigDict(title="Data and model roots")

    data_roots: list[Path] = Field(
        default_factory=list, description="Folders whose files jobs may read (images, datasets)."
    )
    model_roots: list[Path] = Field(
        default_factory=list,
        description="Folders whose .pt weights and exported variants may be imported by path.",
    )
    datasets_dir: Path | None = Field(
        default=None,
        description="Where managed datasets live (/v1/datasets, capture, Label Studio): "
        "unset, `datasets` in the first data root, or in data_dir when there is no data root. "
        "Jobs read it as they read a data root.",
    )
    max_files_per_job: int = Field(default=1000, ge=1, description="Images one job may name.")
    max_walk_entries: int = Field(
        default=100_000,
        ge=1,
        description="Directory entries resolving one submission's inputs may visit "
        "(422 input_walk_too_large beyond).",
    )
    input_walk_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds resolving one submission's inputs may take "
        "(422 input_walk_too_large beyond).",
    )
    max_image_pixels: int = Field(
        default=DEFAULT_MAX_IMAGE_PIXELS,
        ge=1,
        description="Largest image (width x height), read from its header before decoding: an "
        "upload beyond it is refused (422 image_too_large), an input becomes an error entry.",
    )
    max_slices_per_image: int = Field(
        default=DEFAULT_MAX_SLICES_PER_IMAGE,
        ge=1,
        le=100_000,
        description="Tiles one image of an inference job with `params.slice` may be cut into "
        "(docs/slicing.md): an image that would make more becomes an error entry.",
    )
    max_class_names: int = Field(
        default=DEFAULT_MAX_CLASS_NAMES,
        ge=1,
        description="Class names a dataset or an imported model may have.",
    )
    max_class_names_bytes: int = Field(
        default=DEFAULT_MAX_CLASS_NAMES_BYTES,
        ge=1,
        description="UTF-8 bytes of all of a dataset's or model's class names together.",
    )
    max_concurrent_imports: int = Field(
        default=2,
        ge=1,
        description="Imports of models and variants (uploads and paths together) under way at "
        "once; another is refused before its body is read (429 imports_busy, Retry-After).",
    )


class ResultsRetentionDisk(BaseModel):
    model_config = ConfigDict(title="Results, retention and disk")

    max_result_bytes: int = Field(
        default=DEFAULT_MAX_RESULT_BYTES,
        ge=1024,
        description="Largest result file of one job; a job whose result would be larger fails "
        "with result_too_large.",
    )
    inline_result_bytes: int = Field(
        default=DEFAULT_INLINE_RESULT_BYTES,
        ge=0,
        le=16 << 20,
        description="Results up to this size are committed with the job's outcome, in the "
        "database, instead of written to a result file with its fsyncs; 0: every result in a "
        "file.",
    )
    retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Finished jobs (records and files) older than this are deleted; empty: "
        "kept until deleted. Models they produced stay in the registry.",
    )
    max_finished_jobs: int | None = Field(
        default=None,
        ge=0,
        description="Finished jobs kept at most; the oldest beyond are deleted. Empty: no bound.",
    )
    retention_interval_s: float = Field(
        default=600.0,
        gt=0,
        description="How often finished jobs are expired and orphaned or temporary files swept.",
    )
    orphan_grace_s: float = Field(
        default=3600.0,
        ge=60,  # under a minute, an atomic write or a registry upload in progress could be swept
        description="Age an upload folder without a job, or a temporary file, must reach before "
        "the sweep removes it (younger ones may be a write in progress; a job's upload request "
        "in flight holds its folder however old).",
    )
    min_free_bytes: int = Field(
        default=1 << 30,
        ge=0,
        description="Free space data_dir, the database's folder and models_dir each need: below "
        "it, submissions and uploads get 507 and /readyz says degraded. 0: no check.",
    )
    disk_check_interval_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between two looks at the free space; submissions read the last.",
    )
