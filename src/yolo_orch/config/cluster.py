"""Settings of a Ray cluster's executor (`executor = "ray"`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RayCluster(BaseModel):
    model_config = ConfigDict(title="Ray cluster")

    executor: Literal["threads", "ray"] = Field(
        default="threads",
        description='Where jobs run: "threads" of this process on this host\'s lanes, or "ray": '
        "the GPUs of a Ray cluster (pip install 'yolo-orch[ray]').",
    )
    ray_address: str = Field(
        default="",
        description='The Ray cluster with executor = "ray": "auto", "HOST:PORT" of its head, '
        'or "ray://HOST:PORT"; empty: a local one started by the server.',
    )
    ray_cpu_lanes: bool = Field(
        default=False,
        description="Give each Ray node without GPUs one `<node>/cpu` lane.",
    )
    ray_node_cache_dir: Path = Field(
        default=Path("/tmp/yolo-orch-node-cache"),
        description="On each Ray node: the folder of its cache of model weights (one "
        "sub-folder per node) and of ultralytics' settings (`ultralytics`).",
    )
    ray_node_cache_models: int = Field(
        default=8,
        ge=1,
        description="Model files and exported variants (one entry each) each Ray node keeps "
        "(least recently used go).",
    )
    ray_cancel_grace_s: float = Field(
        default=5.0,
        ge=0,
        description="Time a cancelled job on a Ray node gets to stop before its worker is killed.",
    )
    ray_poll_interval_s: float = Field(
        default=1.0, gt=0, description="How often the cluster's nodes are read (joins, losses)."
    )
    ray_namespace: str = Field(
        default="yolo-orch",
        min_length=1,
        description="The Ray namespace of this server's actors (its lanes' and its runs'): "
        "each server sharing a cluster needs its own.",
    )
    ray_telemetry_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="How often each Ray node reads its own telemetry (GPUs, load, memory).",
    )
    shared_data_roots: list[Path] = Field(
        default_factory=list,
        description='With executor = "ray": folders every node sees at the same path; a '
        "training or validation dataset must be under one of them and under data_roots.",
    )
    ray_max_input_bytes: int = Field(
        default=1 << 30,
        ge=1,
        description="Bytes of images and videos one inference job carries to a Ray node "
        "(invalid_input beyond).",
    )
