#!/usr/bin/env python3
"""Weight error of llama.cpp's q4_K reference quantizer on all-MiniLM-L6-v2's 36 linear layers, for
the comparison asked in issue 14 (4.5 bits per weight: 4-bit codes, a 6-bit scale and a 6-bit min per
32 weights, an fp16 d and dmin per 256). A by-hand cross-check: the library, its tests and CI never
run or import it, and nothing here is a dependency of lowbit.

Needs Python 3 with numpy only (the optional --check-gguf also imports PyPI's `gguf`, which has
Q4_K and Q5_0 dequantizers but no Q4_K quantizer, so the quantizer is reimplemented here):

    python3 -m venv /tmp/q4k-venv && /tmp/q4k-venv/bin/pip install numpy    # add gguf for the check
    /tmp/q4k-venv/bin/python tools/q4k_weight_error.py build/deps/minilm/model.safetensors OUT.csv

The model is the float32 safetensors that tools/install-deps unpacks (read here with numpy, no
safetensors package); a run takes about 20 s on one core. OUT.csv has one row per linear layer,
keyed by the safetensors tensor name without ".weight" (so it joins on `layer` with the example's
per-layer tables):

  layer, rows, cols          the PyTorch weight [out, in]; llama.cpp quantizes along `in` (its ne[0])
  q4k_scope                  "all", or "cols[0:256]" where `in` is not a multiple of 256 (see below)
  q4k_relative_error         ||W_q - W||_F / ||W||_F of q4_K over q4k_scope
  q4k_rmse                   sqrt(mean((W_q - W)^2)) over q4k_scope
  q4k_padded_relative_error  q4_K on the whole matrix with each row zero-padded to a multiple of 256,
  q4k_padded_rmse              measured on the real weights only (equal to q4k_* where scope is "all")
  llamacpp_type, _bpw        what llama-quantize actually writes for a q4_K target: q4_K (4.5 bpw),
  llamacpp_relative_error,   or its fallback q5_0 (5.5 bpw) for rows not a multiple of 256, and
  llamacpp_rmse              that type's error on the whole matrix

"A q4_K target" is every tensor asked for as q4_K (llama-quantize --pure Q4_K_M, or a per-tensor
override); the Q4_K_M / Q4_K_S mixes without --pure raise some attn_v and ffn_down tensors to q5_K or
q6_K, which this does not model. The weights are quantized from float32, as from an f32 GGUF (an f16
GGUF would round them to fp16 first). No importance matrix (with one, ggml uses another q4_K search).

Rows whose length is not a multiple of 256: q4_K cannot store them (a super-block is 256 weights),
and llama.cpp's llama-quant.cpp (tensor_type_fallback) then writes the tensor as q5_0 instead (q5_K
falls back to q5_1, q6_K to q8_0, the 2/3-bit K types to q4_0; f16 where even 32 does not divide).
In all-MiniLM-L6-v2 that is 30 of the 36 layers (in = 384); only the six FFN output layers
(in = 1536) get real q4_K. For those 30 the CSV gives q4_K on the first 256 columns (a real q4_K
tensor of that shape), q4_K with zero-padding (the padded sub-blocks get scale 0 and change nothing
else, so it is q4_K's error with a final super-block of 128 weights), and the q5_0 that llama.cpp
really uses.

The quantizers follow ggml's reference code (ggml-quants.c, read at ggml commit d99724f2, 2026-08;
the fallback rule from llama.cpp's src/llama-quant.cpp at commit 007dbbf3), as llama-quantize uses
it for these types when no importance matrix is given: quantize_row_q4_K_ref (per 32 weights,
make_qkx2_quants with weights sqrt(mean x^2) + |x|, 15 levels, a least-squares scale and min over
21 trial inverse scales; then the 8 scales and 8 mins quantized to 6 bits against the super-block's
largest; the codes redone from the stored values) and quantize_row_q5_0_ref. Arithmetic is float32
in ggml's order of operations so that the codes and the fp16 fields come out bit for bit as ggml's
on x86-64 (no FMA contraction). It was checked that way: the packed blocks equal those of ggml's own
C functions built in a scratch folder, on random matrices and on these weights, and dequantize
through gguf to the values measured here (--check-gguf redoes the latter). A ggml built with FMA
contraction (gcc -march=native on x86-64, or aarch64) rounds a few intermediate sums differently:
on these weights about 1% of its q4_K blocks differ, moving a layer's error by under 0.02% of itself.
"""
import argparse
import csv
import json
import math
import pathlib
import re
import sys

