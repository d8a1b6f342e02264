"""Screens register themselves: each declares its title, help and read group; the app imports
screen classes and maps its jump keys to them; and the console's imports form no circle."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import grimp
import pytest
from textual.app import App

import awa_tui
import awa_tui.screens
from awa_tui.app import JUMPED, JUMPS, AwaApp, is_read
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.table import TableScreen


def all_screens() -> list[type[AwaScreen]]:
    for module in pkgutil.iter_modules(awa_tui.screens.__path__):
        importlib.import_module(f"awa_tui.screens.{module.name}")
    found: list[type[AwaScreen]] = []
    todo: list[type[AwaScreen]] = [AwaScreen]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            # a screen, not a mixin of screen behaviour (CallbackFlows) or the table base
            if sub is not TableScreen and sub.__name__.endswith("Screen") and sub not in found:
                found.append(sub)
    return found


def test_every_screen_declares_a_title_and_help_of_its_own() -> None:
    screens = all_screens()
    assert len(screens) >= 10
    titles = [screen.TITLE for screen in screens]
    assert all(titles), titles
    assert len(set(titles)) == len(titles), "two screens share a title"
    for screen in screens:
        assert screen.HELP, f"{screen.__name__} says nothing about what it does"
    assert next(s for s in screens if s.__name__ == "KindsScreen").TITLE == "Kinds"


def test_every_table_screen_reads_in_its_own_group_and_the_app_counts_it() -> None:
    tables = [s for s in all_screens() if issubclass(s, TableScreen)]
    groups = [s.READ_GROUP for s in tables]
    assert all(groups)
    assert len(set(groups)) == len(groups)


def test_each_jump_key_opens_the_class_that_declares_it() -> None:
    bindings = {b.key: b for b in AwaApp.BINDINGS if not isinstance(b, tuple | str)}
    for screen in JUMPS:
        jump = screen.JUMP
        assert jump is not None, f"{screen.__name__} is in JUMPS without a key"
        assert bindings[jump.key].action == f"jump('{jump.action}')"
        assert JUMPED[jump.action] is screen
    assert {"K", "L", "Q", "G", "S"} <= set(bindings)


def test_a_read_is_known_by_the_screen_that_ran_it() -> None:
    class Probe:
        def __init__(self, node: object, group: str) -> None:
            self.node, self.group = node, group

    jobs = next(s for s in all_screens() if s.__name__ == "JobsScreen")
    screen = object.__new__(jobs)
    assert is_read(Probe(screen, "jobs"))  # type: ignore[arg-type]
    assert not is_read(Probe(screen, "save"))  # type: ignore[arg-type]
    assert is_read(Probe(object.__new__(App), "probe"))  # type: ignore[arg-type]


def test_no_screen_is_opened_through_a_module_name() -> None:
    package = Path(awa_tui.__file__).parent
    users = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "import_module(" in path.read_text(encoding="utf-8")
    )
    assert users == ["worker.py"]  # it imports the user's tasks module, named on the command line


@pytest.mark.parametrize("package", ["awa_tui", "storage"])
def test_no_import_circle(package: str) -> None:
    """Neither the console nor the engine imports in a circle. Type-only imports (a screen
    naming ``AwaApp`` in an annotation) are not circles."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(package):
                back = graph.find_shortest_chain(importer=imported, imported=module)
                if back is not None:
                    circles.append((module, *back))
    assert circles == []
