"""/v1/devices: what every lane is doing."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from yolo_orch.api.deps import ServicesDep

router = APIRouter(prefix="/v1/devices", tags=["devices"])


class LanePublic(BaseModel):
    id: str = Field(examples=["cuda:0"])
    slots: int
    busy: int = Field(description="Turns taken now.")
    jobs: list[str] = Field(description="Ids of the jobs running on this lane.")
    models: list[str] = Field(description="Names of the models loaded on this lane.")


class DeviceList(BaseModel):
    runtime: str
    devices: list[LanePublic]


@router.get("", response_model=DeviceList, summary="Lanes, their jobs and loaded models")
async def list_devices(services: ServicesDep) -> DeviceList:
    names = {model.sha256: model.name for model in await services.models.list_models()}
    return DeviceList(
        runtime=services.runtime.name,
        devices=[
            LanePublic(
                id=lane.id,
                slots=lane.slots,
                busy=lane.busy,
                jobs=sorted(lane.jobs),
                models=[
                    names.get(sha, sha[:12]) for sha in services.runtime.cached_models(lane.id)
                ],
            )
            for lane in services.lanes
        ],
    )