import numpy as np

F32 = np.float32
LAYER_RE = re.compile(r"^encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
                      r"intermediate\.dense|output\.dense)\.weight$")


def read_safetensors(path):
    """{name: float32 array} for the F32 tensors of a .safetensors file."""
    raw = pathlib.Path(path).read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(raw, dtype="<f4", count=(end - begin) // 4,
                                      offset=base + begin).reshape(info["shape"])
    return tensors


def nearest_int(v):
    """ggml's nearest_int: round half to even (for |v| < 2^22)."""
    return np.rint(v).astype(np.int32)


def to_fp16_and_back(v):
    """float32 -> fp16 (round to nearest even, as GGML_FP32_TO_FP16) -> float32."""
    return v.astype(np.float16).astype(F32)


def make_qkx2_quants(x, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20):
    """Per column of x [32, B] (weights w [32, B]): codes L [32, B] in 0..nmax, scale [B] and
    the_min [B] (>= 0, dequantized value = scale * L - the_min), as ggml's make_qkx2_quants."""
    n, _ = x.shape
    mn = x.min(axis=0)
    mx = x.max(axis=0)
    sum_w = w[0].copy()
    sum_x = sum_w * x[0]
    for i in range(1, n):                    # sequential float32 sums, as in C
        sum_w = sum_w + w[i]
        sum_x = sum_x + w[i] * x[i]
    mn = np.minimum(mn, F32(0))
    flat = mx == mn
    rng = np.where(flat, F32(1), mx - mn)
    iscale = F32(nmax) / rng
    scale = F32(1) / iscale
    L = np.clip(nearest_int(iscale * (x - mn)), 0, nmax)
    best_error = np.zeros_like(sum_w)
    for i in range(n):
        diff = (scale * L[i].astype(F32) + mn) - x[i]
        best_error = best_error + w[i] * (diff * diff)
    lo = mn.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for step in range(nstep + 1):
            # ggml's loop measures from the current best min, which an earlier step may have moved
            it = (F32(rmin) + F32(rdelta) * F32(step)) + F32(nmax)
            iscale = it / np.where(flat, F32(1), mx - lo)
            laux = np.clip(nearest_int(iscale * (x - lo)), 0, nmax)
            lf = laux.astype(F32)
            sum_l = np.zeros_like(sum_w)
            sum_l2 = np.zeros_like(sum_w)
            sum_xl = np.zeros_like(sum_w)
            for i in range(n):
                wl = w[i] * lf[i]
                sum_l = sum_l + wl
                sum_l2 = sum_l2 + wl * lf[i]
                sum_xl = sum_xl + wl * x[i]
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, F32(0), this_min)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
            cur_error = np.zeros_like(sum_w)
            for i in range(n):
                diff = (this_scale * lf[i] + this_min) - x[i]
                cur_error = cur_error + w[i] * (diff * diff)
            better = (D > 0) & (cur_error < best_error) & ~flat
            L = np.where(better, laux, L)
            best_error = np.where(better, cur_error, best_error)
            scale = np.where(better, this_scale, scale)
            lo = np.where(better, this_min, lo)
    L = np.where(flat, 0, L)
    scale = np.where(flat, F32(0), scale)
    return L, scale.astype(F32), (-lo).astype(F32)


