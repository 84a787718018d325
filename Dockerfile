# yolo-orch on a GPU host: docker run --gpus all (NVIDIA Container Toolkit on the host).
#
#   docker build -t yolo-orch .
#   docker build -t yolo-orch --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 .
#
# Everything is installed at build time; the container needs no network at run time.
#
# The base image brings the NVIDIA container settings; the CUDA and cuDNN libraries PyTorch uses
# come with its CUDA wheels (from TORCH_INDEX_URL), so a "-base-" image suffices and keeps the
# image gigabytes smaller. Pick the wheel index for a CUDA release the host driver supports
# (nvidia-smi shows the newest it supports).
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-base-ubuntu22.04

FROM ${CUDA_IMAGE} AS build
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/yolo-orch/.venv
ENV PATH=/opt/yolo-orch/.venv/bin:$PATH
# The CUDA build of torch first, within the project's bounds; `.[yolo]` then finds it installed.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch>=2.6,<=2.14.1" "torchvision<=0.29.1"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY migrations ./migrations
RUN pip install ".[yolo]"

FROM ${CUDA_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
# libgl1 and libglib2.0-0: OpenCV, which ultralytics imports.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/yolo-orch \
        --shell /usr/sbin/nologin yolo-orch \
    && install -d -o yolo-orch -g yolo-orch -m 0750 /var/lib/yolo-orch
COPY --from=build /opt/yolo-orch/.venv /opt/yolo-orch/.venv

# Listening on every interface: the server refuses to serve a non-loopback address without API
# tokens (see config.example.toml) unless allow_unauthenticated = true. Mount a config file with
# the tokens and name it: -e YOLO_ORCH_CONFIG=/etc/yolo-orch/config.toml. Name there, or in
# YOLO_ORCH_ALLOWED_HOSTS, the names and addresses clients reach it by: others get 421.
ENV PATH=/opt/yolo-orch/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/yolo-orch \
    CUDA_DEVICE_ORDER=PCI_BUS_ID \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    YOLO_ORCH_DATA_DIR=/var/lib/yolo-orch \
    YOLO_ORCH_HOST=0.0.0.0 \
    YOLO_ORCH_PORT=8000
USER yolo-orch
WORKDIR /var/lib/yolo-orch
# The database, job files and imported models: keep them on a volume.
VOLUME ["/var/lib/yolo-orch"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('YOLO_ORCH_PORT', '8000'), timeout=4)"]
# SIGTERM drains: running jobs get shutdown_grace_s (30 s); run with --stop-timeout 60.
STOPSIGNAL SIGTERM
ENTRYPOINT ["yolo-orch"]
CMD ["serve"]
