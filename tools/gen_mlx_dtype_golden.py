#!/usr/bin/env python3
"""Writes tests/data/mlx_dtype_golden.hpp: MLX CPU mx.quantize / mx.dequantize outputs on float16 and
bfloat16 weights, in every mode, and nvfp4 with a global scale, for lowbit's bit-identity tests of quantize and dequantize on
Eigen::half / Eigen::bfloat16 matrices (docs/numerics.md N19).

Per dtype:
* one weight matrix [rows, 128] of random groups at many magnitudes and the groups where the dtype
  changes MLX's result (a scale quotient amax / 6 or amax / 448 that the dtype rounds, to zero or to a
  power of two; nvfp4 quotients the dtype rounds; affine parameters the dtype rounds), with, per mode,
  the packed words, scales, biases and the values mx.dequantize returns in that dtype;
* per float mode, every positive finite value of the dtype as a group's largest magnitude (the group
  [a, 0, ..., 0]), as runs of equal (scale byte, code of a): the start of each run, its scale byte and
  code. A run whose byte is 256 holds the values MLX stores with a wrapped exponent (bfloat16 groups
  below E8M0's range), which lowbit refuses;
* nvfp4 with MLX's per-tensor global scale, on these weights (two scales) and on float32 weights (four).
Half and bfloat16 values are stored as their 16-bit patterns. The tests never run Python; rerun this by
hand:

    python3 -m venv /tmp/mlxenv && /tmp/mlxenv/bin/pip install 'mlx[cpu]==0.32.4' numpy
    cd tools && /tmp/mlxenv/bin/python gen_mlx_dtype_golden.py > ../tests/data/mlx_dtype_golden.hpp

With --check it writes no header: it compares MLX on float16 / bfloat16 weights with MLX on the float32
values of the same weights (every value of the type as a group's largest magnitude, and as an element
of groups under 14 largest magnitudes) and prints where they differ, the evidence for N19's rules.
"""
import sys

import numpy as np
import mlx.core as mx

from gen_mlx_golden import float_bits, words  # the affine generator beside this script

mx.set_default_device(mx.cpu)
COLS = 128
AFFINE = [(64, 4), (32, 8), (128, 3), (64, 1), (32, 2), (64, 6)]
FLOAT_MODES = [("mxfp4", 32), ("nvfp4", 16), ("mxfp8", 32)]
DTYPES = [("f16", mx.float16, 0x7C00), ("bf16", mx.bfloat16, 0x7F80)]


def halves(array):
    return ", ".join(f"0x{int(v):04X}" for v in np.asarray(array).reshape(-1))


def bytes_text(array):
    return ", ".join(str(int(v)) for v in np.asarray(array).reshape(-1))


def bits_of(a):
    return np.array(a.view(mx.uint16))


def weights(name, rng):
    """float32 rows whose dtype-rounded values are the weights: random and the dtype's edge cases."""
    rows = []
    for scale in [0.05, 1.0, 300.0, 3e-3, 2e-5]:
        rows.append(rng.normal(0.0, scale, COLS))
    rows.append(rng.standard_normal(COLS) * np.exp(rng.uniform(-6.0, 6.0, COLS)))  # magnitudes far apart
    # Largest magnitudes where amax / 448 (mxfp8) or amax / 6 (mxfp4) is below the dtype's normal range
    # (for bfloat16 only where E8M0 still stores the mxfp8 exponent: the sweeps cover the rest).
    tiny = [1.5e-5, 6.84e-3, 1.0e-2, 1.3e-2, 2e-4, 4e-7, 1e-7, 3e-6] if name == "f16" else \
        [1.4e-36, 2e-36, 3e-36, 5.2e-36, 4e-36, 1e-35, 2.6e-36, 1.5e-36]
    row = []
    for amax in tiny[:4]:
        g = rng.uniform(-1.0, 1.0, 32) * amax
        g[rng.integers(32)] = amax
        row.append(g)
    rows.append(np.concatenate(row))
    row = []
    for amax in tiny[4:]:
        g = rng.uniform(-1.0, 1.0, 32) * amax
        g[rng.integers(32)] = -amax
        row.append(g)
    rows.append(np.concatenate(row))
    # nvfp4: saturated scales with large quotients (bfloat16 only: float16 stops at 65504), scale ties.
    big = 3e4 if name == "f16" else 3e10
    rows.append(rng.uniform(-1.0, 1.0, COLS) * big)
    ties = np.zeros(COLS)
    ties[:8] = [6.375, 0.75, 0.25, 1.25, 1.75, 2.5, 3.5, 5.0]
    ties[16:24] = [9.0, 3.75, 2.25, 5.25, -3.75, 7.5, -0.375, 1.125]
    ties[32:40] = [7.0, 0.875, -2.625, 6.125, 4.375, 1.3125, 0.4375, -7.0]
    ties[64:] = rng.uniform(-1.0, 1.0, 64) * 13.0
    rows.append(ties)
    # Affine: a 1-bit-wide group near the float16 limit (its scale stays finite), signed zeros.
    edge = rng.uniform(-1.0, 1.0, COLS)
    edge[:64] = np.linspace(-3e4, 3e4, 64)
    edge[64:96] = -0.0
    rows.append(edge)
    return np.stack(rows).astype(np.float32)


