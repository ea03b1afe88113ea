#!/usr/bin/env python3
"""Writes tests/data/mlx_fp_golden.hpp: MLX CPU mx.quantize / mx.dequantize outputs in the microscaling
float modes (mxfp4, nvfp4 and mxfp8) for lowbit's bit-identity tests.

One float32 weight matrix [rows, 64] of random and edge-case groups (for nvfp4 with more rows of its own
edge cases); the packed words and scale bytes mx.quantize returns on the CPU, and mx.dequantize's
float32 values. Floats are stored as their
bit patterns so the tests compare exactly. The tests never run Python; rerun this by hand:

    python3 -m venv /tmp/mlxenv && /tmp/mlxenv/bin/pip install 'mlx[cpu]==0.32.4' numpy
    /tmp/mlxenv/bin/python tools/gen_mlx_fp_golden.py > tests/data/mlx_fp_golden.hpp
"""
import numpy as np
import mlx.core as mx

from gen_mlx_golden import float_bits, words  # the affine generator beside this script

mx.set_default_device(mx.cpu)
G = 32


def weights(rng):
    """Rows of two groups each: random and every edge case of docs/numerics.md N16."""
    rows = []
    rows.append(rng.normal(0.0, 0.05, 2 * G))                                  # typical weights
    rows.append(np.concatenate([np.zeros(G), -np.zeros(G)]))                   # +0 and -0 groups
    ties = np.zeros(G)
    ties[:12] = [6.0, 0.75, 0.25, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75, -0.0, -0.1, -5.0]  # E = 0: ties
    ties2 = np.zeros(G)
    ties2[:12] = [7.0, 0.75, 0.25, 1.25, 1.75, 2.5, 3.5, 5.0, -0.75, -7.0, -0.2, 6.5]  # E = 1: ties at half scale
    rows.append(np.concatenate([ties, ties2]))
    rows.append(np.concatenate([np.full(G, 3.0), np.full(G, -0.1)]))          # constant groups
    # Exponent boundaries: amax / 6 exactly a power of two, one ulp above, sqrt(2) times one.
    one_up = np.nextafter(np.float32(6.0), np.float32(7.0))
    b1 = rng.uniform(-1.0, 1.0, G); b1[3] = 6.0 * 2.0 ** -3
    b2 = rng.uniform(-1.0, 1.0, G) * 1e-3; b2[5] = float(one_up) * 2.0 ** -12
    rows.append(np.concatenate([b1, b2]))
    b3 = rng.uniform(-1.0, 1.0, G) * 100; b3[7] = 6.0 * np.sqrt(2.0) * 2.0 ** 4
    b4 = rng.uniform(-1.0, 1.0, G) * 1e-20
    rows.append(np.concatenate([b3, b4]))
    big = rng.uniform(-1.0, 1.0, G) * 3e38; big[0] = 3.4e38                     # near FLT_MAX
    tiny = rng.uniform(-1.0, 1.0, G) * 1e-41; tiny[0] = 6.0 * 2.0 ** -127     # smallest scale, subnormal values
    rows.append(np.concatenate([big, tiny]))
    sub = rng.uniform(-1.0, 1.0, G) * 1e-39; sub[1] = 2.0 ** -120               # subnormal values beside a normal one
    wide = rng.standard_normal(G) * np.exp(rng.uniform(-8.0, 8.0, G))            # magnitudes far apart
    rows.append(np.concatenate([sub, wide]))
    return np.stack(rows).astype(np.float32)


def nvfp4_rows(rng):
    """More rows for nvfp4 (groups of 16): its E4M3 scale's rounding, saturation and underflow."""
    H = 16
    rows = []
    # amax / 6 at E4M3 rounding midpoints (normal and subnormal), just beside them, and exact values.
    mids = [6 * 1.0625, 6 * 1.1875, 6 * 2.0 ** -7 * 1.5 / 2 * 2, 6 * 2.0 ** -9 * 2.5, 6 * 2.0 ** -9 * 3.5,
            6 * 2.0 ** -10, 6 * 2.0 ** -10 * 1.0001, 6 * 2.0 ** -11]
    for pair in range(0, len(mids), 4):
        row = []
        for amax in mids[pair:pair + 4]:
            g = rng.uniform(-1.0, 1.0, H) * amax
            g[rng.integers(H)] = -amax
            row.append(g)
        rows.append(np.concatenate(row))
    # Saturation: amax / 6 at 448, between 448 and 464, at 464 and far beyond; underflow to a zero scale.
    sat = []
    for amax in [6 * 448.0, 6 * 460.0, 6 * 464.0, 1e30]:
        g = rng.uniform(-1.0, 1.0, H) * amax
        g[3] = amax
        sat.append(g)
    rows.append(np.concatenate(sat))
    small = [rng.uniform(-1.0, 1.0, H) * 1e-4, rng.uniform(-1.0, 1.0, H) * 1e-38,
             np.concatenate([[-1e-45], np.zeros(H - 1)]), rng.standard_normal(H) * 3.0]
    rows.append(np.concatenate(small))
    # Codes at ties of E2M1 under an exact scale of 1 (amax 6): 0.25, 0.75, 1.25, ..., 5 and negatives.
    ties = np.array([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -6.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0])
    rows.append(np.concatenate([ties, ties * 2.0 ** -8, ties * 2.0 ** 8, -ties * 3.0]))
    return np.stack(rows).astype(np.float32)


