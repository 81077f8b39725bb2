"""The C side of an AOT bundle (pipeline step 11, after code generation): the header text,
the weights as a C array, and reading the memory plan back out of a header.

A header declares the entry, the `<name>_config` descriptor the object defines, macros for
the three regions (sizes, alignment) and for every input and output (offset in the mutable
region, bytes, element kind, shape), and carries the `glowviz.memory/1` report of the plan the
code was generated for, so `glowviz mem NAME.h` prints the same map the IDE shows. Everything
here is plain text: no LLVM, so reading a header needs no code generator.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.errors import CompilerError
from compiler.graph.types import ElemKind

#: Bumped when the header macros, the config struct or the entry's ABI change.
FORMAT_VERSION = 1

#: Return codes of a bundle entry (kept in step with the entry `bundle.py` generates).
ENTRY_OK = 0
ENTRY_EALIGN = 1
ENTRY_EDIVZERO = 2

#: `glowviz_tensor_info.elem_kind` codes: ElemKind in declaration order, from 1 (0 = unknown).
ELEM_CODES: dict[ElemKind, int] = {k: i + 1 for i, k in enumerate(ElemKind)}

_REPORT_OPEN = "/* glowviz.memory/1 report of the plan this bundle was generated for (JSON):"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class BundleTensor:
    """An input or output: where it lives in the mutable region and what it holds."""

    name: str  # the ONNX graph's name
    macro: str  # a C identifier derived from the name, unique within the bundle
    offset: int  # bytes from the mutable region's base
    size: int  # bytes
    elem: ElemKind
    shape: tuple[int, ...]

    @property
    def elems(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class HeaderInfo:
    """Everything the header states; built by `bundle.build_bundle`."""

    name: str  # C identifier: the entry, `<name>_config`, file names
    model: str  # the model file's name (no directory: the header must not depend on cwd)
    model_sha256: str
    generator: str  # e.g. "glowviz 0.1.0"
    triple: str
    cpu: str
    features: str
    constant_size: int
    mutable_size: int
    activations_size: int
    alignment: int
    weights_crc32: int
    static_scratch: int  # bytes of zero-initialised static buffers in the object (.bss)
    inputs: tuple[BundleTensor, ...]
    outputs: tuple[BundleTensor, ...]
    embedded: bool  # `<name>.weights.c` defines `<name>_constant_weights`


def check_name(name: str) -> str:
    """`name` if it is a C identifier (it names the entry and the files), else a CompilerError."""
    if not _IDENT.match(name):
        raise CompilerError(
            f"bundle name '{name}' is not a C identifier",
            hint="use letters, digits and '_', not starting with a digit (--name PREFIX)",
        )
    return name


def c_identifier(text: str) -> str:
    """A C identifier for `text` (a model or tensor name): other characters become '_'."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text) or "_"
    return "_" + ident if ident[0].isdigit() else ident


def unique_macros(names: list[str]) -> list[str]:
    """C identifiers for `names`: a name that is one keeps it; the others are sanitised and
    suffixed (_2, _3, ...) where they would clash."""
    taken = {n for n in names if _IDENT.match(n)}
    out: list[str] = []
    for n in names:
        if _IDENT.match(n):
            out.append(n)
            continue
        base = c_identifier(n)
        ident, k = base, 1
        while ident in taken:
            k += 1
            ident = f"{base}_{k}"
        taken.add(ident)
        out.append(ident)
    return out


def _c_string(text: str) -> str:
    """`text` as a C string literal (for names in comments and macros)."""
    out = []
    for ch in text.encode():
        c = chr(ch)
        if c in '"\\':
            out.append("\\" + c)
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append(f"\\{ch:03o}")
    return '"' + "".join(out) + '"'


def _comment(text: str) -> str:
    """`text` safe inside a /* */ comment."""
    return text.replace("*/", "* /")


def _type_text(t: BundleTensor) -> str:
    return f"{t.elem.value}[{', '.join(str(d) for d in t.shape)}]"


