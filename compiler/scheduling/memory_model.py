"""The low-level memory model of a node order (pipeline step 7): what the activations region will
hold at every step once IRGen and the low-level passes have run, computed on the graph.

Schedulers need the peak of an order without generating code for it, so this module mirrors the
low-level passes' decisions on the graph:

- a node's results are buffers (64-byte aligned, as the planner aligns them) from the step that
  produces them to the last step that reads them; Reshape is a view of its operand's buffer;
- zero-copy-concat: a Concat input that can live in its slice of the destination is part of the
  destination's buffer, which therefore exists from the first such input's production on (a
  static decision: it depends on the graph only, see `_zero_copy`);
- sum-post-op: a Conv / MatMul / FullyConnected whose only reader is an Add whose other operand
  is complete and read by nothing else still pending accumulates into that operand: its result
  costs nothing and the Add does nothing (decided at the producer's step, so the search state
  carries the set of producers that accumulated and wait for their Add);
- buffer-sharing: an element-wise node whose operand dies there (same type, a whole buffer)
  writes into it;
- copy-elimination: a result saved to a graph output is written into the output weight when
  the Save is its last reader.

`simulate` measures a whole order and knows which Saves come last, so it is exact: it equals
the low-level lower bound of that order (tests check it on every sample and benchmark model
and scheduler). The search (`optimal.py`) goes step by step and cannot know yet whether a Save
will be the last reader of a result that has others, so there the model is optimistic: such a
result costs nothing until its Save runs. Its peak of an order therefore never exceeds the real
one, and the search's minimum is a lower bound for every order of the low-level IR: an order
whose real peak reaches it is optimal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from compiler.errors import CompilerError
from compiler.graph.activations import NONE
from compiler.graph.ir import Function, Node, Result, Value
from compiler.graph.ops import ACCUMULATE
from compiler.graph.ops_quant import QMAX, QMIN


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def is_view(node: Node) -> bool:
    return "view" in node.opdef.traits


@dataclass
class Group:
    """One buffer of the low-level IR: a node result with its views and, for a concat
    destination, the inputs written into its slices. Masks are bit sets of node indices."""

    index: int
    root: Value
    size: int  # aligned bytes
    members: list[Value] = field(default_factory=list)
    producers: int = 0  # nodes producing a member: the buffer exists once one has run
    users: int = 0  # nodes reading a member: the buffer lives until all have run
    saves: int = 0  # Saves that may write the root into an output instead (copy-elimination)
    y_of: int = -1  # the producer whose accumulation (sum post-op) would make it disappear


@dataclass
class _Acc:
    """A possible sum post-op: producer `p` accumulates into `r_group` instead of `y_group`,
    and `add` (reading both) then does nothing."""

    p: int
    add: int
    y_group: int
    r_group: int
    r_producer: int
    z_group: int


@dataclass
class NodeInfo:
    index: int
    node: Node
    preds: int = 0  # nodes producing an operand
    succs: list[int] = field(default_factory=list)
    operand_groups: list[int] = field(default_factory=list)  # distinct
    member_groups: list[int] = field(default_factory=list)  # groups it produces a member of
    saves_of: list[int] = field(default_factory=list)  # groups it may write into an output
    acc: _Acc | None = None  # it may accumulate
    noop_of: int = -1  # it is the Add of producer `noop_of`'s possible sum post-op
    inplace_result: int = -1  # element-wise with a fresh result group: may write in place
    inplace_candidates: list[int] = field(default_factory=list)  # operand groups it may reuse


class Step(NamedTuple):
    """One step of an order: the bytes live while the node runs and after it (a named tuple:
    the optimal search makes one per state expansion)."""

    peak: int
    live: int
    accumulating: int  # bit set of producers that accumulated and whose Add is still pending


class MemoryModel:
    """Static facts of one function; `step` advances a search state by one node."""

    def __init__(self, fn: Function, alignment: int = 64) -> None:
        self.fn = fn
        self.alignment = alignment
        self.nodes = list(fn.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        # The backend's accumulating ops, recorded by lowering (every op that may: not lowered).
        self.accumulating_ops: frozenset[str] | None = fn.module.meta.get("accumulating_ops")
        #: int8 residual adds fuse too where the quantize stage made the graph (IRGen's flag)
        self.int8_sum_post_op = bool(fn.module.meta.get("int8_sum_post_op"))
        self.groups: list[Group] = []
        self.group_of: dict[int, int] = {}  # id(value) -> group index
        self.info = [NodeInfo(i, n) for i, n in enumerate(self.nodes)]
        self._build_groups()
        self._build_nodes()
        #: per node, the groups whose liveness its step may change (besides a sum post-op's)
        self._touched = [
            frozenset(i.member_groups) | frozenset(i.operand_groups) | frozenset(i.saves_of)
            for i in self.info
        ]

    # -- static analysis ------------------------------------------------------------------------
    def _new_group(self, v: Value) -> int:
        g = Group(len(self.groups), v, _align(v.type.size_bytes, self.alignment), [v])
        self.groups.append(g)
        self.group_of[id(v)] = g.index
        return g.index

    def _build_groups(self) -> None:
        for n in self.nodes:
            if is_view(n):
                src = n.operands[0] if n.operands else None
                if src is not None and id(src) in self.group_of:
                    gi = self.group_of[id(src)]
                    self.groups[gi].members.append(n.result)
                    self.group_of[id(n.result)] = gi
                continue
            if n.op == "Save":
                continue
            for r in n.results:
                self._new_group(r)
        for n in self.nodes:
            if n.op == "Concat":
                self._zero_copy(n)
        for g in self.groups:
            for v in g.members:
                if isinstance(v, Result):
                    g.producers |= 1 << self.index[v.node]
                for user, _ in v.users:
                    g.users |= 1 << self.index[user]
                    if user.op == "Save" and v is g.root and isinstance(v, Result):
                        g.saves |= 1 << self.index[user]

    def _saved(self, g: int) -> bool:
        return any(u.op == "Save" for v in self.groups[g].members for u, _ in v.users)

    def _concat_uses(self, g: int) -> int:
        return sum(1 for v in self.groups[g].members for u, _ in v.users if u.op == "Concat")

    def _zero_copy(self, concat: Node) -> None:
        """Mirror of the zero-copy-concat pass: which inputs live in their slice."""
        d = concat.result
        rank = d.type.rank
        axis = concat.attrs["axis"] % max(rank, 1)
        if math.prod(d.type.shape[:axis]) != 1 or id(d) not in self.group_of:
            return
        dg = self.group_of[id(d)]
        if self._saved(dg):
            return
        offset = 0
        for s in concat.operands:
            at, offset = offset, offset + s.type.size_bytes
            if not isinstance(s, Result) or id(s) not in self.group_of or at % self.alignment:
                continue
            sg = self.group_of[id(s)]
            if sg == dg or self.groups[sg].root is not s or self._saved(sg):
                continue
            if self._concat_uses(sg) != 1:
                continue  # inserted twice: two slices cannot both be this buffer
            for v in self.groups[sg].members:
                self.group_of[id(v)] = dg
                self.groups[dg].members.append(v)
            self.groups[sg].members = []
        self.groups = [g for g in self.groups if g.members]
        for k, g in enumerate(self.groups):
            g.index = k
            for v in g.members:
                self.group_of[id(v)] = k

    def _group(self, v: Value) -> int:
        return self.group_of.get(id(v), -1)

    def _is_buffer(self, v: Value) -> bool:
        """`v` is a whole buffer of its own in the low-level IR (an allocactivation)."""
        g = self._group(v)
        return g >= 0 and self.groups[g].root is v and isinstance(v, Result)

    def _build_nodes(self) -> None:
        for info in self.info:
            n = info.node
            for v in n.operands:
                if isinstance(v, Result):
                    p = self.index[v.node]
                    info.preds |= 1 << p
                    if info.index not in self.info[p].succs:
                        self.info[p].succs.append(info.index)
                g = self._group(v)
                if g >= 0 and g not in info.operand_groups:
                    info.operand_groups.append(g)
            for r in n.results:
                g = self._group(r)
                if g >= 0 and r.users and g not in info.member_groups:
                    info.member_groups.append(g)
            if n.op == "Save" and self._is_buffer(n.operands[0]):
                info.saves_of.append(self._group(n.operands[0]))
        for info in self.info:
            self._sum_post_op(info)
            self._in_place(info)

    def _sum_post_op(self, info: NodeInfo) -> None:
        """Mirror of the sum-post-op pass's static conditions (the dynamic ones: `step`)."""
        p = info.node
        allowed = self.accumulating_ops
        if ACCUMULATE not in p.opdef.traits or (allowed is not None and p.op not in allowed):
            return
        if len(p.results) != 1 or p.attrs.get("activation", NONE) != NONE:
            return
        y = p.result
        yg = self._group(y)
        if yg < 0 or self.groups[yg].members != [y] or len(y.users) != 1:
            return
        add, _ = next(iter(y.users))
        quant = add.op == "QAdd" and self.int8_sum_post_op
        if add.op != "Add" and not quant:
            return
        if len(add.operands) != 2 or add.operands[0] is add.operands[1]:
            return
        r = add.operands[1] if add.operands[0] is y else add.operands[0]
        t = y.type
        if quant:  # the int8 form: a QConv, not depthwise, no clamp of its own; any parameters
            x = p.operands[0].type
            depthwise = (
                p.attrs.get("group", 1) > 1 and x.rank == 4 and p.attrs["group"] == x.shape[1]
            )
            if p.op != "QConv" or depthwise or (p.attrs["qmin"], p.attrs["qmax"]) != (QMIN, QMAX):
                return
            if not t.shape == r.type.shape == add.result.type.shape:
                return
        elif not t.elem.is_float or r.type != t or add.result.type != t:
            return
        if not self._is_buffer(r):
            return
        rg, zg = self._group(r), self._group(add.result)
        if any(self._group(v) == rg for v in p.operands):
            return  # it reads the target
        if zg < 0 or self.groups[zg].root is not add.result or self._saved(zg):
            return
        assert isinstance(r, Result)
        info.acc = _Acc(info.index, self.index[add], yg, rg, self.index[r.node], zg)
        self.groups[yg].y_of = info.index
        self.info[self.index[add]].noop_of = info.index

    def _in_place(self, info: NodeInfo) -> None:
        """Mirror of buffer-sharing's static conditions."""
        n = info.node
        if "elementwise" not in n.opdef.traits or len(n.results) != 1:
            return
        r = n.result
        if not self._is_buffer(r):
            return
        info.inplace_result = self._group(r)
        for v in n.operands:
            g = self._group(v)
            if not self._is_buffer(v) or v.type != r.type or g in info.inplace_candidates:
                continue
            # Read here only as itself, never through one of its views as well.
            if any(self._group(u) == g and u is not v for u in n.operands):
                continue
            info.inplace_candidates.append(g)

    # -- dynamic --------------------------------------------------------------------------------
    def accumulates(self, info: NodeInfo, done: int, acc: int) -> bool:
        a = info.acc
        if a is None:
            return False
        rp = a.r_producer
        complete = bool(done >> rp & 1) or (
            self.info[rp].noop_of >= 0 and bool(acc >> self.info[rp].noop_of & 1)
        )
        others = self.groups[a.r_group].users & ~(1 << a.add)
        return complete and not others & ~done

    def step(
        self, n: int, done: int, acc: int, live: int, copied: frozenset[int] = frozenset()
    ) -> Step:
        """Run node `n` after the nodes in `done` (bit set), `acc` the pending sum post-ops,
        `live` the bytes live after `done`. `copied`: groups whose Save is known not to be
        their last reader (so they are buffers of their own).

        A group is *counted* live after `done` when it is produced, still has a pending user,
        is not (still) to be written into an output by a pending Save (unless `copied` says
        the Save is not its last reader: then it is a buffer of its own), and is not the
        target of a pending sum post-op (its producer accumulates into it). The optimal
        search calls this once per state expansion (up to its budget of 100,000 a schedule),
        so those tests are written out inline, not as helper calls."""
        info = self.info[n]
        groups = self.groups
        bit = 1 << n
        noop_of = info.noop_of
        noop = noop_of >= 0 and bool(acc >> noop_of & 1)
        accumulating = info.acc is not None and self.accumulates(info, done, acc)
        in_place = -1
        if info.inplace_result >= 0 and not noop:
            pending = ~bit & ~done
            for ci in info.inplace_candidates:
                if not groups[ci].users & pending:
                    in_place = info.inplace_result
                    break
        # The sum post-op this node starts (its result is never allocated) or ends (this Add
        # writes nothing: its result is the target the producer accumulated into).
        own = info.acc if accumulating else None
        ended = self.info[noop_of].acc if noop else None
        skip_own = own.y_group if own is not None else -1
        skip_ended = ended.z_group if ended is not None else -1
        extra = 0
        not_done = ~done
        for gi in info.member_groups:
            g = groups[gi]
            # a pending Save may write it into an output: it costs nothing
            if g.producers & done or not g.users or (g.saves & not_done and gi not in copied):
                continue
            if gi == in_place or gi == skip_own or gi == skip_ended:
                continue
            extra += g.size
        done2 = done | bit
        acc2 = acc
        touched = self._touched[n]
        if own is not None:
            acc2 |= bit
            touched = touched | {own.y_group}
        if ended is not None:
            acc2 &= ~(1 << noop_of)
            touched = touched | {ended.y_group}
        not_done2 = ~done2
        delta = 0
        for gi in touched:
            g = groups[gi]
            # counted after this step, and before it
            y_of = g.y_of
            after = bool(
                g.producers & done2
                and g.users & not_done2
                and not (g.saves & not_done2 and gi not in copied)
                and not (y_of >= 0 and acc2 >> y_of & 1)
            )
            before = bool(
                g.producers & done
                and g.users & not_done
                and not (g.saves & not_done and gi not in copied)
                and not (y_of >= 0 and acc >> y_of & 1)
            )
            if after != before:
                delta += g.size if after else -g.size
        return Step(live + extra, live + delta, acc2)

    def search_steppers(
        self,
    ) -> tuple[
        list[Callable[[int, int, int], tuple[int, int]]],
        list[Callable[[int, int, int, int], int]],
    ]:
        """`step` in two halves, per node, as closures over the masks and sizes they read:
        `heads[n](done, acc, live)` gives the peak while `n` runs and the pending sum post-ops
        after it, `tails[n](done, acc, acc2, live)` the bytes live after it (`acc2`: the
        head's). The search needs the peak and the new state's key to know whether it keeps
        the state, and keeps fewer than half of the states it expands: the rest never pay for
        the tail. A node that can neither accumulate, end a sum post-op nor write in place
        (most of them) gets a head with only its result buffers' test.

        The search makes up to 100,000 steps a schedule, and the searches that run out of
        budget (unrolled recurrent and attention graphs) are a large part of a test run's
        compile time: without attribute look-ups, helper calls and a named tuple per step, a
        step costs about half as much. tests/scheduling/test_scheduler.py checks the two
        halves against `step` on every state of several searches."""
        groups = self.groups
        info = self.info
        # per group: (index, producers, users, saves, y_of, size)
        gt = [(g.index, g.producers, g.users, g.saves, g.y_of, g.size) for g in groups]
        heads = []
        tails = []
        for n, inf in enumerate(info):
            a = inf.acc
            if a is not None:
                rp = a.r_producer
                acc_test = (rp, info[rp].noop_of, groups[a.r_group].users & ~(1 << a.add))
                own_y = a.y_group
            else:
                acc_test, own_y = None, -1
            ended = info[inf.noop_of].acc if inf.noop_of >= 0 else None
            base = self._touched[n]
            heads.append(
                _search_head(
                    1 << n,
                    inf.noop_of,
                    acc_test,
                    own_y,
                    ended.z_group if ended is not None else -1,
                    inf.inplace_result,
                    tuple(groups[ci].users for ci in inf.inplace_candidates),
                    # member groups without users never count
                    tuple(
                        (gi, groups[gi].producers, groups[gi].saves, groups[gi].size)
                        for gi in inf.member_groups
                        if groups[gi].users
                    ),
                )
            )
            tails.append(
                _search_tail(
                    1 << n,
                    inf.noop_of,
                    gt[own_y] if a is not None and own_y not in base else None,
                    gt[ended.y_group] if ended is not None and ended.y_group not in base else None,
                    tuple(gt[gi] for gi in sorted(base)),
                )
            )
        return heads, tails

    def search_facts(self) -> tuple:
        """Every fact `step`, `simulate`, `search_steppers` and `operator_bound`'s sizes read,
        as ints, nodes and groups by position: two models with equal facts give every order
        (by node positions) the same steps, so the optimal search the same result."""
        groups = tuple((g.producers, g.users, g.saves, g.y_of, g.size) for g in self.groups)
        nodes = tuple(
            (
                i.preds,
                tuple(i.succs),
                tuple(i.operand_groups),
                tuple(i.member_groups),
                tuple(i.saves_of),
                _acc_facts(i.acc),
                i.noop_of,
                i.inplace_result,
                tuple(i.inplace_candidates),
            )
            for i in self.info
        )
        return groups, nodes

    def simulate(self, order: Sequence[Node]) -> list[Step]:
        """The steps of a whole order (which must list every node once, operands first)."""
        pos: dict[int, int] = {}
        for k, node in enumerate(order):
            i = self.index.get(node)
            if i is None or i in pos:
                raise CompilerError(f"schedule lists node '{node.name}' twice or a foreign node")
            pos[i] = k
        # Copy elimination writes a saved buffer into the output only when a Save reads it last.
        copied = frozenset(
            g.index
            for g in self.groups
            if g.saves and max(pos[s] for s in _bits(g.saves)) < max(pos[u] for u in _bits(g.users))
        )
        done = acc = live = 0
        out = []
        for node in order:
            i = self.index[node]
            if self.info[i].preds & ~done:
                raise CompilerError(f"schedule runs '{node.name}' before one of its operands")
            s = self.step(i, done, acc, live, copied)
            out.append(s)
            done, acc, live = done | 1 << i, s.accumulating, s.live
        return out

    def peak(self, order: Sequence[Node]) -> int:
        """The peak of `simulate(order)`."""
        return max((s.peak for s in self.simulate(order)), default=0)

    def operator_bound(self) -> tuple[int, str]:
        """A lower bound of every order's peak: the largest bytes one node needs live while it
        runs, with that node's name. Counted: its operands' buffers and the buffers of its
        results, except a result that may reuse a dying operand and buffers a Save may turn
        into an output. A producer that may accumulate keeps its result's size: the target it
        would write instead is as large and live too. Adds that may do nothing are skipped."""
        best, where = 0, ""
        for info in self.info:
            if info.noop_of >= 0:
                continue
            groups = set(info.operand_groups) | {
                g for g in info.member_groups if self.groups[g].users
            }
            if info.inplace_candidates:
                groups.discard(info.inplace_result)
            total = sum(self.groups[g].size for g in groups if not self.groups[g].saves)
            if total > best:
                best, where = total, info.node.name
        return best, where


