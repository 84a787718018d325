"""What `/v1/devices` answers: pydantic only, so that the client reads the server's answers with
the server's own models."""

from __future__ import annotations

from pydantic import BaseModel, Field


class GpuReadingPublic(BaseModel):
    memory_used_bytes: int | None = Field(default=None, description="From NVML; null without.")
    memory_total_bytes: int | None = None
    utilization_percent: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None


class StreamSharePublic(BaseModel):
    job_id: str
    fps_asked: float = Field(description="Its `max_fps` times its sources: its share of the lane.")
    fps_out: float | None = Field(
        default=None, description="Frames it processed per second lately; null before a report."
    )


class LanePublic(GpuReadingPublic):
    id: str = Field(examples=["cuda:0"])
    slots: int
    busy: int = Field(description="Turns taken now.")
    jobs: list[str] = Field(description="Ids of the jobs running on this lane.")
    batch_sizes: dict[int, int] = Field(
        default_factory=dict,
        description="Runs since start by the jobs sharing their forward passes (1: alone); "
        "empty on a lane that does not batch.",
    )
    batch_mean_jobs: float | None = Field(
        default=None, description="Jobs per run since start, on a lane that batches."
    )
    batch_wait_s: float = Field(
        default=0.0,
        description="Seconds batches held this lane's turn waiting for companions, since start.",
    )
    models: list[str] = Field(description="Names of the models loaded on this lane.")
    healthy: bool = Field(description="False while its GPU reports a fatal state.")
    wedged: bool = Field(
        default=False,
        description="True once a job's thread here ignored a stop: no job starts here until "
        "the server restarts.",
    )
    device_name: str | None = Field(
        default=None,
        description="The GPU's name, from NVML; null without.",
        examples=["NVIDIA H200"],
    )
    stream_slots: int = Field(
        default=0, description="Streams it runs at once beside its turns (`streams_per_lane`)."
    )
    stream_fps: float = Field(
        default=0.0,
        description="The frames per second its streams may ask for together "
        "(`stream_fps_per_lane`).",
    )
    streams: list[StreamSharePublic] = Field(
        default_factory=list, description="The streams holding a share of it now."
    )


class HeldVariantPublic(BaseModel):
    id: str
    model: str = Field(description="The name of the model it was exported from.")
    format: str = Field(examples=["onnx"])
    size_bytes: int = Field(description="All its files together.")


class NodePublic(BaseModel):
    name: str = Field(description="The lanes' prefix: `<node>/cuda:0`.")
    address: str
    lanes: list[str]
    models: list[str] = Field(description="Names of the model files the node keeps.")
    variants: list[HeldVariantPublic] = Field(
        default_factory=list,
        description="The exported variants the node keeps (each fetched for a job that ran it).",
    )
    gpus: list[GpuReadingPublic] = Field(
        default_factory=list,
        description="Each GPU of the node by NVML index, read on the node (`<node>/cuda:i` is "
        "index i where CUDA and NVML order GPUs alike); empty without NVML.",
    )
    load_1m: float | None = Field(default=None, description="The node's load average.")
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    read_at: float | None = Field(
        default=None, description="Unix time of the node's last reading; null before the first."
    )


class DeviceList(BaseModel):
    runtime: str
    devices: list[LanePublic]
    nodes: list[NodePublic] | None = Field(
        default=None, description='With executor = "ray": the cluster\'s nodes; else null.'
    )


class SamplePublic(BaseModel):
    at: float = Field(description="Unix time, seconds.")
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    utilization_percent: int | None
    temperature_c: int | None
    power_w: float | None


class LaneHistory(BaseModel):
    id: str
    samples: list[SamplePublic] = Field(description="Oldest first.")


class DeviceHistory(BaseModel):
    enabled: bool = Field(description="False without NVML or without a lane on a GPU.")
    interval_s: float
    devices: list[LaneHistory]