def _common_defs() -> str:
    elems = "\n".join(f"#define GLOWVIZ_ELEM_{k.name} {code}" for k, code in ELEM_CODES.items())
    return f"""#ifndef GLOWVIZ_BUNDLE_COMMON_DEFS
#define GLOWVIZ_BUNDLE_COMMON_DEFS
/* Definitions every glowviz bundle header shares (format {FORMAT_VERSION}). */
#define GLOWVIZ_BUNDLE_FORMAT_VERSION {FORMAT_VERSION}

/* Return codes of a bundle entry. */
#define GLOWVIZ_BUNDLE_OK {ENTRY_OK}
#define GLOWVIZ_BUNDLE_EALIGN {ENTRY_EALIGN} /* a region base is not <NAME>_MEM_ALIGN-aligned */
#define GLOWVIZ_BUNDLE_EDIVZERO {ENTRY_EDIVZERO} /* an integer Div or Mod met a zero divisor */

/* glowviz_tensor_info.elem_kind */
{elems}

/* Static allocation of a region: GLOWVIZ_ALIGNED(LENET_MEM_ALIGN) uint8_t buf[SIZE]; */
#if defined(__GNUC__) || defined(__clang__)
#define GLOWVIZ_ALIGNED(n) __attribute__((aligned(n)))
#else
#define GLOWVIZ_ALIGNED(n) /* align by hand: this compiler's attribute is unknown here */
#endif

/* Where an input or output lives in the mutable region, and what it holds. */
typedef struct glowviz_tensor_info {{
    const char *name;      /* the ONNX graph's name */
    uint64_t offset;       /* bytes from the mutable region's base */
    uint64_t size;         /* bytes */
    uint32_t elem_kind;    /* GLOWVIZ_ELEM_* */
    uint32_t rank;
    const uint64_t *shape; /* rank dimensions, outermost first (row-major) */
}} glowviz_tensor_info;

/* What `<name>_config` describes: the same facts as the macros, readable at run time. */
typedef struct glowviz_bundle_config {{
    uint32_t format_version; /* GLOWVIZ_BUNDLE_FORMAT_VERSION of the generator */
    uint32_t alignment;      /* every region base must be aligned to this many bytes */
    uint64_t constant_size;  /* bytes of the constant-weights region (= the weights file) */
    uint64_t mutable_size;   /* bytes of the mutable-weights region (inputs and outputs) */
    uint64_t activations_size;
    uint32_t weights_crc32;  /* CRC-32 (zlib's) of the weights file */
    uint32_t num_inputs;
    uint32_t num_outputs;
    const glowviz_tensor_info *inputs;
    const glowviz_tensor_info *outputs;
}} glowviz_bundle_config;
#endif
"""


def _tensor_lines(info: HeaderInfo, kind: str, tensors: tuple[BundleTensor, ...]) -> list[str]:
    up = info.name.upper()
    lines = [f"#define {up}_NUM_{kind.upper()}S {len(tensors)}"]
    for i, t in enumerate(tensors):
        m = f"{up}_{t.macro}"
        dims = ", ".join(str(d) for d in t.shape)
        lines += [
            f"/* {kind} {i}: {_comment(_c_string(t.name))} {_type_text(t)} */",
            f"#define {m}_NAME {_c_string(t.name)}",
            f"#define {m}_OFFSET {t.offset}",
            f"#define {m}_SIZE {t.size}",
            f"#define {m}_ELEMS {t.elems}",
            f"#define {m}_ELEM_KIND GLOWVIZ_ELEM_{t.elem.name}",
            f"#define {m}_RANK {len(t.shape)}",
            f"#define {m}_SHAPE {{{dims}}}",
        ]
    return lines


