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


QA_DATA = [{"id": f"q{k}", "question": f"What is {k}+{4 - k}?", "answer": "4"} for k in range(8)]


def run(data, tmp_path, **kw):
    lm = scripted_lm(lambda m: json_answer(answer="4"))
    return vf.optimize(kw.pop("program", dspy.Predict("question -> answer")), data,
                       kw.pop("metric", lambda ex, pred, trace=None: pred.answer == ex.answer),
                       optimizer="none", models={"task": lm}, workdir=str(tmp_path), **kw)


@pytest.mark.parametrize("form", ["with_inputs", "inputs="])
def test_inputs_without_the_programs_input_field_are_refused(tmp_path, form):
    data = [dspy.Example(**r).with_inputs("answer") for r in QA_DATA] if form == "with_inputs" else QA_DATA
    kw = {"inputs": ["answer"]} if form == "inputs=" else {}
    with pytest.raises(InputError) as e:
        run(data, tmp_path, **kw)
    assert e.value.field == "inputs"
    assert "'question'" in e.value.message and "'answer'" in e.value.message


class TwoSteps(dspy.Module):
    """A program whose second step reads what the first produced: its inputs are its forward's."""

    def __init__(self):
        super().__init__()
        self.draft = dspy.Predict("question -> draft")
        self.answer = dspy.Predict("question, draft -> answer")

    def forward(self, question, hint=None):
        return self.answer(question=question, draft=self.draft(question=question).draft)


def test_inputs_covering_the_programs_required_fields_are_accepted():
    assert len(to_suite(QA_DATA, inputs=["question"], program=TwoSteps()).items) == 8
    with pytest.raises(InputError, match="'question'"):
        to_suite(QA_DATA, inputs=["answer"], program=TwoSteps())


def test_the_metric_reads_the_records_own_id_and_group(tmp_path):
    data = [{**r, "group": f"g{k // 2}"} for k, r in enumerate(QA_DATA)]
    seen, program_saw = [], []

    def metric(example, pred, trace=None):
        seen.append((example.item_id, example.id, example.group))
        return pred.answer == example.answer

    def task(messages):
        program_saw.append(messages[-1]["content"])
        return json_answer(answer="4")

    vf.optimize(dspy.Predict("question -> answer"), data, metric, optimizer="none",
                models={"task": scripted_lm(task)}, workdir=str(tmp_path))
    assert seen and all(item_id == own_id and group.startswith("g") for item_id, own_id, group in seen)
    assert not any("g0" in text or "[[ ## id ## ]]" in text for text in program_saw)
    items = to_suite(data, program=dspy.Predict("question -> answer")).items
    assert [it.id for it in items] == [r["id"] for r in QA_DATA]
    assert items[0].example().inputs().toDict() == {"question": QA_DATA[0]["question"]}


def test_a_dataframe_is_read_as_its_records():
    pd = pytest.importorskip("pandas")
    prog = dspy.Predict("question -> answer")
    from_frame = to_suite(pd.DataFrame(QA_DATA), program=prog).items
    from_dicts = to_suite(QA_DATA, program=prog).items
    assert [(it.id, it.inputs, it.gold) for it in from_frame] == [(it.id, it.inputs, it.gold) for it in from_dicts]
    no_ids = [{k: v for k, v in r.items() if k != "id"} for r in QA_DATA]
    assert [it.id for it in to_suite(pd.DataFrame(no_ids), program=prog).items] == \
        [it.id for it in to_suite(no_ids, program=prog).items]


class Solver(dspy.Module):
    def __init__(self):
        super().__init__()
        self.step = dspy.Predict("question -> answer")

    def forward(self, question):
        return self.step(question=question)


def test_reading_a_custom_modules_inputs_does_not_make_dspy_warn(caplog):
    with caplog.at_level("WARNING", logger="dspy"):
        items = to_suite([{k: v for k, v in r.items() if k != "id"} for r in QA_DATA], program=Solver()).items
    assert items[0].inputs == {"question": QA_DATA[0]["question"]}
    assert not [r for r in caplog.records if "forward" in r.getMessage()]


@pytest.mark.parametrize("field", ["id", "group"])
def test_the_records_id_or_group_as_an_input_is_refused_naming_it(field):
    from verifirst.core.data import to_suite
    from verifirst.core.errors import InputError

    records = [{"id": "a", "group": "g", "question": "q", "answer": "x"}]
    with pytest.raises(InputError, match=f"input '{field}' is the record's") as e:
        to_suite(records, inputs=["question", field])  # was a KeyError from inside to_suite
    assert e.value.field == "inputs"