def mxfp8_rows(rng):
    """Rows for mxfp8 (its groups' exponents stay in E8M0's range): E4M3 rounding, scale boundaries."""
    rows = []
    # E4M3 ties and their neighbours under E = 0 (amax 448): normal midpoints (ties to even), the
    # subnormal ones, the boundary between subnormal and normal, values that round to (signed) zero.
    ties = [448.0, 1.0625, 1.1875, 17.0, 19.0, 2.0 ** -10, 1.5 * 2.0 ** -9, 2.5 * 2.0 ** -9, 7.5 * 2.0 ** -9,
            2.0 ** -6 * (1 + 1 / 16), 2.0 ** -6 * (1 + 3 / 16), 240.0, 208.0, 432.0, 440.0, 0.0,
            -0.0, -2.0 ** -11, -2.0 ** -10, -(2.0 ** -10) * 1.0001, -1.0625, -17.0, -19.0, -3.0 * 2.0 ** -9,
            float(np.nextafter(np.float32(1.0625), np.float32(2))), float(np.nextafter(np.float32(17.0), np.float32(0))),
            1e-20, -1e-30, 3.0, -5.5, 100.0, -440.0]
    ties = np.array(ties)
    rows.append(np.concatenate([ties, ties * 2.0 ** 8]))
    rows.append(np.concatenate([ties * 2.0 ** -20, -ties * 2.0 ** 60]))
    # Group exponents: amax exactly 448 * 2^k, one float ulp above, well between; an all-zero and an
    # all -0 group.
    up = float(np.nextafter(np.float32(448.0), np.float32(1000.0)))
    b = [rng.uniform(-1.0, 1.0, G) * 448 * 2.0 ** 3, rng.uniform(-1.0, 1.0, G) * 2.0 ** -5,
         np.zeros(G), -np.zeros(G)]
    b[0][4] = -448 * 2.0 ** 3
    b[1][7] = up * 2.0 ** -12
    rows.append(np.concatenate(b[:2]))
    rows.append(np.concatenate(b[2:]))
    # The extremes of the range: near FLT_MAX (values far below underflow in the division) and the
    # smallest exponent, -127, with float subnormal values.
    big = rng.uniform(-1.0, 1.0, G) * 3e38; big[0] = 3.4e38; big[1] = 1e-40; big[2] = -1e-30
    small = rng.uniform(-1.0, 1.0, G) * 1e-39; small[0] = 448.0 * 2.0 ** -127; small[1] = -1e-45
    rows.append(np.concatenate([big, small]))
    wide = rng.standard_normal(2 * G) * np.exp(rng.uniform(-12.0, 12.0, 2 * G))  # magnitudes far apart
    rows.append(wide)
    return np.stack(rows).astype(np.float32)


def emit_mode(mode, w, prefix):
    wq, scales = mx.quantize(mx.array(w), mode=mode)
    deq = mx.dequantize(wq, scales, mode=mode, dtype=mx.float32)
    mx.eval(wq, scales, deq)
    print(f"inline constexpr std::uint32_t {prefix}_codes[] = {{" + words(np.array(wq)) + "};")
    print(f"inline constexpr std::uint8_t {prefix}_scales[] = {{" +
          ", ".join(str(int(v)) for v in np.array(scales).reshape(-1)) + "};")
    print(f"inline constexpr std::uint32_t {prefix}_dequantized[] = {{" + float_bits(np.array(deq)) + "};")