def global_scales(w):
    """nvfp4 global scales: the matrix's largest magnitude (the usual choice: the scales then reach
    448), a power of two, a value that rounds, and one small enough to saturate most scales."""
    amax = float(np.abs(np.array(w.astype(mx.float32))).max())
    return [float(np.float32(amax)), float(np.float32(0.37)), 1.0, float(np.float32(amax * 1e-3))]


def sweep_runs(mode, group, dtype, top, wrap=True, as_float=False):
    """Runs of (scale byte, code of a) over every positive finite value a of the dtype (quantized from
    their float32 values with as_float; wrapped exponents marked as byte 256 with wrap)."""
    values = mx.array(np.arange(1, top, dtype=np.uint16)).view(dtype)
    n = values.shape[0]
    pad = (-n) % 32
    w = mx.concatenate([values.reshape(n, 1), mx.zeros((n, group - 1), dtype=dtype)], axis=1)
    w = mx.concatenate([w, mx.zeros((pad, group), dtype=dtype)], axis=0)
    wq, scales = mx.quantize(w.astype(mx.float32) if as_float else w, mode=mode)
    scale = np.array(scales)[:n, 0].astype(np.int64)
    codes = np.array(wq).view(np.uint8)[:n, 0]
    code = codes if mode == "mxfp8" else codes & 15
    code = code.astype(np.int64)
    if mode != "nvfp4" and wrap:
        # E8M0 bytes rise with a, except where MLX wraps an exponent below -127 (it stores E + 127 mod
        # 256): after the leading run where amax / max rounds to zero (byte 127) the bytes start again
        # from a wrapped value until byte 0 (E = -127) is reached.
        zero_run = np.argmax(scale != 127)
        first_stored = zero_run + np.argmax(scale[zero_run:] <= 1) if np.any(scale[zero_run:] == 0) else zero_run
        if scale[zero_run] > 127 + 0:  # wrapped exponents: from the end of the zero run to byte 0
            scale[zero_run:first_stored] = 256
            code[zero_run:first_stored] = 0
    change = np.nonzero((np.diff(scale) != 0) | (np.diff(code) != 0))[0] + 1
    starts = np.concatenate([[0], change])
    return np.arange(1, top)[starts], scale[starts], code[starts]


def check():
    """Prints where MLX on float16 / bfloat16 weights differs from MLX on their float32 values."""
    for name, dtype, top in DTYPES:
        for mode, group in FLOAT_MODES:
            for_type = sweep_runs(mode, group, dtype, top, wrap=False)
            for_float = sweep_runs(mode, group, dtype, top, wrap=False, as_float=True)
            values = np.array(mx.array(np.arange(1, top, dtype=np.uint16)).view(dtype).astype(mx.float32))
            for what, index in [("scale bytes", 1), ("codes of the largest magnitude", 2)]:
                a = np.repeat(for_type[index], np.diff(np.append(for_type[0], top)))
                b = np.repeat(for_float[index], np.diff(np.append(for_float[0], top)))
                differ = np.nonzero(a != b)[0]
                span = f", from {values[differ].min():.3g} to {values[differ].max():.3g}" if len(differ) else ""
                print(f"{name} {mode}: {what} differ for {len(differ)} largest magnitudes{span}")
        every = np.arange(0, top, dtype=np.uint16)
        x = mx.array(np.concatenate([every, every | 0x8000])).view(dtype)
        xf = np.array(x.astype(mx.float32))
        for mode, group in FLOAT_MODES:
            differ = 0
            for amax in [1.0, 6.0, 5.0, 7.0, 9.0, 13.0, 0.37, 100.0, 448.0, 500.0, 3000.0, 0.001, 1e-5, 40000.0]:
                a = float(np.array(mx.array([amax]).astype(dtype).astype(mx.float32))[0])
                if not np.isfinite(a):
                    continue
                xs = x[mx.array(np.nonzero(np.abs(xf) <= a)[0])]
                n = xs.shape[0]
                pad = (-n) % 32
                w = mx.concatenate([mx.full((n + pad, 1), a, dtype=dtype),
                                    mx.concatenate([xs, mx.zeros((pad,), dtype=dtype)]).reshape(-1, 1),
                                    mx.zeros((n + pad, group - 2), dtype=dtype)], axis=1)
                r1 = mx.quantize(w, mode=mode)
                r2 = mx.quantize(w.astype(mx.float32), mode=mode)
                differ += int(np.sum(np.any(np.array(r1[0]) != np.array(r2[0]), axis=1)[:n]))
            print(f"{name} {mode}: groups [amax, x, 0, ...] whose codes differ: {differ}")


