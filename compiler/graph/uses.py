"""Def-use bookkeeping both IRs share: a named, typed value and the list of its uses.

The graph IR's `Value` (users are nodes) and the low-level IR's `LValue` (users are
instructions) keep their use lists the same way: a user's `set_operand` removes the old use and
adds the new one, so rewriting every use is one loop over a copy of the list. Content digests of
weight data (the graph's constants, the LIR's weights, the bundle's deduplication) are computed
here too, so the two IRs name identical data identically.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from compiler.graph.types import TensorType


class User(Protocol):
    """What uses values: a graph node or a low-level instruction."""

    def set_operand(self, idx: int, value: Any) -> None: ...


U = TypeVar("U", bound=User)


class Used(Generic[U]):
    """A value with a name, a type and its uses as (user, operand index) pairs.

    `users` is a dict used as an ordered set (iterate it as the list of pairs, in the order they
    were added): removing one use is O(1), which a value with thousands of users needs (a
    2000-way fan-out, a long in-place chain merged into one buffer), where a list made every
    rewrite of such a graph quadratic.
    """

    __slots__ = ("name", "type", "users")

    def __init__(self, name: str, type: TensorType | None) -> None:
        self.name = name
        self.type = type
        self.users: dict[tuple[U, int], None] = {}

    def add_use(self, user: U, idx: int) -> None:
        self.users[(user, idx)] = None

    def remove_use(self, user: U, idx: int) -> None:
        del self.users[(user, idx)]

    def replace_all_uses_with(self, other: Used[U]) -> None:
        if other is self:
            return
        for user, idx in list(self.users):
            user.set_operand(idx, other)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


# Digests of read-only arrays, by the array object. The pipeline's stage snapshots are clones
# sharing their constants' (read-only) data: each snapshot's constants start without a digest,
# and printing each snapshot hashed the same weights again (0.4 s of CPU for the stages of a
# 64x64 ResNet-50, a sha1 of all of BERT's 340 MiB per snapshot printed).
_DIGESTS: dict[int, tuple[weakref.ref[np.ndarray], str]] = {}


def content_digest(data: np.ndarray | None) -> str:
    """A short digest of a weight's bytes: equal data, equal digest."""
    assert data is not None, "a digest needs the data (or a digest recorded with the weight)"
    key = id(data)
    hit = _DIGESTS.get(key)
    if hit is not None and hit[0]() is data:
        return hit[1]
    # the array's own bytes, not a copy (`tobytes` copied BERT's 340 MiB of weights)
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    digest = hashlib.sha1(raw.data).hexdigest()[:16]
    if isinstance(data, np.ndarray) and not data.flags.writeable:
        # kept while the array lives (the weakref's callback drops it before its id is reused);
        # only read-only arrays: a writable one's bytes may change under the cache
        def forget(_ref: weakref.ref[np.ndarray], key: int = key) -> None:
            _DIGESTS.pop(key, None)

        _DIGESTS[key] = (weakref.ref(data, forget), digest)
    return digest
