"""The real Label Studio the labelling tests use: its token opens the REST API, and the SDK in
its own venv talks to it."""

from __future__ import annotations

from yolo_orch.testing.label_studio import LabelStudio

BOXES = (
    '<View><Image name="image" value="$image"/>'
    '<RectangleLabels name="label" toName="image"><Label value="cat"/></RectangleLabels></View>'
)


def test_the_token_opens_the_api_and_the_sdk_creates_a_project(label_studio: LabelStudio) -> None:
    created = label_studio.run_sdk(
        "result = ls.projects.create(title=args['title'], label_config=args['config']).id",
        {"title": "harness check", "config": BOXES},
    )
    assert isinstance(created, int)
    with label_studio.client() as client:
        project = client.get(f"/api/projects/{created}").json()
        unauthenticated = client.get("/api/projects", headers={"Authorization": "Token wrong"})
    assert project["title"] == "harness check"
    assert "RectangleLabels" in project["label_config"]
    assert unauthenticated.status_code == 401
