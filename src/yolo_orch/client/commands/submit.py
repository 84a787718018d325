"""`yolo-orch submit|validate|export`: new jobs."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from yolo_orch.client.commands.common import (
    SUBMIT_WAIT_S,
    AsJson,
    IdempotencyKey,
    Params,
    Priority,
    Quiet,
    Token,
    Url,
    WaitForEnd,
    connect,
    parse_params,
    submitted,
)
from yolo_orch.client.wire import DEFAULT_URL

RegisteredModel = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        help="A registered model (name or id).",
        show_default=False,
    ),
]


def submit(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            metavar="MODEL",
            help="A registered model (name or id), or an architecture "
            "such as yolo11n.yaml for training.",
            show_default=False,
        ),
    ],
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            "-i",
            metavar="PATTERN",
            help="Inference: an image path or glob on the server, under a data root. Repeatable.",
            show_default=False,
        ),
    ] = None,
    files: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            "-f",
            metavar="PATH",
            help="Inference: a local image to upload with the job. Repeatable.",
            exists=True,
            dir_okay=False,
            readable=True,
            show_default=False,
        ),
    ] = None,
    training: Annotated[
        bool, typer.Option("--training", help="Submit a training job (default: inference).")
    ] = False,
    dataset: Annotated[
        str | None,
        typer.Option(
            metavar="DATA_YAML",
            help="Training: a data.yaml on the server, under a data root.",
            show_default=False,
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="Training: lanes to hold for the whole run (default: 1).",
            show_default=False,
        ),
    ] = None,
    params: Params = None,
    priority: Priority = 0,
    idempotency_key: IdempotencyKey = None,
    wait_: WaitForEnd = False,
    quiet: Quiet = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Submit an inference or a training job.

    Inference takes images already on the server (--input) or uploads local ones (--file).
    With --wait it ends with the job's exit code, as `wait` does, after a summary: the images
    and the detections per class; the trained model and its scores.
    """
    _check_job_shape(training, inputs, files, dataset, gpus)
    job_params = parse_params(params)
    wait_s = SUBMIT_WAIT_S if wait_ else None
    with connect(url, token) as client:
        if training:
            job = client.train(
                model,
                dataset,
                gpus=gpus or 1,
                params=job_params,
                priority=priority,
                idempotency_key=idempotency_key,
                wait_s=wait_s,
            )
        else:
            job = client.submit(
                model,
                inputs or [],
                files=files or [],
                params=job_params,
                priority=priority,
                idempotency_key=idempotency_key,
                wait_s=wait_s,
            )
        submitted(client, job, wait_=wait_, quiet=quiet, as_json=as_json)


def _check_job_shape(
    training: bool,
    inputs: list[str] | None,
    files: list[Path] | None,
    dataset: str | None,
    gpus: int | None,
) -> None:
    """Mistakes `submit` can tell without asking the server."""
    if training:
        if inputs or files:
            raise typer.BadParameter(
                "a training job reads --dataset, not images", param_hint="--input/--file"
            )
        return
    if dataset is not None or gpus is not None:
        raise typer.BadParameter(
            "only training jobs take these; add --training", param_hint="--dataset/--gpus"
        )
    if inputs and files:
        raise typer.BadParameter(
            "give the images either on the server (--input) or local (--file)",
            param_hint="--input/--file",
        )
    if not inputs and not files:
        raise typer.BadParameter(
            "an inference job needs images: --input PATTERN or --file PATH",
            param_hint="--input/--file",
        )


class Split(enum.StrEnum):
    val = "val"
    test = "test"


def validate(
    model: RegisteredModel,
    dataset: Annotated[
        str,
        typer.Option(
            metavar="DATA_YAML",
            help="A data.yaml on the server under a data root (an image folder for classify "
            "models).",
            show_default=False,
        ),
    ],
    split: Annotated[Split, typer.Option(help="The split to score.")] = Split.val,
    params: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            metavar="KEY=VALUE",
            help="imgsz, batch, conf or iou (imgsz=640). Repeatable.",
            show_default=False,
        ),
    ] = None,
    priority: Priority = 0,
    idempotency_key: IdempotencyKey = None,
    wait_: WaitForEnd = False,
    quiet: Quiet = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Submit a validation job: the model's metrics on the dataset's split (`result` prints
    them in full, per class too)."""
    with connect(url, token) as client:
        job = client.validate(
            model,
            dataset,
            split=str(split),
            params=parse_params(params),
            priority=priority,
            idempotency_key=idempotency_key,
            wait_s=SUBMIT_WAIT_S if wait_ else None,
        )
        submitted(client, job, wait_=wait_, quiet=quiet, as_json=as_json)


class Format(enum.StrEnum):
    onnx = "onnx"
    openvino = "openvino"
    torchscript = "torchscript"
    engine = "engine"


def export(
    model: RegisteredModel,
    format_: Annotated[
        Format,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="onnx, openvino, torchscript, or engine (TensorRT; CUDA lanes only).",
        ),
    ],
    imgsz: Annotated[
        int, typer.Option(metavar="PIXELS", help="The input size it is built for.")
    ] = 640,
    half: Annotated[bool, typer.Option("--half", help="FP16 weights.")] = False,
    int8: Annotated[
        bool,
        typer.Option("--int8", help="INT8, calibrated on --dataset (openvino, engine)."),
    ] = False,
    dynamic: Annotated[bool, typer.Option("--dynamic", help="Any input size and batch.")] = False,
    batch: Annotated[
        int, typer.Option(min=1, metavar="N", help="The batch size it is built for.")
    ] = 1,
    dataset: Annotated[
        str | None,
        typer.Option(
            metavar="DATA_YAML",
            help="int8 only: a data.yaml on the server to calibrate on.",
            show_default=False,
        ),
    ] = None,
    priority: Priority = 0,
    idempotency_key: IdempotencyKey = None,
    wait_: WaitForEnd = False,
    quiet: Quiet = False,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Submit an export job: a variant of the model in another format, checked to reproduce
    the model's outputs and stored beside it (`variants list` shows it)."""
    with connect(url, token) as client:
        job = client.export(
            model,
            str(format_),
            imgsz=imgsz,
            half=half,
            int8=int8,
            dynamic=dynamic,
            batch=batch,
            dataset=dataset,
            priority=priority,
            idempotency_key=idempotency_key,
            wait_s=SUBMIT_WAIT_S if wait_ else None,
        )
        submitted(client, job, wait_=wait_, quiet=quiet, as_json=as_json)
