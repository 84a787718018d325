"""Sync a managed dataset with a Label Studio project, both ways, over Label Studio's REST API:

- push: the dataset's items (those a model labelled, or all) become tasks of the project, each
  `image` the item's URL on this server (`<public url>/v1/datasets/{name}/items/{item}/image`,
  with `?key=`, the dataset's image key: Label Studio's pages load it with no token),
  with the stored labels as a prediction (`model_version`: the model that made them) or, for an
  item a person labelled, as an annotation. The task's data also names the dataset and item
  (`yolo_orch_dataset`, `yolo_orch_item`), which is how a pull finds the item again. Which items
  went to which project is kept in the dataset's manifest (`labelling.label_studio_pushed`), so a
  second push sends only what the first did not;
- pull: each of the project's tasks of this dataset with an annotation gets the labels of its
  latest annotation that was not skipped, as YOLO lines of source `annotation`.

Label Studio's own client (`label-studio-sdk`) is not used: its pins (numpy, OpenCV, pydantic)
clash with the YOLO runtime's. The token is a legacy token, or a personal access token that is
exchanged for an access token as the SDK does (`/api/token/refresh/`, again after a 401).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlencode

import anyio
import httpx
from PIL import Image

from yolo_orch.domain.managed_datasets import DatasetInfo, ItemInfo
from yolo_orch.errors import (
    DatasetItemNotFound,
    InvalidDatasetItem,
    LabelStudioFailed,
    LabelStudioNotConfigured,
    LabelStudioProjectNotFound,
)
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.label_entries import entry_of_lines
from yolo_orch.labelling.ls_config import LabelConfig, parse_label_config
from yolo_orch.labelling.ls_results import prediction, yolo_lines

PUSHED_KEY = "label_studio_pushed"
"""The manifest's `labelling` key: project id (as a string) -> the item ids pushed to it."""
DATASET_FIELD = "yolo_orch_dataset"
ITEM_FIELD = "yolo_orch_item"
TASKS_PER_IMPORT = 100
"""Tasks sent in one import request; what each imported is recorded before the next."""
_TIMEOUT = httpx.Timeout(60.0, connect=5.0)

PushScope = Literal["model", "all"]
T = TypeVar("T")


@dataclass(frozen=True)
class PushCounts:
    pushed: int
    """Tasks created."""
    already: int
    """Items pushed to this project before, not sent again."""
    predictions: int
    """Of the tasks created, those with a prediction (the rest had no label to show, or are
    annotations)."""


@dataclass(frozen=True)
class PullCounts:
    annotated: int
    """Tasks of this dataset with an annotation that was not skipped."""
    updated: int
    """Items whose labels were replaced by their annotation's."""
    unchanged: int
    """Items that already held their annotation's labels."""
    missing: int
    """Tasks whose item is no longer in the dataset."""
    other: int
    """Tasks of the project that name no item of this dataset (left alone)."""


