"""Watchers that outlive their widget, dropped: what keeps the console flat over hours.

``node.watch(other, "attr", callback)`` (and ``data_bind``, which uses it) stores
``(node, callback)`` on ``other``; Textual 8 drops the entry of a removed node only when
``other.attr`` changes again (textual#6666). An attribute that never changes (the app's title,
its read-only reason, a ``Footer``'s ``compact``) so keeps every removed watcher and its whole
subtree alive: each recomposed footer leaked its keys, each closed screen its header and rows.

``drop_closed_watchers`` removes those entries the way Textual's own check does (a node that is
closing or closed); ``sweep`` runs it over the app and every node of every screen on the stack.
The app's clock calls ``sweep`` once a second (``AwaApp._tick_clock``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.dom import DOMNode

WATCHERS = "__watchers"  # where textual.reactive._watch keeps them, on the observed object

Entry = tuple[DOMNode, Callable[..., Any]]


def _gone(node: DOMNode) -> bool:
    return bool(node._closing or node._closed)


def drop_closed_watchers(observed: DOMNode) -> int:
    """Drop the watchers of ``observed`` whose node was removed; how many were dropped."""
    watchers: dict[str, list[Entry]] | None = getattr(observed, WATCHERS, None)
    if not watchers:
        return 0
    dropped = 0
    for entries in watchers.values():
        alive = [(node, callback) for node, callback in entries if not _gone(node)]
        dropped += len(entries) - len(alive)
        entries[:] = alive
    return dropped


def sweep(app: App[Any]) -> int:
    """Drop removed nodes' watchers on the app and on every node of the screens on its stack."""
    dropped = drop_closed_watchers(app)
    for screen in app.screen_stack:
        for node in screen.walk_children(with_self=True):
            dropped += drop_closed_watchers(node)
    return dropped


def watcher_count(app: App[Any]) -> int:
    """Every watcher entry the sweep would look at (for tests and the soak benchmark)."""
    nodes: list[DOMNode] = [app]
    for screen in app.screen_stack:
        nodes.extend(screen.walk_children(with_self=True))
    total = 0
    for node in nodes:
        watchers: dict[str, list[Entry]] = getattr(node, WATCHERS, None) or {}
        total += sum(len(entries) for entries in watchers.values())
    return total
