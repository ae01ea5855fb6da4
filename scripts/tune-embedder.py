#!/usr/bin/env python3
"""Fine-tunes kb's embedder (all-MiniLM-L6-v2) on pairs mined from a KB.

    tune-embedder.py --base DIR --pairs FILE --out DIR [--epochs 1]
                     [--batch 64] [--lr 2e-5] [--seed 13] [--device auto]
                     [--max-pairs N]

`kb tune` runs it; it is an optional tool beside kb, not a dependency:
it needs PyTorch and transformers (pip install torch transformers
safetensors), which kb itself never uses.

The pairs are JSON lines {"q": a section's heading, "p": a chunk's text}
(`kb tune --pairs-only` writes them). Training is the in-batch-negatives
objective of sentence-transformers' MultipleNegativesRankingLoss: each
heading's own chunk must score above the batch's other chunks (cosine of
mean-pooled, L2-normalised embeddings, scale 20, softmax cross-entropy);
batches never hold one heading twice. AdamW, linear warm-up over a tenth
of the steps, then linear decay. The model is what kb's C encoder runs:
token ids as BertTokenizer gives them (lower case, 256 at most), mean
pooling over the attention mask.

Writes OUT/model.safetensors (float32, the base's tensor names), OUT/vocab.txt
(the base's) and, last, OUT/tuned.json: the weights' SHA-256, which kb pins
in place of the base's, the base's SHA-256 and how the weights were made.
Every file is written beside its final name and renamed into place, so an
interrupted run leaves the directory as it was. Progress goes to stderr;
the last line on stdout is tuned.json's content.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import time

MAX_LEN = 256   # the model's max_seq_length, as kb's encoder (index_int.h)
SCALE = 20.0    # MultipleNegativesRankingLoss's default


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def say(msg):
    print(f"tune-embedder: {msg}", file=sys.stderr, flush=True)


def read_pairs(path, limit):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                q, p = r["q"], r["p"]
            except (ValueError, KeyError, TypeError):
                sys.exit(f"tune-embedder: {path}:{n}: not a pair "
                         "(a JSON object with strings \"q\" and \"p\")")
            if isinstance(q, str) and isinstance(p, str) and q and p:
                pairs.append((q, p))
    if limit:
        pairs = pairs[:limit]
    if len(pairs) < 2:
        sys.exit(f"tune-embedder: {path} has {len(pairs)} pair(s); "
                 "in-batch negatives need at least 2")
    return pairs


def batches(pairs, size, rng):
    """The pairs shuffled into batches in which no heading repeats (its
    other chunk would count as a negative); a pair that would repeat one
    waits for the next batch."""
    order = pairs[:]
    rng.shuffle(order)
    while order:
        batch, seen, rest = [], set(), []
        for pair in order:
            if len(batch) < size and pair[0] not in seen:
                batch.append(pair)
                seen.add(pair[0])
            else:
                rest.append(pair)
        order = rest
        if len(batch) < 2:   # only repeats of one heading are left
            break
        yield batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the base model's directory")
    ap.add_argument("--pairs", required=True, help="the pairs (JSON lines)")
    ap.add_argument("--out", required=True, help="the tuned model's directory")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--max-pairs", type=int, default=0,
                    help="train on the first N pairs only (0: all)")
    a = ap.parse_args()
    if a.epochs < 1 or a.batch < 2 or a.lr <= 0 or a.max_pairs < 0:
        sys.exit("tune-embedder: --epochs >= 1, --batch >= 2, --lr > 0, --max-pairs >= 0")
    try:
        import torch
        from safetensors.torch import load_file, save_file
        from transformers import BertConfig, BertModel, BertTokenizerFast
    except ImportError as e:
        sys.exit(f"tune-embedder: {e.name or e} is not installed: "
                 "pip install torch transformers safetensors")

    base_model = os.path.join(a.base, "model.safetensors")
    base_vocab = os.path.join(a.base, "vocab.txt")
    for f in (base_model, base_vocab):
        if not os.path.isfile(f):
            sys.exit(f"tune-embedder: {f} not found (the base model: 'kb model fetch')")
    pairs = read_pairs(a.pairs, a.max_pairs)
    device = a.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=1536,
                     max_position_embeddings=512, type_vocab_size=2,
                     layer_norm_eps=1e-12, hidden_act="gelu")
    model = BertModel(cfg, add_pooling_layer=False)
    base = load_file(base_model)
    weights = {k: v.float() for k, v in base.items() if v.is_floating_point()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing:
        sys.exit(f"tune-embedder: {base_model} lacks {', '.join(missing)}")
    model.to(device).train()
    tok = BertTokenizerFast(base_vocab, do_lower_case=True)

    def embed(texts):
        t = tok(texts, padding=True, truncation=True, max_length=MAX_LEN,
                return_tensors="pt").to(device)
        h = model(**t).last_hidden_state
        m = t["attention_mask"].unsqueeze(-1).float()
        e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, dim=-1)

    # every epoch's batches drawn first, so the schedule knows the steps
    plan = [b for _ in range(a.epochs) for b in batches(pairs, a.batch, rng)]
    steps = len(plan)
    warm = max(1, steps // 10)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))
    say(f"{len(pairs)} pairs, {a.epochs} epoch(s), {steps} steps of at most "
        f"{a.batch}, on {device}")
    t0 = time.time()
    recent = []   # the last 10 steps' losses: what the manifest reports
    for step, batch in enumerate(plan, 1):
        q = embed([b[0] for b in batch])
        p = embed([b[1] for b in batch])
        labels = torch.arange(len(batch), device=device)
        loss = torch.nn.functional.cross_entropy(SCALE * q @ p.T, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        recent = (recent + [loss.item()])[-10:]
        if step % 10 == 0 or step == 1 or step == steps:
            say(f"step {step}/{steps}: loss {sum(recent) / len(recent):.4f} "
                f"(last {len(recent)}), {time.time() - t0:.0f} s")
    seconds = time.time() - t0

    os.makedirs(a.out, exist_ok=True)
    tuned = {k: v.detach().cpu().float().contiguous()
             for k, v in model.state_dict().items()}
    for k, v in base.items():   # what is not trained (position_ids) as it was
        tuned.setdefault(k, v)
    out_model = os.path.join(a.out, "model.safetensors")
    out_vocab = os.path.join(a.out, "vocab.txt")
    out_manifest = os.path.join(a.out, "tuned.json")
    tmp = f".tmp.{os.getpid()}"
    save_file({k: tuned[k] for k in base}, out_model + tmp, metadata={"format": "pt"})
    shutil.copyfile(base_vocab, out_vocab + tmp)
    manifest = {
        "base": "all-MiniLM-L6-v2",
        "base_sha256": sha256(base_model),
        "sha256": sha256(out_model + tmp),
        "pairs": len(pairs),
        "epochs": a.epochs, "batch": a.batch, "lr": a.lr, "seed": a.seed,
        "steps": steps, "final_loss": round(sum(recent) / len(recent), 4),
        "seconds": round(seconds, 1), "device": device,
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(out_manifest + tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    # the manifest last: a directory holds a tuned model once it is there
    if os.path.exists(out_manifest):
        os.unlink(out_manifest)
    os.replace(out_model + tmp, out_model)
    os.replace(out_vocab + tmp, out_vocab)
    os.replace(out_manifest + tmp, out_manifest)
    say(f"{steps} steps in {seconds:.1f} s; wrote {a.out}")
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
