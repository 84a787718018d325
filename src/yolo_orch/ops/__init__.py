"""What keeps the process running for months: logs, GPU telemetry, the data-dir lock, disk
guard, systemd notify, stop signal, fd limits and retention."""