def _acc_facts(a: _Acc | None) -> tuple[int, ...] | None:
    return None if a is None else (a.p, a.add, a.y_group, a.r_group, a.r_producer, a.z_group)


def _search_head(
    bit: int,
    noop_of: int,
    acc_test: tuple[int, int, int] | None,
    own_y: int,
    ended_z: int,
    inplace_result: int,
    cand_users: tuple[int, ...],
    members: tuple[tuple[int, int, int, int], ...],
) -> Callable[[int, int, int], tuple[int, int]]:
    """One node's head of `MemoryModel.step` (see `search_steppers`)."""
    if acc_test is None and noop_of < 0 and inplace_result < 0:
        # No sum post-op and no in-place write: a result buffer counts unless it exists
        # already or a pending Save may write it into an output.
        if len(members) == 1:
            ((_gi, producers1, saves1, size1),) = members

            def plain1(done: int, acc: int, live: int) -> tuple[int, int]:
                if producers1 & done or saves1 & ~done:
                    return live, acc
                return live + size1, acc

            return plain1

        def plain(done: int, acc: int, live: int) -> tuple[int, int]:
            not_done = ~done
            extra = 0
            for _gi, producers, saves, size in members:
                if not (producers & done or saves & not_done):
                    extra += size
            return live + extra, acc

        return plain

    def head(done: int, acc: int, live: int) -> tuple[int, int]:
        noop = noop_of >= 0 and acc >> noop_of & 1
        accumulating = False
        if acc_test is not None:
            rp, rp_noop, others = acc_test
            accumulating = bool(
                (done >> rp & 1 or (rp_noop >= 0 and acc >> rp_noop & 1)) and not others & ~done
            )
        in_place = -1
        if inplace_result >= 0 and not noop:
            pending = ~bit & ~done
            for users in cand_users:
                if not users & pending:
                    in_place = inplace_result
                    break
        skip_own = own_y if accumulating else -1
        skip_ended = ended_z if noop else -1
        not_done = ~done
        extra = 0
        for gi, producers, saves, size in members:
            if producers & done or saves & not_done:
                continue
            if gi == in_place or gi == skip_own or gi == skip_ended:
                continue
            extra += size
        acc2 = acc
        if accumulating:
            acc2 |= bit
        if noop:
            acc2 &= ~(1 << noop_of)
        return live + extra, acc2

    return head


