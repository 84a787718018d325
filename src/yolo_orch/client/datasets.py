"""Managed datasets from Python: `Client` and `AsyncClient` inherit these methods
(`SyncDatasets`, `AsyncDatasets`). A training job names one as `dataset="dataset:<name>"`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from yolo_orch.api.dataset_schemas import DatasetList, DatasetPublic
from yolo_orch.client import wire
from yolo_orch.client.wire import Json

__all__ = ["AsyncDatasets", "DatasetPublic", "SyncDatasets"]


def dataset_path(name: str, tail: str = "") -> str:
    return f"/v1/datasets/{wire.segment(name)}{tail}"


def create_body(
    name: str,
    task: str,
    names: Sequence[str],
    kpt_shape: tuple[int, int] | None,
    labelling: Mapping[str, Any] | None,
) -> Json:
    body: Json = {"name": name, "task": task, "names": list(names)}
    if kpt_shape is not None:
        body["kpt_shape"] = list(kpt_shape)
    if labelling is not None:
        body["labelling"] = dict(labelling)
    return body


class _SyncRequests(Protocol):
    def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    def _request(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def download(self, path: str, to: Path | str, *, fallback_name: str = ...) -> Path: ...


class SyncDatasets:
    """`Client`'s managed dataset methods."""

    def create_dataset(
        self: _SyncRequests,
        name: str,
        task: str,
        names: Sequence[str],
        *,
        kpt_shape: tuple[int, int] | None = None,
        labelling: Mapping[str, Any] | None = None,
    ) -> DatasetPublic:
        """An empty managed dataset (`dataset_exists` if the name is taken)."""
        body = create_body(name, task, names, kpt_shape, labelling)
        return DatasetPublic.model_validate(self._json("POST", "/v1/datasets", json=body))

    def dataset(self: _SyncRequests, name: str) -> DatasetPublic:
        """A dataset with its counts per split, class and source."""
        return DatasetPublic.model_validate(self._json("GET", dataset_path(name)))

    def datasets(self: _SyncRequests) -> list[DatasetPublic]:
        return DatasetList.model_validate(self._json("GET", "/v1/datasets")).datasets

    def delete_dataset(self: _SyncRequests, name: str) -> None:
        self._request("DELETE", dataset_path(name))

    def download_dataset(self: _SyncRequests, name: str, to: Path | str) -> Path:
        """The dataset as a zip, streamed to `to` (a file, or a folder to put it in)."""
        return self.download(dataset_path(name, "/zip"), to, fallback_name=f"{name}.zip")


class _AsyncRequests(Protocol):
    async def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any: ...

    async def download(self, path: str, to: Path | str, *, fallback_name: str = ...) -> Path: ...


class AsyncDatasets:
    """`AsyncClient`'s managed dataset methods (those of `SyncDatasets`, awaited)."""

    async def create_dataset(
        self: _AsyncRequests,
        name: str,
        task: str,
        names: Sequence[str],
        *,
        kpt_shape: tuple[int, int] | None = None,
        labelling: Mapping[str, Any] | None = None,
    ) -> DatasetPublic:
        body = create_body(name, task, names, kpt_shape, labelling)
        return DatasetPublic.model_validate(await self._json("POST", "/v1/datasets", json=body))

    async def dataset(self: _AsyncRequests, name: str) -> DatasetPublic:
        return DatasetPublic.model_validate(await self._json("GET", dataset_path(name)))

    async def datasets(self: _AsyncRequests) -> list[DatasetPublic]:
        return DatasetList.model_validate(await self._json("GET", "/v1/datasets")).datasets

    async def delete_dataset(self: _AsyncRequests, name: str) -> None:
        await self._request("DELETE", dataset_path(name))

    async def download_dataset(self: _AsyncRequests, name: str, to: Path | str) -> Path:
        return await self.download(dataset_path(name, "/zip"), to, fallback_name=f"{name}.zip")