def _summary(info: HeaderInfo) -> list[str]:
    def row(t: BundleTensor) -> str:
        return (
            f" *   {_comment(_c_string(t.name))}  {_type_text(t)}  "
            f"offset {t.offset}, {t.size} B  ({info.name.upper()}_{t.macro}_*)"
        )

    weights_src = f"{info.name}.weights.bin"
    if info.embedded:
        weights_src += f" (or {info.name}_constant_weights from {info.name}.weights.c)"
    return [
        f"/* {info.name}.h: glowviz ahead-of-time bundle of {_comment(info.model)}.",
        f" * Generated by {_comment(info.generator)}; do not edit.",
        " *",
        f" * Model:  {_comment(info.model)} (sha256 {info.model_sha256 or 'unknown'})",
        f" * Target: {info.triple}, CPU {info.cpu}"
        + (f" (features: {info.name.upper()}_CPU_FEATURES)" if info.features else ""),
        " *",
        " * Link the object, allocate three regions (each "
        f"{info.name.upper()}_MEM_ALIGN-byte aligned), call the entry:",
        f" *   constant weights  {info.constant_size:>10} B  fill with {weights_src}",
        f" *   mutable weights   {info.mutable_size:>10} B  inputs and outputs, at the "
        "offsets below",
        f" *   activations       {info.activations_size:>10} B  scratch; need not be initialised",
        " * Inputs:",
        *(row(t) for t in info.inputs),
        " * Outputs:",
        *(row(t) for t in info.outputs),
        " *",
        " * The object needs no runtime beyond memcpy/memset and the libm functions its",
        f" * kernels call. It is not reentrant: its kernels share {info.static_scratch} B of",
        " * static scratch buffers, so run one call at a time per process.",
        " */",
    ]


def header_text(info: HeaderInfo, report: dict[str, Any]) -> str:
    """The bundle's C header (C99 and C++), ending with the plan's memory report as JSON."""
    name, up = info.name, info.name.upper()
    guard = f"GLOWVIZ_BUNDLE_{up}_H"
    lines = [
        *_summary(info),
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        _common_defs(),
        "/* Generator, target and weights of this bundle. */",
        f"#define {up}_GENERATOR {_c_string(info.generator)}",
        f"#define {up}_FORMAT_VERSION {FORMAT_VERSION}",
        f"#define {up}_TARGET {_c_string(info.triple)}",
        f"#define {up}_CPU {_c_string(info.cpu)}",
        f"#define {up}_CPU_FEATURES {_c_string(info.features)}",
        f"#define {up}_WEIGHTS_FILE {_c_string(name + '.weights.bin')}",
        f"#define {up}_WEIGHTS_CRC32 0x{info.weights_crc32:08x}u",
        "",
        "/* Memory regions (bytes) and their alignment. */",
        f"#define {up}_CONSTANT_MEM_SIZE {info.constant_size}",
        f"#define {up}_MUTABLE_MEM_SIZE {info.mutable_size}",
        f"#define {up}_ACTIVATIONS_MEM_SIZE {info.activations_size}",
        f"#define {up}_MEM_ALIGN {info.alignment}",
        "",
        "/* Inputs and outputs: offsets and sizes in bytes within the mutable region. */",
        *_tensor_lines(info, "input", info.inputs),
        *_tensor_lines(info, "output", info.outputs),
        "",
        "/* The same facts at run time (defined in the object). */",
        f"extern const glowviz_bundle_config {name}_config;",
        "",
        "/* Runs the model: reads the inputs from and writes the outputs into mutable_weight.",
        " * Returns GLOWVIZ_BUNDLE_OK, or GLOWVIZ_BUNDLE_EALIGN (nothing run) when a region",
        " * base is not aligned. The constant region is only read. */",
        f"int {name}(const uint8_t *constant_weight, uint8_t *mutable_weight, "
        "uint8_t *activations);",
    ]
    if info.embedded:
        lines += [
            "",
            f"/* The weights file as an array ({name}.weights.c), for targets without files. */",
            f"extern const uint8_t {name}_constant_weights[];",
        ]
    lines += [
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        f"#endif /* {guard} */",
        "",
        _REPORT_OPEN,
        # "*/" can only occur inside a JSON string, where "*\/" is the same string.
        json.dumps(report, indent=1, sort_keys=False).replace("*/", "*\\/"),
        "*/",
        "",
    ]
    return "\n".join(lines)


_HEX = [f"0x{b:02x}" for b in range(256)]

#: A whole row of the weights array, 16 elements "0x??, " and a newline for the last space; the
#: two hex digits of byte b are _DIGITS[b] (as a 2-byte item, at every third one of the row).
_ROW = np.frombuffer(("    " + "0x??, " * 15 + "0x??,\n").encode(), np.uint8)
_DIGITS = np.frombuffer("".join(f"{b:02x}" for b in range(256)).encode(), np.uint16)

#: Rows of the weights array formatted at a time (6.5 MB of text).
_ROWS_AT_ONCE = 1 << 16


