#!/usr/bin/env bash
# tier: quick
# kb serve on a shared host (issue 28 item 9): a loopback server without a
# token answers every local user, whatever the KB folder's 0700 says, so
# it warns when the host has other people - accounts with a uid from
# UID_MIN (login.defs) that can log in (a login service runs, or /proc
# cannot say: not a container's image accounts), or their processes
# running (serve/host.c; test_serve_host covers made-up hosts) - and names
# how to set a token; with a token it says nothing. Whether this host is
# shared is worked out here by the same rule, independently, from Python's
# pwd and /proc.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
mkdir -p "$KB_TMP/docs"
printf '# Transpose\n\nCoalesced access makes a transpose fast.\n' >"$KB_TMP/docs/t.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/docs"

others=$(python3 - <<'PY'
import os, pwd, re
uid_min = 1000
try:
    for line in open("/etc/login.defs"):
        m = re.match(r"\s*UID_MIN\s+(\d+)", line)
        if m:
            uid_min = int(m.group(1))
except OSError:
    pass
me = os.getuid()
def person(u):
    return u != me and u >= uid_min and u != 65534
accounts = {p.pw_uid for p in pwd.getpwall() if person(p.pw_uid)
            and os.path.basename(p.pw_shell or "/bin/sh") not in ("nologin", "false")}
services = {"sshd", "sshd-session", "dropbear", "systemd-logind", "login", "agetty",
            "getty", "mingetty", "gdm", "gdm3", "lightdm", "sddm", "xrdp", "in.telnetd"}
running, logins, init_seen = set(), False, False
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        status = dict(line.rstrip("\n").split(":", 1) for line in open("/proc/%s/status" % pid)
                      if ":" in line)
        u = int(status["Uid"].split()[0])
    except (OSError, KeyError, ValueError):
        continue
    init_seen |= pid == "1"
    logins |= status.get("Name", "").strip() in services
    if person(u):
        running.add(u)
n = sum(1 for p in pwd.getpwall() if p.pw_uid in accounts) if logins or not init_seen else 0
print(n, len(running))
PY
)
read -r naccounts nrunning <<<"$others"

start_server --no-skills
stop_server
err=$(cat "$KB_TMP/serve.err")
if [ "$naccounts" -gt 0 ] || [ "$nrunning" -gt 0 ]; then
    contains "$err" "without a token on a host with other users ($naccounts other account"
    contains "$err" "$nrunning with processes running now"
    contains "$err" "any of them can read the KB through it"
    contains "$err" "--token-file FILE or KB_SERVE_TOKEN"
else
    lacks "$err" "other users"
fi

# a token: nothing to say
printf 'sekrit\n' >"$KB_TMP/token"
chmod 600 "$KB_TMP/token"
start_server --no-skills --token-file "$KB_TMP/token"
stop_server
lacks "$(cat "$KB_TMP/serve.err")" "other users"
KB_SERVE_TOKEN=sekrit start_server --no-skills
stop_server
lacks "$(cat "$KB_TMP/serve.err")" "other users"
echo ok
