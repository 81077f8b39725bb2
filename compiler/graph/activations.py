"""The fused activations of the graph IR: the one table behind the `activation` / `act_args`
attributes of Conv and FullyConnected.

Each activation is declared once: its name (the attribute's value), the graph op it stands for,
and which of that op's attributes `act_args` carries, in order. Everything else is derived from
it: activation fusion (which ops fuse, how their attributes become `act_args`), lowering (the
node an activation splits back into), the reference kernels (an activation's numpy semantics
are its op's reference kernel) and the LLVM emitters (its IR is its op's element-wise builder).
Adding an activation is one row here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.errors import VerifyError

#: The `activation` value of a Conv/FullyConnected without a fused activation.
NONE = "none"


@dataclass(frozen=True)
class Activation:
    """One fused activation: `name` runs graph op `op`, whose attributes `params` are carried
    in that order by `act_args`."""

    name: str
    op: str
    params: tuple[str, ...] = ()

    def args_of(self, attrs: Mapping[str, Any]) -> tuple[float, ...]:
        """The `act_args` of a fused node, from the attributes of the `op` node it absorbed."""
        return tuple(float(attrs[p]) for p in self.params)

    def attrs_of(self, args: Sequence[float]) -> dict[str, Any]:
        """The attributes of the `op` node the activation stands for, from `act_args`."""
        return dict(zip(self.params, (float(a) for a in args), strict=True))


ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in (
        Activation("relu", "Relu"),
        Activation("clip", "Clip", ("min", "max")),
        Activation("leaky_relu", "LeakyRelu", ("alpha",)),
        Activation("sigmoid", "Sigmoid"),
        Activation("tanh", "Tanh"),
    )
}

#: Graph op -> the activation that fuses it.
BY_OP: dict[str, Activation] = {a.op: a for a in ACTIVATIONS.values()}


def get_activation(name: str) -> Activation:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise VerifyError(
            f"unknown fused activation '{name}' (known: {', '.join((NONE, *ACTIVATIONS))})"
        ) from None


def check_fused(activation: str, act_args: Sequence[float]) -> None:
    """Raise VerifyError unless (`activation`, `act_args`) is a well-formed fused activation."""
    if activation == NONE:
        if act_args:
            raise VerifyError(f"activation 'none' takes no act_args, got {list(act_args)}")
        return
    params = get_activation(activation).params
    if len(act_args) != len(params):
        raise VerifyError(
            f"activation '{activation}' takes act_args ({', '.join(params)}), got {list(act_args)}"
        )


__all__ = ["ACTIVATIONS", "BY_OP", "NONE", "Activation", "check_fused", "get_activation"]
