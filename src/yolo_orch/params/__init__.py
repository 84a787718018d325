"""The parameters of each job kind: one definition each, which the API's request schema (and so
the OpenAPI document) and the runners both use, so that what the API accepts the runner runs.

Plain pydantic models: no FastAPI, SQL or torch here."""