def _hex_rows(weights: bytes) -> str:
    """The weights array's rows, "    0xhh, ..., 0xhh," (16 bytes, the last row fewer), one a
    line. Whole rows are filled by numpy, a block at a time (a row template, then each byte's
    two digits): a Python join per row took ~7 s for ResNet-50's 100 MB. The same text."""
    data = np.frombuffer(weights, np.uint8)
    full = data.size // 16
    parts = []
    for start in range(0, full, _ROWS_AT_ONCE):
        rows = min(_ROWS_AT_ONCE, full - start)
        lines = np.empty((rows, _ROW.size), np.uint8)
        lines[:] = _ROW
        # Row bytes 6 + 6k, k < 16, are element k's digits: 2-byte items 3 + 3k.
        lines.view(np.uint16)[:, 3::3] = _DIGITS[data[16 * start : 16 * (start + rows)]].reshape(
            rows, 16
        )
        parts.append(lines.tobytes().decode("ascii"))
    tail = weights[16 * full :]
    if tail:
        parts.append("    " + ", ".join(map(_HEX.__getitem__, tail)) + ",\n")
    parts[-1] = parts[-1][:-1]  # no newline after the last row
    return "".join(parts)


def weights_c_text(name: str, weights: bytes) -> str:
    """`<name>.weights.c`: the weights file as an aligned const array, for targets without a
    file system (it lands in read-only memory: the entry never writes the constant region)."""
    up = name.upper()
    # A model without constants still gets a (one-byte) array: C has no empty arrays.
    size = f"{up}_CONSTANT_MEM_SIZE" if weights else "1"
    body = _hex_rows(weights) if weights else "    0,"
    return (
        f"/* {name}.weights.c: the constant-weights region of bundle {name} "
        f"({len(weights)} B). Generated; do not edit. */\n"
        f'#include "{name}.h"\n\n'
        f"GLOWVIZ_ALIGNED({up}_MEM_ALIGN)\n"
        f"const uint8_t {name}_constant_weights[{size}] = {{\n{body}\n}};\n"
    )


def read_header_report(text: str, source: str = "header") -> dict[str, Any]:
    """The `glowviz.memory/1` report a bundle header carries (see `header_text`)."""
    start = text.find(_REPORT_OPEN)
    if start < 0:
        raise CompilerError(
            f"{source} is not a glowviz bundle header (no memory report in it)",
            hint="generate one with 'glowviz bundle MODEL -o DIR'",
        )
    body = text[start + len(_REPORT_OPEN) :]
    end = body.find("*/")
    try:
        report = json.loads(body[:end] if end >= 0 else body)
    except json.JSONDecodeError as e:
        raise CompilerError(f"{source}: the memory report in it is not valid JSON: {e}") from None
    if not isinstance(report, dict) or report.get("schema") != "glowviz.memory/1":
        raise CompilerError(f"{source}: the memory report in it is not glowviz.memory/1")
    return report


def format_bundle(report: dict[str, Any]) -> str:
    """What a header's report adds to the plan: the bundle's own regions and object."""
    b = report.get("bundle")
    if not b:
        return ""
    r, plan = b["regions"], report["regions"]
    obj = b.get("object", {})
    packed = sum(1 for e in b.get("constant_layout", ()) if e["name"].startswith("<packed"))
    return "\n".join(
        [
            f"bundle {b['name']} for {b['target']} (CPU {b['cpu']}):",
            f"  constant     {r['constant']:>12} B  (the constants read in place and "
            f"{packed} packed weights; the plan's constant region is {plan['constant']} B)",
            f"  mutable      {r['mutable']:>12} B",
            f"  activations  {r['activations']:>12} B",
            f"  object       {obj.get('bytes', 0):>12} B  (text {obj.get('text', 0)}, "
            f"data {obj.get('data', 0) + obj.get('rodata', 0)}, bss {obj.get('bss', 0)})",
        ]
    )


__all__ = [
    "ELEM_CODES",
    "ENTRY_EALIGN",
    "ENTRY_EDIVZERO",
    "ENTRY_OK",
    "FORMAT_VERSION",
    "BundleTensor",
    "HeaderInfo",
    "c_identifier",
    "check_name",
    "format_bundle",
    "header_text",
    "read_header_report",
    "unique_macros",
    "weights_c_text",
]
