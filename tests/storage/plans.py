"""EXPLAIN (FORMAT JSON) plans, walked: every node, and the indexes and tables a plan reads."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson


async def explain(conn: asyncpg.Connection, sql: str, *params: Any) -> dict[str, Any]:
    """The plan's top node for ``sql`` with ``params`` (not run)."""
    text = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *params)
    plan: dict[str, Any] = orjson.loads(text)[0]["Plan"]
    return plan


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(plan_nodes(child))
    return found


def index_names(plan: dict[str, Any]) -> set[str]:
    return {n["Index Name"] for n in plan_nodes(plan) if "Index Name" in n}


def seq_scanned(plan: dict[str, Any]) -> set[str]:
    return {n["Relation Name"] for n in plan_nodes(plan) if n["Node Type"] == "Seq Scan"}
