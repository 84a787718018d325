"""The same bytes imported again under another name: the existing model comes back (200) as it
is, and the answer says the name was not applied."""

from __future__ import annotations

from tests.support.export_host import Host, host, host_settings

__all__ = ["host", "host_settings"]  # the fixtures, shared with the export tests


async def test_the_same_bytes_under_another_name_say_the_name_was_not_applied(
    host: Host,
) -> None:
    first = await host.client.post("/v1/models", json={"path": "tiny.pt", "name": "mine"})
    same = await host.client.post("/v1/models", json={"path": "tiny.pt", "name": "mine"})
    by_path = await host.client.post("/v1/models", json={"path": "tiny.pt", "name": "theirs"})
    derived = await host.client.post("/v1/models", json={"path": "tiny.pt"})  # named "tiny"
    upload = await host.client.post(
        "/v1/models",
        files={"file": ("x.pt", (host.model_root / "tiny.pt").read_bytes())},
        data={"name": "uploaded"},
    )

    assert first.status_code == 201, first.text
    assert (first.json()["name_applied"], first.json()["note"]) == (True, None)
    assert same.status_code == 200
    assert (same.json()["name_applied"], same.json()["note"]) == (True, None)
    for again, asked in ((by_path, "theirs"), (derived, "tiny"), (upload, "uploaded")):
        assert again.status_code == 200, again.text
        body = again.json()
        assert (body["id"], body["name"]) == (first.json()["id"], "mine")
        assert body["name_applied"] is False
        assert f"the name '{asked}' was not applied" in body["note"]
        assert "'mine'" in body["note"]
    names = [model["name"] for model in (await host.client.get("/v1/models")).json()["models"]]
    assert names == ["mine"]


async def test_the_hint_is_documented(host: Host) -> None:
    spec = (await host.client.get("/openapi.json")).json()
    answers = spec["paths"]["/v1/models"]["post"]["responses"]
    schema = spec["components"]["schemas"]["ModelImported"]
    assert answers["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ModelImported"
    )
    assert {"name_applied", "note"} <= set(schema["properties"])
