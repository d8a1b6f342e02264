"""Typed keys, one at a time, in the order typed, each where the focus is when it is handled.

Textual sends a key to the widget focused when the key arrives (a message on that widget's
queue) and runs the bindings when it has bubbled back up to the app. A key typed right after
one that moves the focus (``/`` to the filter, ``Q`` to another screen, esc closing a screen)
was therefore sent to the widget focused before, and the one after it could overtake it: esc
esc Q on a slow host closed the detail, opened Queues, and then the second esc, sent to the
closed detail and sent again, closed Queues. Here a key is *under way* from the app to the
end of its trip: back at the app's bindings, or, for a key a widget keeps (a character typed
into the filter), where a callback following it queue by queue finds it ended (``_follow``).
The keys typed meanwhile wait in line, and a key that comes back to a focus it was not sent
to goes again at once, still at the head of the line.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.widget import Widget

FOCUS_WAITS = 10
"""How many frames a key typed while a new screen opens waits for that screen's focus."""
STUCK_AFTER = 3.0
"""Seconds after which a key whose trip never ended (its widget went away with its screen)
stops holding the keys typed after it."""


def again(key: events.Key) -> events.Key:
    return events.Key(key.key, key.character)


class KeyLine:
    """The app's keys in line: ``AwaApp.on_event`` asks ``admit`` and reports ``forwarded``,
    ``AwaApp._on_key`` asks ``resend`` (see the module's docstring)."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app
        self._under_way: events.Key | None = None
        self._waiting: deque[events.Key] = deque()
        self._ours: WeakSet[events.Key] = WeakSet()  # keys this line posted: their turn
        self._sent_to: WeakKeyDictionary[events.Key, Widget | None] = WeakKeyDictionary()
        self._focus_waits = 0

    def admit(self, key: events.Key) -> bool:
        """Whether ``key``, just arrived at the app, goes on now; otherwise it waits its turn."""
        if key in self._ours:
            self._ours.discard(key)
            if self._under_way not in (None, key):  # a key sent again went first
                self._waiting.appendleft(key)
                return False
        elif self._under_way is not None or self._waiting:
            self._waiting.append(key)
            return False
        app = self._app
        if app.focused is None and app.screen.focus_chain and self._focus_waits < FOCUS_WAITS:
            # A screen just opened and is not focused yet: the key waits for its focus.
            self._focus_waits += 1
            self._under_way = None
            self._waiting.appendleft(key)
            app.call_after_refresh(self._next)
            return False
        self._focus_waits = 0
        self._under_way = key
        self._sent_to[key] = app.focused
        return True

    def forwarded(self, key: events.Key) -> None:
        """``key`` went through the app's ``on_event``: follow it to the end of its trip, or
        end it now if a priority binding took it there."""
        if key is not self._under_way:
            return
        if not key.is_forwarded:
            self._end(key)
            return
        target = self._sent_to.get(key) or self._app.screen
        target.call_later(self._follow, key, target)
        self._app.set_timer(STUCK_AFTER, partial(self._end, key))

    def resend(self, key: events.Key) -> bool:
        """Whether ``key``, back at the app, was sent to a widget that no longer has the focus;
        it is then sent again, where the focus is now, ahead of every key typed after it."""
        sent_to = self._sent_to.pop(key, self._app.focused)
        if sent_to is self._app.focused:
            # Its trip ends here, in the app's bindings; the next key is handled after them.
            # (Its follower may never come back: the screen it passed through can close.)
            self._end(key)
            return False
        copy = again(key)
        self._ours.add(copy)
        self._under_way = copy
        self._app.post_message(copy)
        return True

    def _follow(self, key: events.Key, node: DOMNode) -> None:
        """Runs on ``node``'s queue right after ``key``: on to the next queue up, so at the
        app the key has ended its trip (handled there, stopped below, or lost with its
        screen)."""
        parent = node.parent
        if parent is None or parent is self._app or not node.is_attached:
            self._app.call_later(self._end, key)
        else:
            parent.call_later(self._follow, key, parent)

    def _end(self, key: events.Key) -> None:
        if key is self._under_way:
            self._under_way = None
            self._next()

    def _next(self) -> None:
        if self._under_way is None and self._waiting:
            key = again(self._waiting.popleft())
            self._ours.add(key)
            self._app.post_message(key)
