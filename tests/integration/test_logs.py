from __future__ import annotations

import json
import logging
import threading
import warnings
from pathlib import Path

import pytest

from yolo_orch.ops.logs import (
    JobLogHandler,
    JsonFormatter,
    before_start,
    current_job,
    install_job_logs,
    readable,
    remove_job_logs,
    warnings_to_job_logs,
)


def record(message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("yolo_orch.test", logging.INFO, __file__, 1, message, (), None)
    made.__dict__.update(extra)
    return made


def test_json_lines_carry_the_job_id_and_extras() -> None:
    line = json.loads(JsonFormatter().format(record("job started", job_id="j1", lane="cuda:0")))
    assert line["msg"] == "job started"
    assert line["level"] == "info"
    assert line["logger"] == "yolo_orch.test"
    assert (line["job_id"], line["lane"]) == ("j1", "cuda:0")
    assert line["ts"].endswith("+00:00")


def test_records_land_in_the_log_of_the_job_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # ultralytics' logger does not propagate; its level is its own (INFO when verbose).
    ultralytics = logging.getLogger("ultralytics")
    monkeypatch.setattr(ultralytics, "propagate", False)
    monkeypatch.setattr(ultralytics, "disabled", False)
    level = ultralytics.level
    ultralytics.setLevel(logging.INFO)  # setLevel, not an attribute: loggers cache levels
    request.addfinalizer(lambda: ultralytics.setLevel(level))
    handler = install_job_logs(tmp_path)
    try:
        token = current_job.set("j2")
        logging.getLogger("yolo_orch.runner").info("epoch 1 done")
        logging.getLogger("ultralytics").info("from ultralytics")
        current_job.reset(token)
        logging.getLogger("yolo_orch.runner").info("belongs to nobody")
        logging.getLogger("yolo_orch.x").info("tagged", extra={"job_id": "j3"})
    finally:
        remove_job_logs(handler)
    lines = (tmp_path / "j2" / "job.log").read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == ["epoch 1 done", "from ultralytics"]
    assert (tmp_path / "j3" / "job.log").read_text().rstrip().endswith("tagged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j2", "j3"]


def test_library_warnings_go_to_the_log_and_overlapping_blocks_restore_the_filters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    filters, showwarning = list(warnings.filters), warnings.showwarning
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with warnings_to_job_logs():
            first_in.set()
            second_in.wait()
        first_out.set()  # leaves while the second block still runs

    def second() -> None:
        first_in.wait()
        with warnings_to_job_logs():
            second_in.set()
            first_out.wait()
            warnings.warn("deprecated by a library", DeprecationWarning, stacklevel=1)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    with caplog.at_level(logging.WARNING, logger="py.warnings"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert "DeprecationWarning: deprecated by a library" in caplog.text
    assert (list(warnings.filters), warnings.showwarning) == (filters, showwarning)
    with pytest.raises(DeprecationWarning):  # pytest's "error" filter is back in force
        warnings.warn("again", DeprecationWarning, stacklevel=1)


def test_lines_before_a_jobs_start_wait_for_its_first_other_line(tmp_path: Path) -> None:
    handler = install_job_logs(tmp_path)
    try:
        log = logging.getLogger("yolo_orch.x")
        log.info("queued", extra=before_start("j4"))
        log.info("queued", extra=before_start("j5"))
        assert list(tmp_path.iterdir()) == []  # a submission makes no folder
        log.info("started", extra={"job_id": "j4"})
        log.info("again", extra=before_start("j4"))  # its file is open: written at once
    finally:
        remove_job_logs(handler)
    lines = (tmp_path / "j4" / "job.log").read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == ["queued", "started", "again"]
    assert [path.name for path in tmp_path.iterdir()] == ["j4"]


EXPORT_FOOTER = (
    "\nExport complete (1.1s)\nResults saved to \x1b[1mexport/model_openvino_model\x1b[0m\n"
    "Predict:         yolo predict task=detect model=export/model.onnx imgsz=64 \n"
    "Validate:        yolo val task=detect model=export/model.onnx imgsz=64  \n"
    "Visualize:       https://netron.app"
)


def test_job_logs_keep_text_without_terminal_escapes_banners_or_next_steps(tmp_path: Path) -> None:
    handler = install_job_logs(tmp_path)
    try:
        log = logging.getLogger("yolo_orch.x")
        banner = "Ultralytics 8.4.190 \U0001f680 Python-3.11.7 torch-2.14.1 CPU (Xeon)"
        log.info(banner, extra={"job_id": "j6"})
        log.info(
            "\x1b[34m\x1b[1mOpenVINO:\x1b[0m export success \u2705 0.9s", extra={"job_id": "j6"}
        )
        log.info(EXPORT_FOOTER, extra={"job_id": "j6"})
        log.info("\x1b[1mValidate:\x1b[0m https://netron.app", extra={"job_id": "j6"})
        log.warning("%s (%d)", "\x1b[31mboom\x1b[0m", 2, extra={"job_id": "j6"})
    finally:
        remove_job_logs(handler)
    lines = (tmp_path / "j6" / "job.log").read_text().splitlines()
    assert [line.split(": ", 1)[1] if ": " in line else line for line in lines] == [
        "OpenVINO: export success \u2705 0.9s",
        "Export complete (1.1s)",
        "Results saved to export/model_openvino_model",
        "boom (2)",
    ]
    assert readable(EXPORT_FOOTER.replace("Export complete (1.1s)", "")).startswith("Results")
    assert readable("\x1b]8;;https://x\x07link\x1b]8;;\x07 \x1b[2Kdone") == "link done"


def test_held_lines_of_jobs_that_never_start_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(JobLogHandler, "HELD_JOBS", 2)
    handler = install_job_logs(tmp_path)
    try:
        log = logging.getLogger("yolo_orch.x")
        for job_id in ("j1", "j2", "j3"):
            log.info("queued", extra=before_start(job_id))
        for job_id in ("j1", "j2", "j3"):
            log.info("cancelled", extra={"job_id": job_id})
    finally:
        remove_job_logs(handler)
    first = (tmp_path / "j1" / "job.log").read_text()
    assert "queued" not in first
    assert "cancelled" in first
    assert "queued" in (tmp_path / "j3" / "job.log").read_text()


def test_the_held_marker_stays_out_of_json_lines() -> None:
    line = json.loads(JsonFormatter().format(record("queued", **before_start("j1"))))
    assert line["job_id"] == "j1"
    assert set(line) == {"ts", "level", "logger", "msg", "job_id"}


def test_lines_are_written_off_the_logging_thread_and_settle_waits_for_them(
    tmp_path: Path,
) -> None:
    logs = install_job_logs(tmp_path)
    writers: set[str] = set()
    write = logs.writer.emit

    def noting_writer(record: logging.LogRecord) -> None:
        writers.add(threading.current_thread().name)
        write(record)

    logs.writer.emit = noting_writer  # type: ignore[method-assign]
    try:
        token = current_job.set("j6")
        for n in range(50):
            logging.getLogger("yolo_orch.x").info("line %d", n)
        current_job.reset(token)
        logs.settle()
        lines = (tmp_path / "j6" / "job.log").read_text().splitlines()
    finally:
        remove_job_logs(logs)
    assert [line.split(": ", 1)[1] for line in lines] == [f"line {n}" for n in range(50)]
    assert threading.current_thread().name not in writers


def test_the_log_thread_writes_a_burst_in_one_batch_and_settle_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "yolo_orch.ops.logs.BATCH_S", 60.0
    )  # a batch gathers until settle hurries it
    logs = install_job_logs(tmp_path)
    logged = 0
    seen_at_write: list[int] = []
    write = logs.writer.emit

    def noting_writer(record: logging.LogRecord) -> None:
        seen_at_write.append(logged)
        write(record)

    logs.writer.emit = noting_writer  # type: ignore[method-assign]
    try:
        log = logging.getLogger("yolo_orch.x")
        for n in range(40):
            log.info("line %d", n, extra={"job_id": f"j{n % 4}"})
            logged += 1
        settling = threading.Thread(target=logs.settle)
        settling.start()
        settling.join(timeout=10)
        assert not settling.is_alive()  # hurried: not held for the batch's 60 s
        written = [(tmp_path / f"j{k}" / "job.log").read_text().splitlines() for k in range(4)]
    finally:
        remove_job_logs(logs)
    assert seen_at_write == [40] * 40  # the thread woke once, for the whole burst
    assert [len(lines) for lines in written] == [10, 10, 10, 10]
    assert written[1][-1].endswith("line 37")


def test_a_job_file_that_cannot_be_flushed_does_not_stop_the_log_thread(tmp_path: Path) -> None:
    logs = install_job_logs(tmp_path)
    try:
        log = logging.getLogger("yolo_orch.x")
        log.info("first", extra={"job_id": "j1"})
        logs.settle()
        broken = logs.writer._files["j1"]

        def full_disk() -> None:
            raise OSError(28, "No space left on device")

        broken.flush = full_disk  # type: ignore[method-assign]
        log.info("lost", extra={"job_id": "j1"})
        log.info("kept", extra={"job_id": "j2"})
        settling = threading.Thread(target=logs.settle, daemon=True)
        settling.start()
        settling.join(timeout=10)
        assert not settling.is_alive()  # the thread went on past the failed flush
        assert (tmp_path / "j2" / "job.log").read_text().rstrip().endswith("kept")
    finally:
        remove_job_logs(logs)