def quantize_q4_k(rows):
    """ggml's quantize_row_q4_K_ref on float32 rows [R, K], K a multiple of 256. Returns
    (d [S], dmin [S], sc [S, 8], m [S, 8], codes [S, 8, 32]) for the S = R*K/256 super-blocks,
    d and dmin already rounded to fp16."""
    x = np.ascontiguousarray(rows, dtype=F32).reshape(-1, 8, 32)
    S = x.shape[0]
    xt = x.reshape(-1, 32).T.copy()                      # [32, S*8]
    sum_x2 = np.zeros(xt.shape[1], dtype=F32)
    for i in range(32):
        sum_x2 = sum_x2 + xt[i] * xt[i]
    av_x = np.sqrt(sum_x2 / F32(32))
    w = av_x + np.abs(xt)
    L, scales, mins = make_qkx2_quants(xt, w)
    L = L.T.reshape(S, 8, 32)
    scales = scales.reshape(S, 8)
    mins = mins.reshape(S, 8)
    max_scale = np.maximum(scales.max(axis=1), F32(0))
    max_min = np.maximum(mins.max(axis=1), F32(0))
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0)).astype(F32)
        inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0)).astype(F32)
    sc = np.minimum(nearest_int(inv_scale[:, None] * scales) & 0xFF, 63).astype(np.uint8)
    m = np.minimum(nearest_int(inv_min[:, None] * mins) & 0xFF, 63).astype(np.uint8)
    d = to_fp16_and_back(max_scale / F32(63))
    dmin = to_fp16_and_back(max_min / F32(63))
    dj = d[:, None] * sc.astype(F32)
    dmj = dmin[:, None] * m.astype(F32)
    live = dj != 0                                      # where d is 0 the first codes stay
    with np.errstate(divide="ignore", invalid="ignore"):
        redo = nearest_int((x + dmj[..., None]) / np.where(live, dj, F32(1))[..., None])
    codes = np.where(live[..., None], np.clip(redo, 0, 15), L).astype(np.uint8)
    return d, dmin, sc, m, codes


def dequantize_q4_k(d, dmin, sc, m, codes):
    return ((d[:, None] * sc.astype(F32))[..., None] * codes.astype(F32)
            - (dmin[:, None] * m.astype(F32))[..., None]).reshape(-1)


def pack_q4_k(d, dmin, sc, m, codes):
    """The 144-byte block_q4_K layout: d, dmin (fp16), 12 bytes of 6-bit scales/mins, 128 of codes."""
    S = d.shape[0]
    scales = np.zeros((S, 12), dtype=np.uint8)
    scales[:, 0:4] = sc[:, 0:4]
    scales[:, 4:8] = m[:, 0:4]
    scales[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    scales[:, 0:4] |= (sc[:, 4:8] >> 4) << 6
    scales[:, 4:8] |= (m[:, 4:8] >> 4) << 6
    c = codes.reshape(S, 4, 2, 32)
    qs = (c[:, :, 0, :] | (c[:, :, 1, :] << 4)).reshape(S, 128).astype(np.uint8)
    head = np.stack([d, dmin], axis=1).astype(np.float16).view(np.uint8)
    return np.concatenate([head, scales, qs], axis=1)


def quantize_q5_0(rows):
    """ggml's quantize_row_q5_0_ref on rows [R, K], K a multiple of 32: (d [B] as fp16, codes [B, 32])."""
    x = np.ascontiguousarray(rows, dtype=F32).reshape(-1, 32)
    first = np.abs(x).argmax(axis=1)                    # first index of the largest |x|, as C's loop
    mx = x[np.arange(x.shape[0]), first]
    d = mx / F32(-16)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, F32(1) / d, F32(0)).astype(F32)
    codes = np.minimum(np.trunc(x * inv[:, None] + F32(16.5)), 31).astype(np.uint8)
    return to_fp16_and_back(d), codes


def dequantize_q5_0(d, codes):
    return (d[:, None] * (codes.astype(F32) - F32(16))).reshape(-1)


def pack_q5_0(d, codes):
    """The 22-byte block_q5_0 layout: d (fp16), 32 high bits, 16 bytes of low nibbles."""
    qh = np.packbits((codes >> 4).astype(np.uint8), axis=1, bitorder="little")
    qs = (codes[:, :16] & 0xF) | ((codes[:, 16:] & 0xF) << 4)
    return np.concatenate([d.astype(np.float16)[:, None].view(np.uint8), qh, qs.astype(np.uint8)], axis=1)


def errors(w, wq):
    w64 = w.astype(np.float64).reshape(-1)
    e = wq.astype(np.float64).reshape(-1) - w64
    sq = float(e @ e)
    return math.sqrt(sq / float(w64 @ w64)), math.sqrt(sq / e.size), sq


