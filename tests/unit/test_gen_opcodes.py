"""tools/gen_opcodes.py: the opcode properties ember reads from the generated header (not by
comparing names in C) say what the running interpreter's instructions do."""
import dis
import opcode
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generated(tmp_path):
    out = tmp_path / "em_opcodes_gen.h"
    subprocess.check_call([sys.executable, os.path.join(ROOT, "tools", "gen_opcodes.py"), str(out)])
    return out.read_text()


def test_control_flow_flags(tmp_path):
    text = _generated(tmp_path)
    bits = {m[0]: int(m[1]) for m in re.findall(r"#define EMBCF_(\w+) (\d+)", text)}
    flags = [int(v) for v in re.search(r"em_bc_flags\[256\] = \{([^}]*)\}", text)[1].split(", ")]
    jumps = set(opcode.hasjrel) | set(opcode.hasjabs)
    for num in range(256):
        name, f = opcode.opname[num], flags[num]
        test = re.fullmatch(r"POP_JUMP_(?:FORWARD_|BACKWARD_)?IF_(TRUE|FALSE|NONE|NOT_NONE)", name)
        assert bool(f & bits["POP_JUMP_IF"]) == bool(test and num in jumps), name
        assert bool(f & bits["NONE_TEST"]) == bool(test and "NONE" in test[1]), name
        assert bool(f & bits["JUMP_IF_TRUE"]) == bool(test and test[1] in ("TRUE", "NONE")), name
        exits = name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                         "JUMP_BACKWARD_NO_INTERRUPT")
        assert bool(f & bits["NO_FALLTHROUGH"]) == exits, name


def test_binary_op_numbers(tmp_path):
    text = _generated(tmp_path)
    for i, (name, _sym) in enumerate(dis._nb_ops):
        assert f"#define EM_{name} {i}\n" in text
