"""The process's limit on open file descriptors: what client connections may take of it."""

from __future__ import annotations

import resource


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft limit on open descriptors to the hard one (the default soft limit, often
    1024, is for programs that never serve thousands of sockets); the (soft, hard) limits in
    force after. A hard limit of "unlimited" is left as it is: the soft one stays."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft, hard