def q4k_roundtrip(w):
    return dequantize_q4_k(*quantize_q4_k(w)).reshape(w.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="all-MiniLM-L6-v2 model.safetensors (float32)")
    ap.add_argument("out_csv", help="where to write the per-layer CSV")
    ap.add_argument("--check-gguf", action="store_true",
                    help="also pack the blocks and dequantize them with PyPI gguf's dequantizers")
    args = ap.parse_args()

    tensors = read_safetensors(args.model)
    names = [n for n in tensors if LAYER_RE.match(n)]
    names.sort(key=lambda n: (int(n.split(".")[2]), n))
    if len(names) != 36:
        sys.exit("expected 36 linear layers, found %d" % len(names))
    if args.check_gguf:
        import gguf
        from gguf import quants as gq

    fields = ["layer", "rows", "cols", "q4k_scope", "q4k_relative_error", "q4k_rmse",
              "q4k_padded_relative_error", "q4k_padded_rmse", "llamacpp_type", "llamacpp_bpw",
              "llamacpp_relative_error", "llamacpp_rmse"]
    out_rows = []
    tot = {"q4k_sq": 0.0, "q4k_n": 0, "pad_sq": 0.0, "lc_sq": 0.0, "n": 0}
    for name in names:
        w = tensors[name]
        rows, cols = w.shape
        full = cols % 256 == 0
        sub = w if full else w[:, :256]
        wq = q4k_roundtrip(sub)
        rel, rmse, sq = errors(sub, wq)
        pad = -cols % 256
        wp = np.concatenate([w, np.zeros((rows, pad), dtype=F32)], axis=1) if pad else w
        pad_rel, pad_rmse, pad_sq = errors(w, q4k_roundtrip(wp)[:, :cols])
        if full:
            lc_type, lc_bpw, lc = "q4_K", 4.5, (rel, rmse, sq)
        else:
            d5, c5 = quantize_q5_0(w)
            lc_type, lc_bpw, lc = "q5_0", 5.5, errors(w, dequantize_q5_0(d5, c5))
        if args.check_gguf:
            blocks = pack_q4_k(*quantize_q4_k(sub))
            deq = gq.dequantize(blocks.reshape(sub.shape[0], -1), gguf.GGMLQuantizationType.Q4_K)
            assert np.array_equal(deq.reshape(sub.shape), wq), name
            if not full:
                d5, c5 = quantize_q5_0(w)
                deq5 = gq.dequantize(pack_q5_0(d5, c5).reshape(rows, -1), gguf.GGMLQuantizationType.Q5_0)
                assert np.array_equal(deq5.reshape(w.shape), dequantize_q5_0(d5, c5).reshape(w.shape)), name
        tot["q4k_sq"] += sq
        tot["q4k_n"] += sub.size
        tot["pad_sq"] += pad_sq
        tot["lc_sq"] += lc[2]
        tot["n"] += w.size
        out_rows.append([name[:-len(".weight")], rows, cols, "all" if full else "cols[0:256]",
                         "%.6g" % rel, "%.6g" % rmse, "%.6g" % pad_rel, "%.6g" % pad_rmse,
                         lc_type, lc_bpw, "%.6g" % lc[0], "%.6g" % lc[1]])
        print("%-45s %5d x %4d  q4_K(%s) rel %.5f rmse %.3e  padded rel %.5f  llama.cpp %s rel %.5f"
              % (name[:-7], rows, cols, out_rows[-1][3], rel, rmse, pad_rel, lc_type, lc[0]), flush=True)

    with open(args.out_csv, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(fields)
        wr.writerows(out_rows)

    def summary(label, col):
        v = np.array([float(r[fields.index(col)]) for r in out_rows])
        print("%-34s mean %.5f  median %.5f  min %.5f  max %.5f"
              % (label, v.mean(), np.median(v), v.min(), v.max()))
    summary("q4_K rel. error (scope) x36:", "q4k_relative_error")
    summary("q4_K rel. error (padded) x36:", "q4k_padded_relative_error")
    summary("llama.cpp q4_K/q5_0 rel. error x36:", "llamacpp_relative_error")
    print("overall RMSE: q4_K over its scopes %.4e (%d weights), q4_K padded %.4e, "
          "llama.cpp %.4e (%d weights)"
          % (math.sqrt(tot["q4k_sq"] / tot["q4k_n"]), tot["q4k_n"], math.sqrt(tot["pad_sq"] / tot["n"]),
             math.sqrt(tot["lc_sq"] / tot["n"]), tot["n"]))
    if args.check_gguf:
        from importlib.metadata import version
        print("gguf %s's dequantizers give back exactly the values measured, for every packed block"
              % version("gguf"))
    print("wrote", args.out_csv)


if __name__ == "__main__":
    main()
