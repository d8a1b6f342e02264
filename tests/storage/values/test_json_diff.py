"""The structural JSON diff: nested objects, arrays by index, type changes, equal and empty
values, and its bounds (values cut short, the whole within 4 KiB)."""

from __future__ import annotations

from storage import MAX_OUTPUT_BYTES, JsonChange, json_diff


def rows(before: object, after: object) -> list[tuple[str, str, str | None, str | None]]:
    return [(c.path, c.change, c.before, c.after) for c in json_diff(before, after).changes]


def test_nested_objects_name_each_path_added_removed_changed() -> None:
    before = {"updated": 0, "skipped": 412, "meta": {"source": "erp", "batch": 7}}
    after = {"updated": 412, "meta": {"source": "erp", "batch": 8, "retry": True}}
    assert rows(before, after) == [
        ("$.updated", "changed", "0", "412"),
        ("$.meta.batch", "changed", "7", "8"),
        ("$.meta.retry", "added", None, "true"),
        ("$.skipped", "removed", "412", None),
    ]


def test_arrays_compare_by_index() -> None:
    assert rows({"skus": ["a", "b", "c"]}, {"skus": ["a", "x"]}) == [
        ("$.skus[1]", "changed", '"b"', '"x"'),
        ("$.skus[2]", "removed", '"c"', None),
    ]
    assert rows([1], [1, {"k": 2}]) == [("$[1]", "added", None, '{"k":2}')]


def test_a_type_change_is_one_retyped_change_not_one_per_member() -> None:
    assert rows({"n": {"a": 1, "b": 2}}, {"n": [1, 2]}) == [
        ("$.n", "retyped", '{"a":1,"b":2}', "[1,2]")
    ]
    assert rows({"n": 1}, {"n": "1"}) == [("$.n", "retyped", "1", '"1"')]
    assert rows({"flag": 1}, {"flag": True}) == [("$.flag", "retyped", "1", "true")]


def test_equal_values_and_equal_numbers_have_no_changes() -> None:
    value = {"a": [1, {"b": None}], "c": "x"}
    assert json_diff(value, {"c": "x", "a": [1, {"b": None}]}).equal  # key order is not content
    assert json_diff({"n": 1}, {"n": 1.0}).equal
    assert json_diff({}, {}).equal
    assert json_diff(None, None).equal


def test_empty_and_none_against_a_value() -> None:
    assert rows({}, {"a": 1}) == [("$.a", "added", None, "1")]
    assert rows([], []) == []
    assert rows(None, {"a": 1}) == [("$", "retyped", "null", '{"a":1}')]
    assert rows({"a": None}, {"a": 0}) == [("$.a", "retyped", "null", "0")]


def test_odd_keys_are_quoted_in_paths() -> None:
    assert rows({"two words": 1}, {"two words": 2})[0][0] == '$["two words"]'


def test_values_are_cut_and_the_whole_stays_within_the_limit() -> None:
    long = "x" * 500
    (change,) = json_diff({"s": long}, {"s": long + "y"}, value_chars=20).changes
    assert change.before == '"' + "x" * 18 + "…"
    assert len(change.before) == 20
    before = {f"k{i}": i for i in range(2000)}
    diff = json_diff(before, {})
    assert sum(c.size() for c in diff.changes) <= MAX_OUTPUT_BYTES
    assert diff.omitted == 2000 - len(diff.changes)
    assert diff.omitted > 0
    assert diff.counts == {"removed": 2000}
    assert isinstance(diff.changes[0], JsonChange)
