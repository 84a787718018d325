"""bench.small_jobs' LitServe side: the checkpoint served by LitServe on the CPU, one worker, the
same predict arguments as the direct side; each predict call appends its batch size to the file
named by `BENCH_LITSERVE_BATCH_LOG`.

    python -m bench._litserve WEIGHTS --imgsz 320 --batch 8 --port 8001
"""

# No `from __future__ import annotations`: LitServe reads decode_request's annotation as the
# request body's type, and a string there makes every request a 422.
import argparse
import base64
import os
from pathlib import Path
from typing import Any

import litserve as ls

from yolo_orch.runners.inference import default_cpu_threads

LITSERVE_BATCH_LOG = "BENCH_LITSERVE_BATCH_LOG"


class YoloAPI(ls.LitAPI):  # type: ignore[misc]
    def __init__(self, weights: str, imgsz: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.weights = weights
        self.imgsz = imgsz

    def setup(self, device: str) -> None:
        import torch
        from ultralytics.models import YOLO

        torch.set_num_threads(default_cpu_threads())
        self.model = YOLO(self.weights)
        self.log = Path(os.environ[LITSERVE_BATCH_LOG]).open("a")  # noqa: SIM115

    def decode_request(self, request: dict[str, Any]) -> Any:
        import cv2
        import numpy as np

        data = np.frombuffer(base64.b64decode(request["image"]), np.uint8)
        return cv2.imdecode(data, cv2.IMREAD_COLOR)

    def batch(self, inputs: list[Any]) -> list[Any]:
        return inputs

    def unbatch(self, output: list[Any]) -> list[Any]:
        return output

    def predict(self, x: Any) -> Any:
        images = x if isinstance(x, list) else [x]
        results = self.model.predict(images, imgsz=self.imgsz, device="cpu", verbose=False)
        self.log.write(f"{len(images)}\n")
        self.log.flush()
        counts = [len(getattr(result, "boxes", None) or ()) for result in results]
        return counts if isinstance(x, list) else counts[0]

    def encode_response(self, output: int) -> dict[str, int]:
        return {"detections": int(output)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("weights")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    timeout = 0.01 if args.batch > 1 else 0.0
    api = YoloAPI(args.weights, args.imgsz, max_batch_size=args.batch, batch_timeout=timeout)
    server = ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=1)
    server.run(port=args.port, log_level="warning", generate_client_file=False)


if __name__ == "__main__":
    main()
