"""The campaign's inf-propagation class (issue 11 item 5): unet_small with infinite weights in
one conv (mutant 1688 of seed 2026) passes the differential check. The convs skip padded taps
as onnxruntime's do; onnxruntime's MaxPool then keeps or drops a NaN depending on where it sits
in the window (its vector max), and the float64 reference, which propagates NaN like our
MaxPool, decides."""

from __future__ import annotations

from pathlib import Path

from .runner import mutant_cases
from .worker import task_check


def test_infinite_conv_weights_in_unet(tmp_path: Path) -> None:
    case = next(mutant_cases(2026, 1, start=1688))
    assert "conv.weight_1: inf values" in case.desc
    reply = task_check({"model": case.model, "feeds": None, "seed": case.seed}, tmp_path)
    assert reply["cls"] == "ok", reply
