"""How vf.optimize's data becomes items: splits, input fields, the metric's example, data forms."""
import dspy
import pytest

import verifirst as vf
from verifirst.api import make_manifest
from verifirst.core.data import to_suite
from verifirst.core.errors import InputError
from verifirst.lm.testing import json_answer, scripted_lm

RATIOS = (0.5, 0.25, 0.25)


def split_of_each(manifest):
    return {i: s for s in ("train", "val", "test") for i in getattr(manifest, s)}


def test_copies_of_one_record_without_id_stay_in_one_split():
    recs = [{"question": f"What is {k}?", "answer": "4"} for k in range(8)] * 3
    items = to_suite(recs, inputs=["question"]).items
    split = split_of_each(make_manifest(items, RATIOS, 0))
    splits_of_content: dict[str, set[str]] = {}
    for it in items:
        splits_of_content.setdefault(it.inputs["question"], set()).add(split[it.id])
    assert all(len(s) == 1 for s in splits_of_content.values()), splits_of_content
    assert len({it.id for it in items}) == len(items)  # each copy keeps its own id


def test_distinct_records_keep_their_ids_and_split():
    # ids and manifest digest as they were before copies were grouped
    recs = [{"question": f"What is {k}?", "answer": str(k)} for k in range(12)]
    items = to_suite(recs, inputs=["question"]).items
    assert [it.id for it in items[:3]] == ["h83aee87311e6", "ha2ec6458e299", "h07bce01019f1"]
    assert all(it.group is None for it in items)
    assert make_manifest(items, RATIOS, 0).digest == "35d7dda5aa2974f3"
    mixed = recs + [{"id": "u1", "question": "x", "answer": "1"}, {"question": "y", "answer": "2", "group": "g"}]
    items = to_suite(mixed, inputs=["question"]).items
    assert [it.group for it in items[-2:]] == [None, "g"]
    assert make_manifest(items, RATIOS, 0).digest == "6c6d130fc0a3364a"


def test_a_group_given_by_the_user_wins_over_the_copies_group():
    recs = [{"question": "same", "answer": "4", "group": "mine"}, {"question": "same", "answer": "4"}]
    items = to_suite(recs, inputs=["question"]).items
    assert items[0].group == "mine" and items[1].group == items[0].id