def main():
    rng = np.random.default_rng(20261204)
    w = weights(rng)
    print("// Generated by tools/gen_mlx_fp_golden.py from MLX " + mx.__version__ +
          " (CPU, mx.quantize / mx.dequantize, float32). Do not edit.")
    print("// Floats are stored as IEEE-754 bit patterns; every array is row-major.")
    print("#pragma once\n\n#include <cstdint>\n\nnamespace lowbit::test::mlx_fp_golden {\n")
    print(f"inline constexpr int rows = {w.shape[0]};")
    print(f"inline constexpr int cols = {w.shape[1]};\n")
    print(f"/// Weights [{w.shape[0]}, {w.shape[1]}].")
    print(f"inline constexpr std::uint32_t weights[] = {{{float_bits(w)}}};")
    emit_mode("mxfp4", w, "mxfp4")
    # Every code with every scale byte from 0 to 254 (one row per byte, each code twice): dequantize only.
    codes = np.tile(np.arange(16, dtype=np.uint32), 2)
    packed = np.zeros((255, 4), dtype=np.uint32)
    for i in range(32):
        packed[:, i // 8] |= codes[i] << (4 * (i % 8))
    all_scales = np.arange(255, dtype=np.uint8).reshape(255, 1)
    deq_all = mx.dequantize(mx.array(packed), mx.array(all_scales), mode="mxfp4", dtype=mx.float32)
    mx.eval(deq_all)
    print("/// Dequantized [255, 32]: row e holds codes 0..15 twice under scale byte e.")
    print("inline constexpr std::uint32_t mxfp4_every_code_dequantized[] = {" + float_bits(np.array(deq_all)) + "};")
    # nvfp4: the same weights and its own rows below them.
    extra = nvfp4_rows(rng)
    print(f"\n/// nvfp4: weights, then these rows [{extra.shape[0]}, {extra.shape[1]}].")
    print(f"inline constexpr int nvfp4_extra_rows = {extra.shape[0]};")
    print(f"inline constexpr std::uint32_t nvfp4_extra_weights[] = {{{float_bits(extra)}}};")
    emit_mode("nvfp4", np.concatenate([w, extra]), "nvfp4")
    # Every code under every scale byte 0..255 (one row per byte, each code twice, two groups): dequantize.
    packed = np.zeros((256, 4), dtype=np.uint32)
    for i in range(32):
        packed[:, i // 8] |= codes[i] << (4 * (i % 8))
    byte_scales = np.repeat(np.arange(256, dtype=np.uint8).reshape(256, 1), 2, axis=1)
    deq_all = mx.dequantize(mx.array(packed), mx.array(byte_scales), mode="nvfp4", dtype=mx.float32)
    mx.eval(deq_all)
    print("/// Dequantized [256, 32]: row s holds codes 0..15 twice under scale byte s in both groups.")
    print("inline constexpr std::uint32_t nvfp4_every_code_dequantized[] = {" + float_bits(np.array(deq_all)) + "};")
    # mxfp8: the weights' first 6 rows (the last two hold groups below E8M0's range), then its own rows.
    extra = mxfp8_rows(rng)
    print(f"\n/// mxfp8: the first mxfp8_weight_rows rows of weights, then these rows [{extra.shape[0]}, {extra.shape[1]}].")
    print("inline constexpr int mxfp8_weight_rows = 6;")
    print(f"inline constexpr int mxfp8_extra_rows = {extra.shape[0]};")
    print(f"inline constexpr std::uint32_t mxfp8_extra_weights[] = {{{float_bits(extra)}}};")
    emit_mode("mxfp8", np.concatenate([w[:6], extra]), "mxfp8")
    # Every code under a few scale bytes (one row per scale byte, 256 codes in 8 groups).
    scale_bytes = [0, 1, 9, 10, 100, 127, 136, 200, 254]
    codes8 = np.arange(256, dtype=np.uint32)
    packed = np.zeros((len(scale_bytes), 64), dtype=np.uint32)
    for i in range(256):
        packed[:, i // 4] |= codes8[i] << (8 * (i % 4))
    byte_scales = np.repeat(np.array(scale_bytes, dtype=np.uint8).reshape(-1, 1), 8, axis=1)
    deq_all = mx.dequantize(mx.array(packed), mx.array(byte_scales), mode="mxfp8", dtype=mx.float32)
    mx.eval(deq_all)
    print("inline constexpr std::uint8_t mxfp8_every_code_scale_bytes[] = {" + ", ".join(map(str, scale_bytes)) + "};")
    print(f"/// Dequantized [{len(scale_bytes)}, 256]: row i holds codes 0..255 under scale byte mxfp8_every_code_scale_bytes[i].")
    print("inline constexpr std::uint32_t mxfp8_every_code_dequantized[] = {" + float_bits(np.array(deq_all)) + "};")
    print("\n}  // namespace lowbit::test::mlx_fp_golden")


if __name__ == "__main__":
    main()
