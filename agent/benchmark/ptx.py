"""The GPU benchmark's kernels, as PTX text the driver compiles for whatever GPU it finds.

Both kernels run long chains of fused multiply-adds, eight independent chains per thread so the
arithmetic units never wait on a result. The multiplier arrives as a parameter, so the compiler
cannot turn `x * 1 + b` into an addition (which would count as one operation, not two). Every
value stays a small integer, exact in its type, so the output is known in advance from the
seed and the shape of the launch (agent.benchmark.proofs), whatever the GPU.
"""

from __future__ import annotations

CHAINS = 8
ROUNDS = 8  # fused multiply-adds per chain per loop iteration
FMA_PER_ITERATION = CHAINS * ROUNDS

FP32_KERNEL = "fma_f32"
FP16_KERNEL = "fma_f16x2"


def _header(target: str) -> str:
    return f".version 6.0\n.target {target}\n.address_size 64\n"


def _thread_index() -> str:
    return (
        "\tmov.u32 %r0, %ctaid.x;\n"
        "\tmov.u32 %r1, %ntid.x;\n"
        "\tmov.u32 %r2, %tid.x;\n"
        "\tmad.lo.u32 %idx, %r0, %r1, %r2;\n"
    )


def _store(value: str) -> str:
    return (
        "\tcvta.to.global.u64 %out, %out;\n"
        "\tmul.wide.u32 %off, %idx, 4;\n"
        "\tadd.u64 %out, %out, %off;\n"
        f"\tst.global.f32 [%out], {value};\n"
        "\tret;\n"
    )


def _loop(body: list[str]) -> str:
    return (
        "\tmov.u32 %i, 0;\n"
        "LOOP:\n" + "".join(f"\t{line}\n" for line in body) + "\tadd.u32 %i, %i, 1;\n"
        "\tsetp.lt.u32 %p, %i, %n;\n"
        "\t@%p bra LOOP;\n"
    )


def fp32_ptx() -> str:
    """x ← x·a + b in float32; with a = 1 each chain ends at x0 + length·b."""
    body = [
        f"fma.rn.f32 %f{chain}, %f{chain}, %a, %b;"
        for _ in range(ROUNDS)
        for chain in range(CHAINS)
    ]
    copies = "".join(f"\tmov.f32 %f{chain}, %f0;\n" for chain in range(1, CHAINS))
    total = "".join(f"\tadd.f32 %s, %s, %f{chain};\n" for chain in range(1, CHAINS))
    return (
        _header("sm_30") + f".visible .entry {FP32_KERNEL}(\n"
        "\t.param .u64 p_out, .param .f32 p_a, .param .f32 p_b,\n"
        "\t.param .u32 p_x, .param .u32 p_iters)\n{\n"
        "\t.reg .pred %p;\n"
        f"\t.reg .f32 %a, %b, %s, %f<{CHAINS}>;\n"
        "\t.reg .b32 %i, %n, %x, %idx, %t, %r<3>;\n"
        "\t.reg .b64 %out, %off;\n"
        "\tld.param.u64 %out, [p_out];\n"
        "\tld.param.f32 %a, [p_a];\n"
        "\tld.param.f32 %b, [p_b];\n"
        "\tld.param.u32 %x, [p_x];\n"
        "\tld.param.u32 %n, [p_iters];\n" + _thread_index() + "\txor.b32 %t, %idx, %x;\n"
        "\tand.b32 %t, %t, 1023;\n"
        "\tcvt.rn.f32.u32 %f0, %t;\n"
        + copies
        + _loop(body)
        + "\tmov.f32 %s, %f0;\n"
        + total
        + _store("%s")
        + "}\n"
    )


def fp16_ptx() -> str:
    """Two float16 lanes per instruction: x ← x·a + b, then x ← x·a − b, so x returns to x0."""
    body = [
        f"fma.rn.f16x2 %h{chain}, %h{chain}, %a, {'%b' if step % 2 == 0 else '%nb'};"
        for step in range(ROUNDS)
        for chain in range(CHAINS)
    ]
    copies = "".join(f"\tmov.b32 %h{chain}, %h0;\n" for chain in range(1, CHAINS))
    total = "".join(
        f"\tmov.b32 {{%lo, %hi}}, %h{chain};\n"
        "\tcvt.f32.f16 %g, %lo;\n"
        "\tadd.f32 %s, %s, %g;\n"
        "\tcvt.f32.f16 %g, %hi;\n"
        "\tadd.f32 %s, %s, %g;\n"
        for chain in range(CHAINS)
    )
    return (
        _header("sm_53") + f".visible .entry {FP16_KERNEL}(\n"
        "\t.param .u64 p_out, .param .b32 p_a, .param .b32 p_b, .param .b32 p_nb,\n"
        "\t.param .u32 p_x, .param .u32 p_iters)\n{\n"
        "\t.reg .pred %p;\n"
        f"\t.reg .b32 %a, %b, %nb, %h<{CHAINS}>;\n"
        "\t.reg .b16 %lo, %hi;\n"
        "\t.reg .f32 %g, %s;\n"
        "\t.reg .b32 %i, %n, %x, %idx, %t, %r<3>;\n"
        "\t.reg .b64 %out, %off;\n"
        "\tld.param.u64 %out, [p_out];\n"
        "\tld.param.b32 %a, [p_a];\n"
        "\tld.param.b32 %b, [p_b];\n"
        "\tld.param.b32 %nb, [p_nb];\n"
        "\tld.param.u32 %x, [p_x];\n"
        "\tld.param.u32 %n, [p_iters];\n" + _thread_index() + "\txor.b32 %t, %idx, %x;\n"
        "\tand.b32 %t, %t, 63;\n"
        "\tcvt.rn.f32.u32 %g, %t;\n"
        "\tcvt.rn.f16.f32 %lo, %g;\n"
        "\tmov.b32 %h0, {%lo, %lo};\n"
        + copies
        + _loop(body)
        + "\tmov.f32 %s, 0f00000000;\n"
        + total
        + _store("%s")
        + "}\n"
    )
