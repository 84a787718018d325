"""Run the Ray tests inside a network namespace that has nothing but loopback.

Ray listens on every interface of the machine it runs on; inside `unshare -n` the only one is
`lo`, so nothing a test starts can listen on, or talk to, any other address. Needs root (or
user namespaces): `python -m tests.on_ray.netns [pytest arguments]`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.on_ray.fixtures import loopback_only


def main() -> int:
    tests = ["tests/on_ray", "tests/acceptance"]
    pytest = [sys.executable, "-m", "pytest", "-m", "ray", *tests, *sys.argv[1:]]
    if loopback_only():
        return subprocess.call(pytest)
    if shutil.which("unshare") is None or subprocess.call(["unshare", "-n", "true"]) != 0:
        print("cannot make a network namespace (unshare -n): the Ray tests skip", file=sys.stderr)
        return subprocess.call(pytest)
    inside = 'ip link set lo up && exec "$@"'
    return subprocess.call(["unshare", "-n", "sh", "-c", inside, "sh", *pytest], env=os.environ)


if __name__ == "__main__":
    sys.exit(main())
