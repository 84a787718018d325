"""YAML from clients, parsed within limits: PyYAML's safe loader with a cap on bytes, nesting
depth and nodes, and no aliases.

Why each limit: PyYAML composes nodes recursively, so a document nested tens of thousands deep
ends in a RecursionError; an alias is a reference, so a few KB of aliases to aliases expand to
megabytes once the data is copied or serialised (names written into a model registry, a
data.yaml rewritten for ultralytics); and the pure-Python loader holds about 300 bytes per node,
so 1 MB of `[a,a,a,...]` took 9 s and 330 MB to load. Refusing aliases outright is simpler than
expanding them under a cap, and configuration files such as a data.yaml do not need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["YamlRefused", "load_file"]

MAX_DEPTH = 64
"""Collections inside collections, at most; a data.yaml needs 3."""
MAX_INT_DIGITS = 64
"""Longer integers are refused before Python converts them: a base-60 integer (`1:0:0:...`, YAML
1.1) takes time quadratic in its length, and a decimal past 4300 digits raises ValueError."""


class YamlRefused(yaml.YAMLError):
    """The document is larger, deeper or more aliased than the limits allow."""


def load_file(path: Path, *, max_bytes: int, max_nodes: int) -> Any:
    """Parse the YAML file at `path` (UTF-8) within the limits; `YamlRefused` beyond them, and
    PyYAML's own `YAMLError` (or `UnicodeDecodeError`, `OSError`) for what is not YAML.

    Reads at most `max_bytes + 1` bytes, so a file that grows after a size check cannot make
    the server read more."""
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YamlRefused(f"it is larger than {max_bytes} bytes")
    loader = _LimitedLoader(data.decode("utf-8"), max_nodes=max_nodes)
    try:
        return loader.get_single_data()
    except ValueError as e:  # a value PyYAML resolves but cannot build, e.g. 2001-13-45
        raise YamlRefused(f"a value cannot be read: {e}") from None
    finally:
        loader.dispose()


class _LimitedLoader(yaml.SafeLoader):
    def __init__(self, stream: str, *, max_nodes: int) -> None:
        super().__init__(stream)
        self._max_nodes = max_nodes
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise YamlRefused(
                f"YAML aliases are not accepted (*{event.anchor}, line {event.start_mark.line + 1})"
            )
        self._nodes += 1
        if self._nodes > self._max_nodes:
            raise YamlRefused(f"it has more than {self._max_nodes} values")
        if self._depth >= MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            raise YamlRefused(f"it nests deeper than {MAX_DEPTH} levels (line {line})")
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = self.construct_scalar(node)
        if isinstance(value, str) and len(value) > MAX_INT_DIGITS:
            raise YamlRefused(
                f"an integer longer than {MAX_INT_DIGITS} characters (line "
                f"{node.start_mark.line + 1})"
            )
        return super().construct_yaml_int(node)


_LimitedLoader.add_constructor("tag:yaml.org,2002:int", _LimitedLoader.construct_yaml_int)
