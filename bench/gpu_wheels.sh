#!/usr/bin/env bash
# The wheels a bare CUDA host (Python 3.12, torch and torchvision installed, no registry) lacks to
# run `python -m bench.gpu_check`: the project's runtime dependencies, ultralytics and what it
# imports, pytest, and the project's own wheel. Run it on a machine that reaches a package
# registry, from the repository root; copy the folder and the repository to the GPU host.
#
#   bench/gpu_wheels.sh [FOLDER]        (default: gpu-wheels)
#
# GPU_WHEELS_PYTHON=3.11 fetches the same set for another Python (default 3.12).
#
# Explicit pins (the versions this project is tested with), --no-deps: nothing is resolved on the
# way, so the list is the whole set. Left out on purpose:
# - torch, torchvision, nvidia-*, triton and torch's own dependencies (sympy, jinja2, ...): the
#   host has them, and their CUDA build must match its driver;
# - numpy and pillow come with torchvision;
# - onnx, onnxslim, onnxruntime, openvino, pycocotools: export and validation formats the gpu tests
#   do not use (openvino alone is far over the budget). The TensorRT test and the engine rows of
#   the benchmark skip without tensorrt; a host that has it also needs onnx and onnxslim
#   (GPU_WHEELS_EXTRA="onnx==1.23.2 onnxslim==0.1.98");
# - fonttools and contourpy: matplotlib imports them only for pyplot (fonttools) and contour
#   plots; the checks' paths import only `matplotlib.font_manager` (ultralytics' font check when a
#   training job reads its dataset), and no plots (the runners train with plots=False).
# opencv-python-headless stands in for opencv-python (the same cv2, without libGL, which bare CUDA
# images lack).
#
# It cannot be brought under 64 MiB without leaving out what the checks import: cv2 (54 MiB, at
# `import ultralytics`) and polars with its runtime (52 MiB: ultralytics 8.4 imports it, outside
# any try, when a training job writes a checkpoint) are each most of that on their own, and the
# smallest releases ultralytics accepts are still 47.6 and 27.5 MiB. The total is printed (133 MiB
# when this was written).
set -euo pipefail

folder="${1:-gpu-wheels}"
python="${PYTHON:-python3}"
target_python="${GPU_WHEELS_PYTHON:-3.12}"
abi="cp${target_python/./}"

wheels=(
    # the server
    fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 h11==0.16.0 click==8.5.1
    httptools==0.9.0 uvloop==0.23.0
    sqlmodel==0.0.50 sqlalchemy==2.1.9 greenlet==3.5.6 aiosqlite==0.22.1 alembic==1.20.1
    mako==1.4.3 anyio==4.16.0 idna==3.20 pydantic==2.14.4 pydantic-core==2.50.5
    annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5
    pydantic-settings==2.16.3 python-dotenv==1.2.4 httpx==0.28.1 httpcore==1.0.9
    certifi==2026.10.19.post1 httpx-sse==0.4.3 python-multipart==0.0.34
    prometheus-client==0.26.0 fastapi-offline==1.7.7 typer==0.29.2 shellingham==1.5.4
    rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 pyyaml==6.0.4
    opentelemetry-api==1.45.2
    # ultralytics and what it imports
    ultralytics==8.4.190 ultralytics-thop==2.2.3 opencv-python-headless==5.0.0.93
    matplotlib==3.11.2 cycler==0.12.1 kiwisolver==1.5.1 pyparsing==3.3.3 python-dateutil==4.0.0
    packaging==26.4 polars==2.1.0 polars-runtime-32==2.1.0 psutil==7.2.2 requests==2.34.2 urllib3==2.8.0
    charset-normalizer==3.5.3 nvidia-ml-py==13.615.71
    # the tests
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pytest-asyncio==1.5.0
)
# shellcheck disable=SC2206  # extra requirements, split on spaces on purpose
wheels+=(${GPU_WHEELS_EXTRA:-})

mkdir -p "$folder"
rm -rf "$folder"/part*  # a rerun repacks from scratch
"$python" -m pip download --quiet --dest "$folder" --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_34_x86_64 \
    --python-version "$target_python" --implementation cp --abi "$abi" --abi abi3 --abi none \
    "${wheels[@]}"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$folder" .

# opencv-python-headless and polars' runtime, both imported on the checks' paths, are each over 50
# MiB, so the set cannot travel as one 64 MiB folder: it is packed, largest first, into
# FOLDER/part1, part2, ... of at most 60 MiB each (room for the repository beside it).
"$python" - "$folder" $((60 << 20)) <<'PACK'
import sys
from pathlib import Path

folder, limit = Path(sys.argv[1]), int(sys.argv[2])
sizes = {path: path.stat().st_size for path in folder.glob("*.whl")}
parts: list[list[Path]] = []
for wheel in sorted(sizes, key=sizes.__getitem__, reverse=True):
    part = next((p for p in parts if sum(map(sizes.__getitem__, p)) + sizes[wheel] <= limit), None)
    if part is None:
        parts.append(part := [])
    part.append(wheel)
for number, part in enumerate(parts, 1):
    target = folder / f"part{number}"
    target.mkdir(exist_ok=True)
    for wheel in part:
        wheel.rename(target / wheel.name)
    print(f"{target}: {len(part)} wheels, {sum(map(sizes.__getitem__, part)) / 2**20:.1f} MiB")
print(f"{folder}: {len(sizes)} wheels, {sum(sizes.values()) / 2**20:.1f} MiB in all")
PACK
