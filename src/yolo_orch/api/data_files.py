"""/v1/data-files: one folder under a data root, listed a page at a time, for a client choosing
the `dataset` or `inputs` of a submission (the dashboard's file picker). Listing only: it never
reads a file's content, and it names folders and files by their paths under a root, never by
the server's paths. The rules are the submissions' (`yolo_orch.files.data_listing`): paths
relative to a root, no `..`, symlinks leading out of the root refused, and the walk limits of
resolving a submission's inputs. Every token may read it, as it may read the jobs."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.files.data_listing import DataFolder, list_data_folder, root_names
from yolo_orch.files.inputs import InputLimits

router = APIRouter(prefix="/v1/data-files", tags=["data files"])

PAGE_MAX = 500
# A query string is bounded so that the longest one allowed, percent-encoded, stays within the
# server's request line (`max_head_bytes`): a longer one is a 422, not a 431.
PATH_MAX_CHARS = 1000
ROOT_MAX_CHARS = 128


class DataRoot(BaseModel):
    index: int = Field(description="Its place in the server's `data_roots`, from 0.")
    name: str = Field(description="Its folder's name (not the server's path).")


class DataFileEntry(BaseModel):
    name: str = Field(description="The entry's name in the folder listed.")
    kind: Literal["dir", "file"]
    size: int | None = Field(description="A file's size in bytes; null for a folder.")


class DataFiles(BaseModel):
    roots: list[DataRoot] = Field(description="Every data root a listing may name.")
    root: int = Field(description="The index of the root listed.")
    path: str = Field(
        description='The folder listed, under the root (`""`: the root itself). A submission '
        "names an entry as `path/name` (looked up under each data root in order)."
    )
    entries: list[DataFileEntry] = Field(
        description="This page of the folder's folders (first) and files, each by name. "
        "Names starting with `.`, and symlinks leading out of the root, are left out."
    )
    total: int = Field(description="Entries the folder lists, over all pages.")
    next_offset: int | None = Field(description="`offset` of the next page; null on the last.")

    @classmethod
    def of(cls, folder: DataFolder, names: list[str]) -> DataFiles:
        return cls(
            roots=[DataRoot(index=index, name=name) for index, name in enumerate(names)],
            root=folder.root,
            path=folder.path,
            entries=[
                DataFileEntry(name=entry.name, kind=entry.kind, size=entry.size)
                for entry in folder.entries
            ],
            total=folder.total,
            next_offset=folder.next_offset,
        )


@router.get(
    "",
    response_model=DataFiles,
    summary="List a folder under a data root",
    description="One folder under one of the server's `data_roots`, a page at a time: its "
    "folders, then its files, each by name, with a file's size. `root` names the data root by "
    "its index or its folder's name; `path` is the folder under it (empty: the root). Paths "
    "follow a submission's rules: an absolute path, `..`, or a symlink whose real path is "
    "outside the root is refused (422 `path_outside_roots`), as is a root the server does not "
    "have; a folder that does not exist, or a file, is refused by the file system's own code "
    "(422 `invalid_path`, `path_not_a_directory`, ...); a folder with more entries than "
    "`max_walk_entries`, or slower to read than `input_walk_timeout_s`, is refused (422 "
    "`input_walk_too_large`); no data roots at all: 422 `no_data_roots`.",
    responses=problem_responses(422),
)
async def list_data_files(
    services: ServicesDep,
    root: Annotated[
        str,
        Query(max_length=ROOT_MAX_CHARS, description="The data root: its index or folder name."),
    ] = "0",
    path: Annotated[
        str,
        Query(max_length=PATH_MAX_CHARS, description="The folder under the root; empty: the root."),
    ] = "",
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 100,
) -> DataFiles:
    settings = services.settings
    roots = list(settings.data_roots)
    limits = InputLimits(
        max_files=settings.max_files_per_job,
        max_walk_entries=settings.max_walk_entries,
        walk_timeout_s=settings.input_walk_timeout_s,
    )
    folder = await anyio.to_thread.run_sync(
        lambda: list_data_folder(roots, root, path, offset=offset, limit=limit, limits=limits),
        limiter=services.file_limiter,
    )
    return DataFiles.of(folder, root_names(roots))
