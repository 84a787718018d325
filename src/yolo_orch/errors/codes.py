"""Every machine `code` the server sends: in a problem answer's `code` (and `type`), and in a failed
job's `error.code`. One enum, so that the API, the runners, `GET /v1/meta` and docs/errors.md
(a test holds the page to it) name the same strings; clients may branch on them, so a value never
changes. Each member carries its meaning in one line, which `GET /v1/meta` serves."""

from __future__ import annotations

import enum


class ErrorCode(enum.StrEnum):
    """A code, and what it means in one line (`meaning`)."""

    meaning: str

    def __new__(cls, value: str, meaning: str = "") -> ErrorCode:
        # `meaning` has a default only so that a lookup by value, `ErrorCode("timeout")`, types
        # as the call it is; every member gives one (a test holds them to it).
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    # The request itself: the HTTP layer, the routes, the token.
    INVALID_HTTP = "invalid_http", "Not HTTP/1.1 the server can parse; the connection is closed."
    CLIENT_DISCONNECTED = (
        "client_disconnected",
        "The client closed the connection before its body ended.",
    )
    UNAUTHORIZED = "unauthorized", "A bearer token is missing or is not one of the server's."
    FORBIDDEN = (
        "forbidden",
        "The token's scope does not allow this (it needs `admin`, or `models:write`).",
    )
    CROSS_ORIGIN = "cross_origin", "A change asked for by a page of another site."
    NOT_FOUND = "not_found", "No route for this method and path."
    METHOD_NOT_ALLOWED = (
        "method_not_allowed",
        "The path exists but not for this method (see `Allow`).",
    )
    REQUEST_TIMEOUT = (
        "request_timeout",
        "The request's head or body stopped arriving; the connection is closed.",
    )
    HOST_NOT_ALLOWED = (
        "host_not_allowed",
        "A `Host` that is not one of the server's names (`allowed_hosts`).",
    )
    HEADERS_TOO_LARGE = (
        "headers_too_large",
        "The request line and headers are over `max_header_bytes`.",
    )
    NOT_IMPLEMENTED = "not_implemented", "A `Transfer-Encoding` that does not end in `chunked`."
    TOO_MANY_CONNECTIONS = (
        "too_many_connections",
        "The server is at its cap on connections; retry after `Retry-After`.",
    )
    BODY_TOO_LARGE = "body_too_large", "The request body is larger than the server takes."
    UNSUPPORTED_MEDIA_TYPE = (
        "unsupported_media_type",
        "The body's media type is not one this route reads.",
    )
    RANGE_NOT_SATISFIABLE = (
        "range_not_satisfiable",
        "No range of the `Range` header overlaps the file.",
    )
    INVALID_REQUEST = (
        "invalid_request",
        "The request does not validate; `errors` lists each invalid field.",
    )
    INVALID_CURSOR = "invalid_cursor", "The paging cursor is not one the server gave."
    IDEMPOTENCY_KEY_REUSED = (
        "idempotency_key_reused",
        "The Idempotency-Key was already used with a different request.",
    )
    INTERNAL_ERROR = "internal_error", "A bug in the server; it is logged with its traceback."

    # The server's state: busy, stopping, out of space.
    QUEUE_FULL = "queue_full", "The queue holds as many jobs as it may; retry after `Retry-After`."
    IMPORTS_BUSY = (
        "imports_busy",
        "As many imports as `max_concurrent_imports` are under way; retry later.",
    )
    SHUTTING_DOWN = "shutting_down", "The server is stopping and takes no new jobs."
    INSUFFICIENT_STORAGE = (
        "insufficient_storage",
        "Too little free disk space to store what was sent; nothing was stored.",
    )
    INSTANCE_LOCKED = (
        "instance_locked",
        "Another server already runs on this `data_dir` (at start, not over HTTP).",
    )
    NOT_ACTIVE_HEAD = (
        "not_active_head",
        "This head is a standby and no active head is known (a takeover is under way), or its "
        "lease passed to another head; retry after `Retry-After`.",
    )

    # What a request names that is not there, or not in a state for it.
    JOB_NOT_FOUND = "job_not_found", "No job with this id."
    JOB_FINISHED = "job_finished", "The job has already ended."
    JOB_ACTIVE = "job_active", "The job is queued or running; only a finished job can be deleted."
    RESULT_NOT_READY = (
        "result_not_ready",
        "The job is queued or running: it may have a result later.",
    )
    NO_RESULT = "no_result", "The job failed or was cancelled: it will never have a result."
    ARTIFACT_NOT_FOUND = "artifact_not_found", "The job has no artifact of this name."
    UPLOAD_NOT_FOUND = "upload_not_found", "The job has no image uploaded at this place."
    FRAMES_NOT_FOUND = (
        "frames_not_found",
        "This entry of the job's result is not a video with frames.",
    )
    SNAPSHOT_NOT_FOUND = (
        "snapshot_not_found",
        "The job is not a stream, or its stream has written no snapshot yet.",
    )
    MODEL_NOT_FOUND = "model_not_found", "No model of this name or id on this host."
    DEPENDENCY_NOT_FOUND = (
        "dependency_not_found",
        "A job named in `after` or `after_ok` does not exist.",
    )
    DEPENDENCY_FAILED = (
        "dependency_failed",
        "A job this one waited for with `after_ok` did not succeed: it will never run.",
    )
    VARIANT_NOT_FOUND = "variant_not_found", "No exported variant with this id."
    MODEL_NAME_TAKEN = "model_name_taken", "Another model already has this name."
    MODEL_IN_USE = "model_in_use", "Queued or running jobs use the model."
    MODEL_HAS_VARIANTS = (
        "model_has_variants",
        "The model has exported variants; delete with `cascade=true`.",
    )
    MODEL_UNUSABLE = (
        "model_unusable",
        "The model's file no longer matched its fingerprint; import it again.",
    )
    ALIAS_NOT_FOUND = "alias_not_found", "No alias of this name for this model name."
    ALIAS_MOVED = (
        "alias_moved",
        "The alias no longer points where the move expected (`expected_model_id`).",
    )
    ALIAS_HAS_NO_PREVIOUS = (
        "alias_has_no_previous",
        "A rollback of an alias whose last move made it: there is nothing to go back to.",
    )
    ALIAS_TASK_MISMATCH = (
        "alias_task_mismatch",
        "The alias points to a model of another task: jobs checked against it would fail.",
    )
    MODEL_HAS_ALIASES = (
        "model_has_aliases",
        "Aliases point to the model; move or delete them first.",
    )
    DATASET_EXISTS = "dataset_exists", "A managed dataset of this name already exists."
    DATASET_ITEM_NOT_FOUND = (
        "dataset_item_not_found",
        "The managed dataset has no item with this id.",
    )

    # The Label Studio backend (/ls/{dataset}/...).
    LABEL_CONFIG_INVALID = (
        "label_config_invalid",
        "A Label Studio labelling config this server cannot read or has no control for.",
    )
    LABELLING_NOT_SET = (
        "labelling_not_set",
        "The managed dataset's `labelling` names no model to predict with or train from.",
    )
    PREDICTION_FAILED = (
        "prediction_failed",
        "The inference job of a Label Studio prediction failed or did not end in time.",
    )
    TASK_IMAGE_UNAVAILABLE = (
        "task_image_unavailable",
        "A task's image is no managed dataset item and could not be read from Label Studio.",
    )

    # A push to or a pull from a Label Studio project (/v1/datasets/{name}/push|pull).
    LABEL_STUDIO_NOT_CONFIGURED = (
        "label_studio_not_configured",
        "The server has no `label_studio_url` and `label_studio_token` to sync with.",
    )
    LABEL_STUDIO_PROJECT_NOT_FOUND = (
        "label_studio_project_not_found",
        "Label Studio has no project of this id that the server's token can see.",
    )
    LABEL_STUDIO_FAILED = (
        "label_studio_failed",
        "Label Studio could not be reached, or refused or failed a request of a sync.",
    )

    # A submission or an import the server refuses (422).
    TOO_MANY_GPUS = "too_many_gpus", "The job asks for more GPUs than a host (or node) has lanes."
    NO_DATA_ROOTS = (
        "no_data_roots",
        "The server has no `data_roots` to read inputs or datasets from.",
    )
    NO_MODEL_ROOTS = (
        "no_model_roots",
        "The server has no `model_roots` to import weights from by path.",
    )
    PATH_OUTSIDE_ROOTS = "path_outside_roots", "A path outside the server's data or model roots."
    INVALID_PATH = "invalid_path", "A path the file system refuses."
    PATH_TOO_LONG = "path_too_long", "A path longer than the file system takes."
    PATH_SYMLINK_LOOP = "path_symlink_loop", "A path whose symbolic links loop."
    PATH_NOT_A_DIRECTORY = (
        "path_not_a_directory",
        "A path that goes through a file where a folder should be.",
    )
    PATH_PERMISSION_DENIED = "path_permission_denied", "A path the server may not read."
    INPUT_NOT_FOUND = (
        "input_not_found",
        "An input pattern that matches no regular file under the data roots.",
    )
    INPUT_WALK_TOO_LARGE = (
        "input_walk_too_large",
        "Expanding a glob visited too many entries or took too long.",
    )
    NO_INPUTS = "no_inputs", "The inputs name no files."
    TOO_MANY_FILES = "too_many_files", "More files than `max_files_per_job`."
    IMAGE_TOO_LARGE = (
        "image_too_large",
        "An uploaded image with more pixels than `max_image_pixels`.",
    )
    DATASET_NOT_FOUND = (
        "dataset_not_found",
        "A dataset (a managed one by name, or a data.yaml), or a folder or file it names, "
        "that does not exist.",
    )
    INVALID_DATASET = "invalid_dataset", "A dataset YAML or layout that a job cannot use."
    UNSAFE_DATASET = "unsafe_dataset", "A dataset YAML that asks for a download or runs code."
    INVALID_DATASET_ITEM = (
        "invalid_dataset_item",
        "An image or labels a managed dataset cannot hold (shape, class id, image type).",
    )
    TASK_MISMATCH = "task_mismatch", "A parameter or dataset that does not fit the model's task."
    CLASS_NAMES_TOO_LARGE = (
        "class_names_too_large",
        "More class names, or longer ones, than the server keeps.",
    )
    FILE_NOT_FOUND = "file_not_found", "No such file under the model roots."
    INVALID_WEIGHTS = (
        "invalid_weights",
        "A file that is not an ultralytics checkpoint this server loads safely.",
    )
    IMPORT_AS_VARIANT = (
        "import_as_variant",
        "An exported model file: import it as a variant of its model.",
    )
    FORMAT_NOT_IMPORTABLE = (
        "format_not_importable",
        "Files of this format run code when loaded, so they cannot be imported.",
    )
    UNSUPPORTED_VARIANT_FILE = (
        "unsupported_variant_file",
        "A file that is not of any format a variant may have.",
    )
    INVALID_VARIANT = "invalid_variant", "The file is not a usable exported model."
    VARIANT_MISMATCH = (
        "variant_mismatch",
        "A variant's task, class names or outputs are not its model's.",
    )
    FORMAT_NOT_AVAILABLE = (
        "format_not_available",
        "No usable variant of the asked format on the lanes that could run the job.",
    )
    EXPORT_UNSUPPORTED = (
        "export_unsupported",
        "This export cannot be made of this model, or on this server.",
    )
    SOURCE_NOT_ALLOWED = (
        "source_not_allowed",
        "A stream source whose scheme or host `stream_allowed_hosts` does not allow.",
    )
    WEBHOOK_NOT_ALLOWED = (
        "webhook_not_allowed",
        "A webhook URL whose scheme or host `webhook_allowed_hosts` does not allow.",
    )
    NOT_A_STREAM = (
        "not_a_stream",
        "Asked a stream's frames (`since`) of a job of another kind.",
    )
    STREAM_UNSUPPORTED = (
        "stream_unsupported",
        "Streams run on this host's lanes: not on a server whose jobs run on Ray.",
    )
    CAPTURE_UNSUPPORTED = (
        "capture_unsupported",
        "Capture runs on this host's lanes: not on a server whose jobs run on Ray.",
    )
    EXPORT_DEPENDENCY_MISSING = (
        "export_dependency_missing",
        "A package the export or variant needs is not installed on this host.",
    )

    # Why a job failed (its `error.code`); the first ones are refusals a runner found.
    INVALID_INPUT = (
        "invalid_input",
        "The job's own input is unusable (a video OpenCV cannot read, bad params).",
    )
    MODEL_TAMPERED = (
        "model_tampered",
        "The model's file no longer has the fingerprint it was imported with.",
    )
    RESULT_TOO_LARGE = "result_too_large", "The job's result is larger than `max_result_bytes`."
    DATASET_NOT_SHARED = (
        "dataset_not_shared",
        "On a Ray node: the dataset is not under `shared_data_roots`, or not on that node.",
    )
    CUDA_OOM = "cuda_oom", "CUDA ran out of memory; only this job failed."
    CUDA_FATAL = (
        "cuda_fatal",
        "A sticky CUDA error poisoned the process's CUDA context: the server restarts.",
    )
    RUNTIME_ERROR = "runtime_error", "The runner raised an error of its own."
    SOURCE_LOST = (
        "source_lost",
        "A stream's source could not be read again within its `reconnect_give_up_s`.",
    )
    INTERRUPTED = "interrupted", "The server stopped during each of the job's attempts."
    NO_TRIAL_COMPLETED = (
        "no_trial_completed",
        "Every trial of a tune failed, was pruned or was cancelled: it found no params.",
    )
    TIMEOUT = (
        "timeout",
        "The job ran past its `params.timeout_s` (or its kind's default) and was cancelled.",
    )
    STALLED = "stalled", "The job's progress did not move for `stall_after_s` and it was cancelled."
    DISK_FULL = (
        "disk_full",
        "A write failed for want of space (ENOSPC); the server goes on serving.",
    )
    CANCELLED = (
        "cancelled",
        "The runner stopped early because cancel was asked (the job ends cancelled).",
    )
    NODE_LOST = (
        "node_lost",
        "The Ray node the job ran on went away; the job goes back to the queue.",
    )
