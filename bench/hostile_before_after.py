"""Hostile inputs against a real `yolo-orch serve` started from a source tree: status, seconds,
server RSS growth, and whether /healthz still works on the same kept-alive connection.

    git worktree add /tmp/before 8b7398c     # the code before issue 9
    python -m bench.hostile_before_after --label before /tmp/before --label after . \
        --md /tmp/hostile.md
    # then the run-time cases on the real runners (CPU lane), appended to the same file:
    python -m bench.hostile_before_after --runtime auto --label before /tmp/before \
        --label after . --md /tmp/hostile.md --append

One source dir gives one column; two give a before/after table. The glob-loop case runs in its
own server start, last, so a walk that never ends cannot spoil the other cases. Every server is
killed with SIGKILL at the end.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.hostile import PeakRss, png_bomb

CLIENT_TIMEOUT_S = 20.0
AFTER_S = 1.0
"""RSS is still sampled this long after the answer (work the request left running)."""
JOB_POLL_S = {"simulated": 4.0, "auto": 90.0}
"""For a 202, how long to wait for the job to reach a terminal state (shown, not required)."""
TERMINAL = {"succeeded", "failed", "cancelled"}
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SafePeakRss(PeakRss):
    """PeakRss that keeps what it sampled when the process dies mid-block."""

    def _sample(self) -> None:
        with contextlib.suppress(OSError, LookupError):
            super()._sample()

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        except (OSError, LookupError):
            self._stop.set()
            self._thread.join()
            self.growth = self._sampled - self.baseline


# ----------------------------------------------------------------------------- fixtures


def build_fixtures(base: Path) -> tuple[Path, Path, Path]:
    from tests.training_fixtures import make_dataset
    from tests.yolo_fixtures import build_checkpoint, ensure_ultralytics, make_images

    data, weights = base / "data", base / "weights"
    make_images(data / "images", 2)
    loop = data / "loop"
    make_images(loop, 1)
    (loop / "self").symlink_to(".", target_is_directory=True)
    loop2 = data / "loop2"  # two links back into itself: the walk branches (2**depth)
    make_images(loop2, 1)
    (loop2 / "self").symlink_to(".", target_is_directory=True)
    (loop2 / "again").symlink_to("../loop2", target_is_directory=True)
    head = "path: .\ntrain: images/train\nval: images/val\n"
    make_dataset(data / "aliases", n_train=4, n_val=2)  # real folders: only `names` is hostile
    make_dataset(data / "laughs", n_train=4, n_val=2)
    (data / "deep").mkdir()
    (data / "deep" / "data.yaml").write_text("names: " + "[" * 50_000 + "]" * 50_000 + "\n")
    letters = "abcdefgh"
    lines = ["a: &a [" + ", ".join(["x"] * 64) + "]"]
    for level in range(1, 8):
        prev, cur = letters[level - 1], letters[level]
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 8) + "]")
    lines.append("names: *h")
    (data / "aliases" / "data.yaml").write_text(head + "\n".join(lines) + "\n")
    (data / "laughs" / "data.yaml").write_text(  # the issue's: 42 KB -> 10 000 names of 2 KB
        head + f"s: &s {'x' * 2000}\nnames: [{', '.join(['*s'] * 10_000)}]\n"
    )
    make_dataset(data / "ds", n_train=4, n_val=2)
    ensure_ultralytics(base)
    build_checkpoint(weights / "tiny.pt")
    bomb = png_bomb(base / "bomb.png", 30_000, 30_000)
    (data / "bombs").mkdir()
    png_bomb(data / "bombs" / "bomb.png", 30_000, 30_000)
    return data, weights, bomb


# ----------------------------------------------------------------------------- server


class Server:
    def __init__(
        self, src: Path, base: Path, data: Path, weights: Path, name: str, runtime: str
    ) -> None:
        self.src = src
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{name}-var-", dir=base))
        self.log = base / f"{name}.stderr.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("YOLO_ORCH_")}
        env.update(
            PYTHONPATH=f"{src}/src:{src}",
            PYTHONUNBUFFERED="1",
            YOLO_ORCH_RUNTIME=runtime,
            YOLO_ORCH_SIM_LANES="2",
            YOLO_ORCH_DATA_DIR=str(self.data_dir),
            YOLO_ORCH_HOST="127.0.0.1",
            YOLO_ORCH_PORT=str(self.port),
            YOLO_ORCH_DATA_ROOTS=json.dumps([str(data)]),
            YOLO_ORCH_MODEL_ROOTS=json.dumps([str(weights)]),
            YOLO_ORCH_LOG_LEVEL="warning",
        )
        with self.log.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [PYTHON, "-m", "yolo_orch.cli", "serve"],
                cwd=src,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited {self.proc.returncode}:\n{self.tail()}")
                try:
                    if client.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise TimeoutError(f"no /healthz within {timeout}s:\n{self.tail()}")

    def import_model(self) -> None:
        with httpx.Client(base_url=self.url, timeout=120.0) as client:
            r = client.post("/v1/models", json={"path": "tiny.pt", "name": "tiny"})
        if r.status_code not in (200, 201):
            raise RuntimeError(f"model import: {r.status_code} {r.text[:300]}")

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


# ----------------------------------------------------------------------------- cases


@dataclass
class Ctx:
    validation: bool  # the tree knows the "validation" job kind
    bomb: Path
    runtime: str


def _inference(*inputs: str, **params: Any) -> dict[str, Any]:
    return {"kind": "inference", "model": "tiny", "inputs": list(inputs), "params": params}


def _yaml_job(ctx: Ctx, dataset: str) -> dict[str, Any]:
    kind = "validation" if ctx.validation else "training"
    return {"kind": kind, "model": "tiny", "dataset": dataset}


def _cursor() -> str:
    return base64.urlsafe_b64encode(f"seq:{2**70}".encode()).decode().rstrip("=")


def _upload(client: httpx.Client, ctx: Ctx) -> httpx.Response:
    with ctx.bomb.open("rb") as fh:
        return client.post(
            "/v1/jobs/inference",
            data={"model": "tiny"},
            files={"images": ("bomb.png", fh, "image/png")},
        )


Case = tuple[str, Callable[[httpx.Client, Ctx], httpx.Response]]

CASES: list[Case] = [
    (
        "file name of 300 chars in inputs",
        lambda c, x: c.post("/v1/jobs", json=_inference("n" * 296 + ".jpg")),
    ),
    (
        "path of ~4090 chars in inputs",
        lambda c, x: c.post("/v1/jobs", json=_inference("d/" * 2040 + "x.jpg")),
    ),
    (
        "model import path of 303 chars",
        lambda c, x: c.post("/v1/models", json={"path": "w" * 300 + ".pt"}),
    ),
    (
        "file used as a folder (images/img0.jpg/x.jpg)",
        lambda c, x: c.post("/v1/jobs", json=_inference("images/img0.jpg/x.jpg")),
    ),
    (
        "cursor past 64 bits (seq:2**70)",
        lambda c, x: c.get("/v1/jobs", params={"cursor": _cursor()}),
    ),
    (
        "data.yaml nested 50 000 deep",
        lambda c, x: c.post("/v1/jobs", json=_yaml_job(x, "deep/data.yaml")),
    ),
    (
        "data.yaml alias bomb (8 levels x8, 64 leaves)",
        lambda c, x: c.post("/v1/jobs", json=_yaml_job(x, "aliases/data.yaml")),
    ),
    (
        "data.yaml alias bomb, flat (10 000 x *s of 2 KB)",
        lambda c, x: c.post("/v1/jobs", json=_yaml_job(x, "laughs/data.yaml")),
    ),
    (
        "max_det 10000 (inference)",
        lambda c, x: c.post("/v1/jobs", json=_inference("images/*.jpg", max_det=10_000)),
    ),
    (
        "classes [2**70] (inference)",
        lambda c, x: c.post("/v1/jobs", json=_inference("images/*.jpg", classes=[2**70])),
    ),
    ("upload: PNG bomb 30000x30000", _upload),
    (
        "patience 10**12 (training)",
        lambda c, x: c.post(
            "/v1/jobs",
            json={
                "kind": "training",
                "model": "tiny",
                "dataset": "ds/data.yaml",
                "params": {"epochs": 1, "patience": 10**12},
            },
        ),
    ),
]
LOOP_CASES: list[Case] = [
    (
        "glob loop (loop/**/*.jpg, self -> .)",
        lambda c, x: c.post("/v1/jobs", json=_inference("loop/**/*.jpg")),
    ),
    (
        "glob loop, two links (loop2/**/*.jpg, self -> ., again -> ../loop2)",
        lambda c, x: c.post("/v1/jobs", json=_inference("loop2/**/*.jpg")),
    ),
]

RUNTIME_CASES: list[Case] = [  # --runtime auto: what only a real runner shows (CPU lane)
    ("upload: PNG bomb 30000x30000, job run", _upload),
    (
        "input: PNG bomb under a data root, job run",
        lambda c, x: c.post(
            "/v1/jobs", json=_inference("bombs/bomb.png", "images/*.jpg", imgsz=128)
        ),
    ),
    (
        "max_det 10000, conf 0 on 2 images, job run",
        lambda c, x: c.post(
            "/v1/jobs", json=_inference("images/*.jpg", max_det=10_000, conf=0, imgsz=128)
        ),
    ),
    (
        "classes [2**70], job run",
        lambda c, x: c.post(
            "/v1/jobs", json=_inference("images/*.jpg", classes=[2**70], imgsz=128)
        ),
    ),
    (
        "patience 10**12 (training, 1 epoch), job run",
        lambda c, x: c.post(
            "/v1/jobs",
            json={
                "kind": "training",
                "model": "tiny",
                "dataset": "ds/data.yaml",
                "params": {"epochs": 1, "imgsz": 64, "batch": 4, "patience": 10**12},
            },
        ),
    ),
]


@dataclass
class Result:
    case: str
    status: str
    seconds: float
    mb: float
    healthz: str
    code: str = ""
    job: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _client_addr(r: httpx.Response) -> Any:
    return r.extensions.get("client_addr_seen")


def _remember_addr(r: httpx.Response) -> None:
    """Response hook: the local address of the connection, read while it is still open."""
    stream = r.extensions.get("network_stream")
    try:
        r.extensions["client_addr_seen"] = (
            stream.get_extra_info("client_addr") if stream is not None else None
        )
    except OSError:
        r.extensions["client_addr_seen"] = None


def _error_entries(server: Server, job_id: str) -> str:
    """' (n/m images are error entries)' when some are, else ''."""
    try:
        res = httpx.get(f"{server.url}/v1/jobs/{job_id}/result", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return ""
    images = res.get("images") if isinstance(res, dict) else None
    if not isinstance(images, list):
        return ""
    errors = sum(1 for image in images if isinstance(image, dict) and image.get("error"))
    return f" ({errors}/{len(images)} images error entries)" if errors else ""


def warm_up(server: Server) -> None:
    """One ordinary inference job to its end, so that loading the model is not counted."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        r = client.post("/v1/jobs", json=_inference("images/*.jpg", imgsz=128))
        r.raise_for_status()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if client.get(f"/v1/jobs/{r.json()['id']}").json().get("state") in TERMINAL:
                return
            time.sleep(0.25)
    raise TimeoutError("the warm-up job did not end within 120 s")


def run_case(server: Server, ctx: Ctx, case: Case) -> Result:
    try:
        return _run_case(server, ctx, case)
    except (OSError, LookupError, httpx.HTTPError) as exc:  # /proc gone: the server died
        return Result(case[0], f"error ({type(exc).__name__})", float("nan"), float("nan"), "-")


def _run_case(server: Server, ctx: Ctx, case: Case) -> Result:
    name, send = case
    client = httpx.Client(
        base_url=server.url,
        timeout=CLIENT_TIMEOUT_S,
        event_hooks={"response": [_remember_addr]},
    )
    try:
        warm = client.get("/healthz")  # open the kept-alive connection first
        before = _client_addr(warm)
        code = job_state = ""
        closed = False
        detail = ""
        with SafePeakRss(server.proc.pid) as peak:
            t0 = time.perf_counter()
            try:
                r = send(client, ctx)
                seconds = time.perf_counter() - t0
                status = str(r.status_code)
                try:
                    body = r.json()
                except ValueError:
                    body = {}
                if isinstance(body, dict):
                    code = str(body.get("code") or "")
                    detail = str(body.get("detail") or "")[:90]
                    job_id = body.get("id")
                else:
                    job_id = None
                after_addr = _client_addr(r)
                closed = r.headers.get("connection", "").lower() == "close"
            except httpx.TimeoutException:
                seconds, status, job_id, after_addr = (
                    time.perf_counter() - t0,
                    "timeout",
                    None,
                    None,
                )
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                seconds, job_id, after_addr = time.perf_counter() - t0, None, None
                status = "connection reset"
                code = type(exc).__name__
            time.sleep(AFTER_S)
            if status == "202" and job_id:
                deadline = time.monotonic() + JOB_POLL_S[ctx.runtime]
                while time.monotonic() < deadline:
                    try:
                        j = httpx.get(f"{server.url}/v1/jobs/{job_id}", timeout=5).json()
                    except (httpx.HTTPError, ValueError):
                        job_state += " (server gone while polling)"
                        break
                    job_state = j.get("state", "?")
                    if job_state in TERMINAL:
                        if job_state == "succeeded" and j.get("kind") == "inference":
                            job_state += _error_entries(server, job_id)
                        err = j.get("error") or {}
                        if job_state == "failed" and isinstance(err, dict):
                            job_state += f" ({err.get('code') or str(err.get('message'))[:40]})"
                        break
                    time.sleep(0.25)
        try:
            h = client.get("/healthz", timeout=5.0)
            same = before is not None and _client_addr(h) == before and after_addr == before
            healthz = f"{h.status_code} {'same conn' if same else 'new conn'}"
            if closed:
                healthz += " (answer had Connection: close)"
        except httpx.HTTPError as exc:
            healthz = f"failed ({type(exc).__name__})"
        return Result(
            name, status, seconds, peak.growth_mb, healthz, code, job_state, {"detail": detail}
        )
    finally:
        client.close()


def measure(
    src: Path, base: Path, data: Path, weights: Path, bomb: Path, tag: str, runtime: str
) -> list[Result]:
    schemas = (src / "src/yolo_orch/domain/__init__.py").read_text()
    ctx = Ctx(validation='VALIDATION = "validation"' in schemas, bomb=bomb, runtime=runtime)
    results: list[Result] = []
    groups = (
        [("main", CASES), ("loop", LOOP_CASES)]
        if runtime == "simulated"
        else [("run", RUNTIME_CASES)]
    )
    for group, cases in groups:
        server: Server | None = None
        try:
            for case in cases:
                if server is None or server.proc.poll() is not None:
                    server = Server(
                        src, base, data, weights, f"{tag}-{runtime}-{group}-{len(results)}", runtime
                    )
                    server.wait_ready()
                    server.import_model()
                    if runtime != "simulated":
                        warm_up(server)
                    time.sleep(0.5)
                res = run_case(server, ctx, case)
                if server.proc.poll() is not None:  # the case took the server down
                    rc = server.proc.returncode
                    res.healthz = f"server died (exit {rc}{', SIGKILL' if rc == -9 else ''})"
                print(
                    f"[{tag}] {res.case}: {res.status} {res.code} {res.seconds:.2f}s "
                    f"+{res.mb:.1f}MB healthz={res.healthz} job={res.job} "
                    f"detail={res.extra.get('detail')!r}",
                    flush=True,
                )
                results.append(res)
        finally:
            if server is not None:
                server.kill()
    return results


# ----------------------------------------------------------------------------- table


def cell(r: Result) -> str:
    status = r.status + (f" `{r.code}`" if r.code else "")
    if r.job:
        status += f" → job {r.job}"
    hz = "" if r.healthz.startswith("200 same") else f"; healthz: {r.healthz}"
    return f"{status}, {r.seconds:.2f} s, +{r.mb:.0f} MB{hz}"


def table(labels: list[str], runs: list[list[Result]]) -> str:
    head = "| case | " + " | ".join(f"{lab} (status, s, +MB)" for lab in labels) + " |"
    sep = "|---" * (len(labels) + 1) + "|"
    rows = [head, sep]
    for i, first in enumerate(runs[0]):
        rows.append(f"| {first.case} | " + " | ".join(cell(run[i]) for run in runs) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", nargs="+", type=Path)
    ap.add_argument("--label", action="append", default=[])
    ap.add_argument("--md", type=Path)
    ap.add_argument("--append", action="store_true", help="append to --md instead of writing")
    ap.add_argument(
        "--runtime",
        choices=["simulated", "auto"],
        default="simulated",
        help="auto: the real runners on this host (CPU lane), run-time cases only",
    )
    args = ap.parse_intermixed_args()
    labels = args.label or [str(s) for s in args.src]
    base = Path(tempfile.mkdtemp(prefix="measure-hostile-"))
    data, weights, bomb = build_fixtures(base)
    runs = []
    for src, label in zip(args.src, labels, strict=True):
        runs.append(measure(src.resolve(), base, data, weights, bomb, label, args.runtime))
    out = table(labels, runs)
    print(out)
    if args.md:
        commits = [
            subprocess.run(
                ["git", "-C", str(s), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            for s in args.src
        ]
        cmd = "python -m bench.hostile_before_after " + " ".join(sys.argv[1:])
        wait = JOB_POLL_S[args.runtime]
        if args.runtime == "simulated":
            title = "# Hostile inputs: before / after\n\n"
            how = "simulated runtime, 2 lanes"
        else:
            title = "\n## Run-time cases: the real runners (runtime auto, CPU lane)\n\n"
            how = "runtime auto (ultralytics on this host's CPU)"
        section = (
            title
            + ", ".join(
                f"{lab}: `{c}` ({s})" for lab, c, s in zip(labels, commits, args.src, strict=False)
            )
            + f"\n\nServer: `python -m yolo_orch.cli serve`, {how}, log level warning, "
            "loopback. One request per case, client timeout 20 s; time = until the answer. "
            "RSS growth = peak VmRSS/VmHWM of the server during the request, 1 s after it and, "
            f"for a 202, until the job ended (polled up to {wait:.0f} s), minus VmRSS before "
            "(tests/hostile.py `PeakRss`). After each case GET /healthz on the same httpx "
            "client; noted only when it did not answer 200 on the same kept-alive connection "
            "(after a job that ran over 5 s, uvicorn's keep-alive timeout closes it: new conn "
            "there is expected). "
            + (
                "The glob-loop cases run last, in their own server start.\n\n"
                if args.runtime == "simulated"
                else "Before the cases, one ordinary inference job warms the model up.\n\n"
            )
            + f"Command:\n\n```sh\n{cmd}\n```\n\n{out}\n"
        )
        mode = "a" if args.append else "w"
        with args.md.open(mode) as fh:
            fh.write(section)


if __name__ == "__main__":
    main()
