"""Regenerate ``screenshots/`` (SVG and PNG) from the same pinned screens as the snapshot tests.

    python scripts/screenshots.py            # embedded PostgreSQL (pgserver), or $AWA_TEST_DSN

Each screen is seeded into its own queue-storage schema by ``tests/tui/scenarios.py`` (jobs
worked through the real runtime, then timestamps and callback ids pinned), rendered at
120x36 with a fixed clock, and written as ``screenshots/<name>.svg``; cairosvg turns each into
a PNG. The PNGs use DejaVu Sans Mono, which has every glyph the console draws (Fira Code,
named in the SVGs, lacks a few such as ✗).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual._doc import take_svg_screenshot  # noqa: E402

from awa_tui.embedded import EmbeddedPostgres  # noqa: E402
from storage.db.migrator import install_schema, migrate  # noqa: E402
from storage.db.pool import connect_once  # noqa: E402
from tests.tui.scenarios import SCREENS, SIZE, prepare  # noqa: E402

OUT = ROOT / "screenshots"
PNG_WIDTH = 1600


@contextmanager
def database() -> Iterator[str]:
    dsn = os.environ.get("AWA_TEST_DSN")
    if dsn:
        yield dsn
        return
    with EmbeddedPostgres(prefix="awa-shots-pg-") as server:  # stopped and removed on exit
        yield server.dsn


async def new_schema(dsn: str, name: str) -> str:
    async with connect_once(dsn) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        await conn.execute("DELETE FROM awa.queue_storage_registry WHERE schema_name = $1", name)
        await install_schema(conn, name)
    return name


def to_png(svg_path: Path) -> Path:
    import cairosvg  # type: ignore[import-untyped]

    svg = svg_path.read_text(encoding="utf-8").replace("Fira Code", "DejaVu Sans Mono")
    png_path = svg_path.with_suffix(".png")
    cairosvg.svg2png(bytestring=svg.encode(), write_to=str(png_path), output_width=PNG_WIDTH)
    return png_path


def main() -> int:
    OUT.mkdir(exist_ok=True)
    with database() as dsn:
        asyncio.run(migrate(dsn))
        for name, screen in SCREENS.items():
            schema = asyncio.run(new_schema(dsn, "shot_" + name.replace("-", "_")))
            app = prepare(dsn, schema, screen)
            svg = take_svg_screenshot(app=app, terminal_size=SIZE, run_before=screen.run_before)
            svg_path = OUT / f"{name}.svg"
            svg_path.write_text(svg, encoding="utf-8")
            print(f"{svg_path.relative_to(ROOT)}  {to_png(svg_path).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
