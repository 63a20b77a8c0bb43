"""Items and suites: the data a program is run on and a verifier checks."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

ITEM_ID = "item_id"
RECORD_KEYS = "record_keys"  # Item.meta key: a record's own id/group as it had them, which its example carries

# The four outcomes of one evaluated item. Only PASS and FAIL are verdicts that count in pass
# rates; ERROR (the LM or the verifier failed) and INCONCLUSIVE (nothing observable decided) are
# counted and reported apart.
PASS, FAIL, ERROR, INCONCLUSIVE = "PASS", "FAIL", "ERROR", "INCONCLUSIVE"
VERDICTS = (PASS, FAIL)


@dataclass
class Item:
    """One task. `inputs` reach the program; `gold` stays with the verifier."""

    id: str
    inputs: dict[str, Any]
    gold: dict[str, Any] = field(default_factory=dict)
    group: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def group_key(self) -> str:
        return self.group if self.group is not None else self.id

    def example(self):
        """The item as a dspy.Example: its inputs marked as inputs; its gold, its id (ITEM_ID) and the
        record's own id/group (meta RECORD_KEYS, for a metric that reads them) beside them."""
        import dspy

        ex = dspy.Example(**self.inputs, **self.gold, **{ITEM_ID: self.id}, **self.meta.get(RECORD_KEYS, {}))
        return ex.with_inputs(*self.inputs.keys())


@dataclass
class Suite:
    name: str
    items: list[Item]
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)

    def by_id(self) -> dict[str, Item]:
        return {it.id: it for it in self.items}

    def subset(self, ids: Iterable[str]) -> list[Item]:
        idx = self.by_id()
        return [idx[i] for i in ids]


def examples(items: Sequence[Item]) -> list:
    return [it.example() for it in items]
