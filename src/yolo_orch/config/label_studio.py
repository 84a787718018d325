"""Settings of the Label Studio backend (`/ls/{dataset}/...`): where Label Studio is, to read
the images of tasks that are not items of a managed dataset, and how long a prediction waits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class LabelStudio(BaseModel):
    model_config = ConfigDict(title="Label Studio")

    label_studio_url: str = Field(
        default="",
        max_length=2048,
        pattern=r"^(https?://\S+)?$",
        description="Label Studio's base URL (http://host:8080): the images of tasks it holds "
        "(uploads, `/data/...`) are read from it. Empty: only tasks whose image is a managed "
        "dataset's item (GET /v1/datasets/{name}/items/{item}/image) can be predicted.",
    )
    label_studio_token: SecretStr = Field(
        default=SecretStr(""),
        description="A Label Studio access token to read those images with: a personal access "
        "token (refreshed for an access token as Label Studio's SDK does) or a legacy token.",
    )
    label_studio_public_url: str = Field(
        default="",
        max_length=2048,
        pattern=r"^(https?://\S+)?$",
        description="Where Label Studio's pages reach this server (http://host:8000): the image "
        "URL of each task a push creates (POST /v1/datasets/{name}/push). Empty: the URL the "
        "push request came in on.",
    )
    label_studio_predict_wait_s: float = Field(
        default=90.0,
        gt=0,
        le=3600,
        description="How long POST /ls/{dataset}/predict waits for its inference job (Label "
        "Studio gives up after its ML_TIMEOUT_PREDICT, 100 s by default).",
    )
    label_studio_max_image_bytes: int = Field(
        default=64 << 20,
        ge=1024,
        description="Largest task image read from Label Studio.",
    )
