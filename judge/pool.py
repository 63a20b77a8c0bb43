"""The judge domain's thread pool: where a run's `threads` becomes concurrency, once.

`verifirst calibrate --threads N` becomes `CalibrateRequest.threads`; the calibration makes one
`Pool(N)` from it (and AutoRefine one from the loop's budget), and every judge and teacher pass of
the run (AutoRefine's iterations, the teacher, the report's re-scoring, promotion, the baseline)
takes that pool, not a count re-passed through each layer. Functions that take `threads` accept
a Pool or a count (`as_pool`): the monitor and the `judge` verb pass their own count.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar, Union

from verifirst.core.errors import InputError

T = TypeVar("T")
R = TypeVar("R")


class Pool:
    """Judge or teacher calls in parallel: `threads` at a time (1: in the calling thread, which keeps its
    dspy context).

    Args:
        threads: calls in flight at most (an integer >= 1).
    """

    def __init__(self, threads: int = 1):
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise InputError(f"{threads!r} is not a number of threads", field="threads", expected="an integer >= 1")
        self.threads = threads

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """fn over items, in their order.

        Args:
            fn: one call (a judge or teacher call on one item).
            items: the items.
        """
        items = list(items)
        if self.threads <= 1:
            return [fn(it) for it in items]
        with ThreadPoolExecutor(self.threads) as ex:
            return list(ex.map(fn, items))

    def __repr__(self) -> str:
        return f"Pool({self.threads})"


Threads = Union[Pool, int]


def as_pool(threads: Threads) -> Pool:
    """The pool a `threads` argument names: itself, or a new Pool of that many threads.

    Args:
        threads: a Pool or a number of threads.
    """
    return threads if isinstance(threads, Pool) else Pool(threads)
