"""What a push to or a pull from a Label Studio project (POST /v1/datasets/{name}/push|pull)
could not do."""

from __future__ import annotations

from yolo_orch.errors.base import YoloOrchError
from yolo_orch.errors.codes import ErrorCode


class LabelStudioNotConfigured(YoloOrchError):
    code = ErrorCode.LABEL_STUDIO_NOT_CONFIGURED

    def __init__(self) -> None:
        super().__init__(
            "this server knows no Label Studio to sync with: set label_studio_url and "
            "label_studio_token (docs/configuration.md)"
        )


class LabelStudioProjectNotFound(YoloOrchError):
    code = ErrorCode.LABEL_STUDIO_PROJECT_NOT_FOUND

    def __init__(self, project: int) -> None:
        super().__init__(f"Label Studio has no project {project} this server's token can see")
        self.project = project


class LabelStudioFailed(YoloOrchError):
    code = ErrorCode.LABEL_STUDIO_FAILED

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"Label Studio could not {what}: {why}")