_GroupFacts = tuple[int, int, int, int, int, int]  # index, producers, users, saves, y_of, size


def _search_tail(
    bit: int,
    noop_of: int,
    own_extra: _GroupFacts | None,
    ended_extra: _GroupFacts | None,
    base: tuple[_GroupFacts, ...],
) -> Callable[[int, int, int, int], int]:
    """One node's tail of `MemoryModel.step` (see `search_steppers`)."""

    def tail(done: int, acc: int, acc2: int, live: int) -> int:
        touched = base
        # The node accumulated when the head put it in acc2 (acc holds done nodes only); it
        # ended a sum post-op when its producer's bit was pending before it.
        accumulating = False
        if own_extra is not None and acc2 & bit:
            accumulating = True
            touched = (*touched, own_extra)
        # (a set union in `step`: never the same group twice)
        if (
            ended_extra is not None
            and acc >> noop_of & 1
            and not (accumulating and own_extra is ended_extra)
        ):
            touched = (*touched, ended_extra)
        done2 = done | bit
        not_done = ~done
        not_done2 = ~done2
        delta = 0
        for _gi, producers, users, saves, y_of, size in touched:
            after = (
                producers & done2
                and users & not_done2
                and not saves & not_done2
                and not (y_of >= 0 and acc2 >> y_of & 1)
            )
            before = (
                producers & done
                and users & not_done
                and not saves & not_done
                and not (y_of >= 0 and acc >> y_of & 1)
            )
            if bool(after) != bool(before):
                delta += size if after else -size
        return live + delta

    return tail


__all__ = ["Group", "MemoryModel", "NodeInfo", "Step", "is_view"]
