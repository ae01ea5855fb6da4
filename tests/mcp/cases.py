"""Runs the MCP exchanges of tests/mcp/cases/ against `kb mcp`: each
NAME.in (the lines a client sends, bytes as they are) is fed to one
`kb mcp` on stdin, and its stdout must hold exactly the replies that
NAME.expected describes, each valid under the protocol's schema.

NAME.expected: '#' comments, one 'version: V' line (the schema the replies
are checked against), optionally one 'args: ...' line (kb mcp's options,
{top} standing for the repository; default --no-skills), then one pattern
a reply, in order. A pattern is
JSON that the reply must contain: objects match key by key (other keys
may be there), arrays element by element (same length), other values
equal; the string "<absent>" says the key must not be there, "<any>" that
it must, and "~text" matches a string that contains text.

  python3 cases.py KB_BIN KB_DIR CASES_DIR
"""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpcheck  # noqa: E402


def match(pattern, value, path="reply"):
    """None when value matches pattern, else what differs."""
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return f"{path}: wanted an object, got {json.dumps(value)[:200]}"
        for k, p in pattern.items():
            if p == "<absent>":
                if k in value:
                    return f"{path}.{k}: wanted absent, got {json.dumps(value[k])[:200]}"
                continue
            if k not in value:
                return f"{path}.{k}: missing"
            why = match(p, value[k], f"{path}.{k}")
            if why:
                return why
        return None
    if isinstance(pattern, list):
        if not isinstance(value, list) or len(value) != len(pattern):
            return f"{path}: wanted {len(pattern)} items, got {json.dumps(value)[:200]}"
        for i, (p, v) in enumerate(zip(pattern, value)):
            why = match(p, v, f"{path}[{i}]")
            if why:
                return why
        return None
    if pattern == "<any>":
        return None
    if isinstance(pattern, str) and pattern.startswith("~"):
        if isinstance(value, str) and pattern[1:] in value:
            return None
        return f"{path}: wanted a string holding {pattern[1:]!r}, got {json.dumps(value)[:200]}"
    if pattern != value or type(pattern) is not type(value):
        return f"{path}: wanted {json.dumps(pattern)}, got {json.dumps(value)[:200]}"
    return None


def run_case(kb_bin, kb_dir, path_in):
    name = os.path.basename(path_in)[:-3]
    with open(path_in, "rb") as f:
        sent = f.read()
    version, patterns, args = None, [], ["--no-skills"]
    with open(path_in[:-3] + ".expected") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("version:"):
                version = line.split(":", 1)[1].strip()
            elif line.startswith("args:"):
                top = os.environ.get("KB_TOP", ".")
                args = line.split(":", 1)[1].replace("{top}", top).split()
            else:
                patterns.append(json.loads(line))
    assert version, f"{name}: no 'version:' line"
    p = subprocess.run([kb_bin, "--kb", kb_dir, "mcp", *args], input=sent,
                       capture_output=True, timeout=120)
    if p.returncode != 0:
        return f"{name}: kb mcp exited {p.returncode}: {p.stderr.decode(errors='replace')}"
    wrote = p.stdout.decode("utf-8").splitlines()
    try:
        msgs = mcpcheck.check_transcript(
            version, sent.decode("utf-8", errors="replace").splitlines(), wrote)
    except AssertionError as e:
        return f"{name}: {e}"
    if len(msgs) != len(patterns):
        return (f"{name}: {len(msgs)} replies, wanted {len(patterns)}:\n  " +
                "\n  ".join(line[:300] for line in wrote))
    for i, (pat, msg) in enumerate(zip(patterns, msgs)):
        why = match(pat, msg)
        if why:
            return f"{name}: reply {i + 1}: {why}"
    return None


def main():
    kb_bin, kb_dir, cases = sys.argv[1:4]
    mcpcheck.skip_without_schemas()
    failed = 0
    paths = sorted(glob.glob(os.path.join(cases, "*.in")))
    assert paths, f"no cases in {cases}"
    for path in paths:
        why = run_case(kb_bin, kb_dir, path)
        if why:
            failed += 1
            print("FAIL", why)
        else:
            print("ok  ", os.path.basename(path)[:-3])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
