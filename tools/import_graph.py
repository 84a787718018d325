"""The package's plan, drawn from its own imports: how many rooms, floors, arrows, circles.

A room is a module of `yolo_orch` at its package root, or a package directly under the root with
everything inside it (`api`, `dispatch`...). An arrow is "room A imports room B" (at most one per
pair). Floors stack the rooms so that every arrow between two circles points down a floor: a
room's floor is one above the highest floor it imports. A circle is a set of modules that import
each other round (counted per module, not per room); an arrow back up is an arrow between rooms
inside one circle of rooms. Imports under `if TYPE_CHECKING:` count: they are still part of the
plan a reader follows.

    python tools/import_graph.py            # the figures
    python tools/import_graph.py --rooms    # and each room with its floor and what it imports
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "yolo_orch"


def module_name(path: Path) -> str:
    parts = ["yolo_orch", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import sub` imports the submodule; `from pkg import name`, the package.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != here:
                found.add(name)
    return found


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's components, iteratively (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def room_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", action="store_true", help="list each room and its arrows")
    args = parser.parse_args()
    paths = sorted(ROOT.rglob("*.py"))
    known = {module_name(p) for p in paths}
    modules = {module_name(p): imported_modules(p, known) for p in paths}
    circles = [c for c in strongly_connected(modules) if len(c) > 1]
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in modules.items():
        rooms[room_of(module)]  # every room, even one that imports nothing
        rooms[room_of(module)].update(room_of(t) for t in targets if room_of(t) != room_of(module))
    rooms.pop("yolo_orch", None)
    for targets in rooms.values():
        targets.discard("yolo_orch")
    room_circles = [c for c in strongly_connected(rooms) if len(c) > 1]
    in_circle = {room: i for i, c in enumerate(room_circles) for room in c}
    back = sum(
        1
        for room, targets in rooms.items()
        for t in targets
        if room in in_circle and in_circle.get(t) == in_circle[room]
    )
    floor: dict[str, int] = {}
    for component in strongly_connected(rooms):  # Tarjan yields callees first
        level = 1 + max(
            (floor[t] for room in component for t in rooms[room] if t not in component),
            default=-1,
        )
        floor.update(dict.fromkeys(component, level))
    at_root = [r for r in rooms if (ROOT / f"{r.split('.')[-1]}.py").exists()]
    print(f"modules        {len(modules)}")
    print(f"rooms          {len(rooms)}")
    print(f"floors         {max(floor.values()) + 1}")
    print(f"arrows         {sum(len(t) for t in rooms.values())}")
    print(f"circles        {len(circles)} (modules); {len(room_circles)} (rooms)")
    print(f"arrows back up {back}")
    print(f"root modules   {len(at_root)}: {', '.join(sorted(r.split('.')[-1] for r in at_root))}")
    for circle in circles:
        print("  circle:", " <-> ".join(sorted(circle)))
    if args.rooms:
        for room in sorted(rooms, key=lambda r: (-floor[r], r)):
            names = ", ".join(sorted(t.split(".", 1)[1] for t in rooms[room]))
            print(f"  {floor[room]:2d} {room.split('.', 1)[1]:<20} -> {names}")


if __name__ == "__main__":
    main()