def emit_global_scales(name, w, count):
    """nvfp4 with the first `count` of global_scales(w): words, scale bytes and float32 dequantized values."""
    for index, global_scale in enumerate(global_scales(w)[:count]):
        g = mx.array(np.float32(global_scale))
        wq, scales = mx.quantize(w, mode="nvfp4", global_scale=g)
        deq = mx.dequantize(wq, scales, mode="nvfp4", global_scale=g)
        assert deq.dtype == mx.float32  # MLX returns float32 with a global scale, whatever dtype= says
        tag = f"{name}_nvfp4_global{index}"
        print(f"/// nvfp4 on {name} with global scale {global_scale!r}.")
        print(f"inline constexpr std::uint32_t {tag}_scale = 0x{np.float32(global_scale).view(np.uint32):08X}u;")
        print(f"inline constexpr std::uint32_t {tag}_codes[] = {{{words(np.array(wq))}}};")
        print(f"inline constexpr std::uint8_t {tag}_scales[] = {{{bytes_text(np.array(scales))}}};")
        print(f"inline constexpr std::uint32_t {tag}_dequantized[] = {{{float_bits(np.array(deq))}}};")


def main():
    rng = np.random.default_rng(20261205)
    print("// Generated by tools/gen_mlx_dtype_golden.py from MLX " + mx.__version__ +
          " (CPU, mx.quantize / mx.dequantize on float16 and bfloat16). Do not edit.")
    print("// Half and bfloat16 values are stored as 16-bit patterns; every array is row-major.")
    print("#pragma once\n\n#include <cstdint>\n\nnamespace lowbit::test::mlx_dtype_golden {\n")
    print(f"inline constexpr int cols = {COLS};\n")
    for name, dtype, top in DTYPES:
        w = mx.array(weights(name, rng)).astype(dtype)
        print(f"/// {name}: weights [{w.shape[0]}, {COLS}].")
        print(f"inline constexpr int {name}_rows = {w.shape[0]};")
        print(f"inline constexpr std::uint16_t {name}_weights[] = {{{halves(bits_of(w))}}};")
        for group, bits in AFFINE:
            wq, scales, biases = mx.quantize(w, group_size=group, bits=bits)
            deq = mx.dequantize(wq, scales, biases, group_size=group, bits=bits)
            assert deq.dtype == dtype and scales.dtype == dtype
            tag = f"{name}_g{group}_b{bits}"
            print(f"inline constexpr std::uint32_t {tag}_codes[] = {{{words(np.array(wq))}}};")
            print(f"inline constexpr std::uint16_t {tag}_scales[] = {{{halves(bits_of(scales))}}};")
            print(f"inline constexpr std::uint16_t {tag}_biases[] = {{{halves(bits_of(biases))}}};")
            print(f"inline constexpr std::uint16_t {tag}_dequantized[] = {{{halves(bits_of(deq))}}};")
        for mode, group in FLOAT_MODES:
            wq, scales = mx.quantize(w, mode=mode)
            deq = mx.dequantize(wq, scales, mode=mode, dtype=dtype)
            tag = f"{name}_{mode}"
            print(f"inline constexpr std::uint32_t {tag}_codes[] = {{{words(np.array(wq))}}};")
            print(f"inline constexpr std::uint8_t {tag}_scales[] = {{{bytes_text(np.array(scales))}}};")
            print(f"inline constexpr std::uint16_t {tag}_dequantized[] = {{{halves(bits_of(deq))}}};")
        emit_global_scales(name, w, 2)
        for mode, group in FLOAT_MODES:
            starts, scale, code = sweep_runs(mode, group, dtype, top)
            tag = f"{name}_{mode}_sweep"
            print(f"/// {mode} on {name}: runs over every positive finite value as a group's largest magnitude.")
            print(f"inline constexpr std::uint16_t {tag}_starts[] = {{{halves(starts)}}};")
            print(f"inline constexpr std::uint16_t {tag}_scales[] = {{{bytes_text(scale)}}};")
            print(f"inline constexpr std::uint8_t {tag}_codes[] = {{{bytes_text(code)}}};")
            print(f"inline constexpr std::uint16_t {tag}_end = 0x{top:04X};")
        print()
    w = mx.array(weights("bf16", rng))
    print(f"/// f32: weights [{w.shape[0]}, {COLS}] (for the nvfp4 global scale).")
    print(f"inline constexpr int f32_rows = {w.shape[0]};")
    print(f"inline constexpr std::uint32_t f32_weights[] = {{{float_bits(np.array(w))}}};")
    emit_global_scales("f32", w, 4)
    print("\n}  // namespace lowbit::test::mlx_dtype_golden")


if __name__ == "__main__":
    check() if "--check" in sys.argv[1:] else main()