class LabelStudioSync:
    def __init__(
        self,
        datasets: ManagedDatasets,
        base_url: str,
        token: str,
        *,
        file_limiter: anyio.CapacityLimiter | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`file_limiter`: the threads the dataset's files are read and written in."""
        self._datasets = datasets
        self._limiter = file_limiter
        self._api = _Api(base_url, token, transport)
        self._locks: defaultdict[tuple[str, int], anyio.Lock] = defaultdict(anyio.Lock)

    async def push(
        self, dataset: str, project: int, *, public_url: str, scope: PushScope = "model"
    ) -> PushCounts:
        """Send the dataset's items of `scope` not pushed to `project` yet; `public_url` is
        where Label Studio's pages reach this server."""
        info = await self._in_thread(self._datasets.get, dataset)
        config = await self._label_config(project)
        async with self._locks[(dataset, project)]:
            info = await self._in_thread(self._datasets.get, dataset)
            pushed = set(_pushed(info, project))
            items = await self._in_thread(
                self._datasets.items, dataset, None if scope == "all" else scope
            )
            todo = [item for item in items if item.id not in pushed]
            key = await self._in_thread(self._datasets.image_key, dataset)
            images = _ImageUrls(public_url.rstrip("/"), info.name, key)
            predictions = 0
            for start in range(0, len(todo), TASKS_PER_IMPORT):
                chunk = todo[start : start + TASKS_PER_IMPORT]
                tasks = await self._in_thread(self._tasks, info, config, chunk, images)
                await self._api.call("POST", f"/api/projects/{project}/import", json=tasks)
                predictions += sum(1 for task in tasks if task.get("predictions"))
                pushed.update(item.id for item in chunk)
                await self._in_thread(self._record, dataset, project, pushed)
        return PushCounts(len(todo), len(items) - len(todo), predictions)

    async def pull(self, dataset: str, project: int) -> PullCounts:
        """Bring the latest annotation of each of the project's tasks of this dataset home."""
        info = await self._in_thread(self._datasets.get, dataset)
        config = await self._label_config(project)
        exported = await self._api.call(
            "GET",
            f"/api/projects/{project}/export",
            params={"exportType": "JSON", "download_all_tasks": "false"},
        )
        tasks = exported if isinstance(exported, list) else []
        return await self._in_thread(self._apply, info, config, tasks)

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(function, *args, limiter=self._limiter)

    async def _label_config(self, project: int) -> LabelConfig:
        found = await self._api.call("GET", f"/api/projects/{project}", project=project)
        return parse_label_config(str(found.get("label_config") or ""))

    def _tasks(
        self, info: DatasetInfo, config: LabelConfig, items: Sequence[ItemInfo], images: _ImageUrls
    ) -> list[dict[str, Any]]:
        return [self._task(info, config, item, images) for item in items]

    def _task(
        self, info: DatasetInfo, config: LabelConfig, item: ItemInfo, images: _ImageUrls
    ) -> dict[str, Any]:
        path = self._datasets.item_image(info.name, item.id)
        with Image.open(path) as image:
            width, height = image.size
        lines = self._datasets.item_labels(info.name, item.id)
        entry = entry_of_lines(info.task, lines, info.names, width, height)
        result = prediction(entry, info.task, config).result
        task: dict[str, Any] = {
            "data": {
                config.image_key: images.of(item.id),
                DATASET_FIELD: info.name,
                ITEM_FIELD: item.id,
            }
        }
        if result and item.source == "annotation":
            task["annotations"] = [{"result": _unscored(result)}]
        elif result:
            version = item.model_id or "yolo-orch"
            task["predictions"] = [{"model_version": version, "result": result}]
        return task

    def _record(self, dataset: str, project: int, pushed: set[str]) -> None:
        info = self._datasets.get(dataset)
        record = dict(info.labelling.get(PUSHED_KEY) or {})
        record[str(project)] = sorted(pushed)
        self._datasets.update_labelling(dataset, {PUSHED_KEY: record})

    def _apply(
        self, info: DatasetInfo, config: LabelConfig, tasks: Sequence[Mapping[str, Any]]
    ) -> PullCounts:
        sources = {item.id: item.source for item in self._datasets.items(info.name)}
        annotated = updated = unchanged = missing = other = 0
        for task in tasks:
            data = task.get("data") or {}
            item = data.get(ITEM_FIELD)
            if data.get(DATASET_FIELD) != info.name or not isinstance(item, str):
                other += 1
                continue
            annotation = _latest(task.get("annotations") or [])
            if annotation is None:
                continue
            annotated += 1
            if item not in sources:
                missing += 1
                continue
            lines = yolo_lines(
                annotation.get("result") or [], info.task, info.names, config, info.kpt_shape
            )
            if info.task == "classify" and not lines:
                continue  # nothing chosen: a classify item keeps a class
            current = self._datasets.item_labels(info.name, item)
            if sources[item] == "annotation" and current == lines:
                unchanged += 1
                continue
            try:
                self._datasets.set_labels(info.name, item, lines, source="annotation")
            except DatasetItemNotFound:
                missing += 1
                continue
            except InvalidDatasetItem as exc:
                raise LabelStudioFailed(
                    f"give labels this dataset can hold for task {task.get('id')}", exc.message
                ) from None
            updated += 1
        return PullCounts(annotated, updated, unchanged, missing, other)


@dataclass(frozen=True)
class _ImageUrls:
    """Where Label Studio's pages load a dataset's item images: this server's route, with the
    dataset's image key (a browser's `<img>` sends no token)."""

    public_url: str
    dataset: str
    key: str

    def of(self, item: str) -> str:
        path = f"/v1/datasets/{quote(self.dataset)}/items/{quote(item)}/image"
        return f"{self.public_url}{path}?{urlencode({'key': self.key})}"


def _pushed(info: DatasetInfo, project: int) -> list[str]:
    record = info.labelling.get(PUSHED_KEY) or {}
    items = record.get(str(project)) if isinstance(record, dict) else None
    return [item for item in items or [] if isinstance(item, str)]


def _latest(annotations: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    kept = [each for each in annotations if not each.get("was_cancelled")]
    if not kept:
        return None
    return max(kept, key=lambda each: (str(each.get("updated_at") or ""), each.get("id") or 0))


def _unscored(result: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A person's labels carry no model score."""
    return [{key: value for key, value in region.items() if key != "score"} for region in result]


class _Api:
    """Label Studio's REST API with the server's token; every failure is a `LabelStudioFailed`."""

    def __init__(
        self, base_url: str, token: str, transport: httpx.AsyncBaseTransport | None
    ) -> None:
        self._base = base_url.rstrip("/")
        self._token = token
        self._transport = transport
        self._access: str | None = None
        self._lock = anyio.Lock()

    async def call(
        self,
        method: str,
        path: str,
        *,
        project: int | None = None,
        params: Mapping[str, str] | None = None,
        json: object = None,
    ) -> Any:
        if not (self._base and self._token):
            raise LabelStudioNotConfigured()
        what = f"answer {method} {path}"
        try:
            async with httpx.AsyncClient(
                base_url=self._base, transport=self._transport, timeout=_TIMEOUT
            ) as client:
                for attempt in range(2):
                    headers = {"Authorization": await self._authorization(client, attempt > 0)}
                    response = await client.request(
                        method, path, params=params, json=json, headers=headers
                    )
                    if response.status_code == 401 and attempt == 0 and self._is_jwt():
                        continue  # the access token expired: refresh it once
                    break
        except httpx.HTTPError as exc:
            raise LabelStudioFailed(what, f"{type(exc).__name__}: {exc}") from None
        if response.status_code == 404 and project is not None:
            raise LabelStudioProjectNotFound(project)
        if response.status_code >= 300:
            raise LabelStudioFailed(what, f"{response.status_code} {response.text[:500]}")
        try:
            return response.json()
        except ValueError:
            raise LabelStudioFailed(what, "its answer is not JSON") from None

    def _is_jwt(self) -> bool:
        return self._token.count(".") == 2

    async def _authorization(self, client: httpx.AsyncClient, renew: bool) -> str:
        if not self._is_jwt():
            return f"Token {self._token}"
        async with self._lock:
            if self._access is None or renew:
                response = await client.post("/api/token/refresh/", json={"refresh": self._token})
                if response.status_code != 200:
                    raise LabelStudioFailed(
                        "refresh the token", f"{response.status_code} {response.text[:200]}"
                    )
                self._access = str(response.json()["access"])
            return f"Bearer {self._access}"
