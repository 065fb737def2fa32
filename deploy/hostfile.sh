#!/usr/bin/env bash
# Writes a kfrun hostfile ("IP slots=N" a line) from the private IPs of a cluster's VMs.
#
#   deploy/hostfile.sh SLOTS [FILE]
#
# FILE (or stdin) is either the JSON of `az vm list-ip-addresses -o json` (VMs in name order;
# each VM's first private IP) or plain text with one IPv4 address per line (# comments). SLOTS is
# the workers per VM (its GPUs). Exit 2 with the reason on bad input: a bad SLOTS, no VM, a VM
# without a private IP, an address that is not IPv4, the same address twice.
set -euo pipefail

usage() {
  sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
(($# >= 1 && $# <= 2)) || usage
slots=$1
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || { echo "hostfile.sh: SLOTS '$slots': expected a positive integer" >&2; exit 2; }
input="${2:--}"
if [[ "$input" != - && ! -r "$input" ]]; then
  echo "hostfile.sh: cannot read $input" >&2
  exit 2
fi

# The program comes as an argument: stdin is the input.
read -r -d '' program <<'PY' || true
import ipaddress, json, sys

slots, path = sys.argv[1], sys.argv[2]
text = sys.stdin.read() if path == "-" else open(path).read()
where = "stdin" if path == "-" else path

def die(msg):
    sys.stderr.write(f"hostfile.sh: {where}: {msg}\n")
    sys.exit(2)

def ipv4(text, what):
    try:
        return str(ipaddress.IPv4Address(text.strip()))
    except ValueError:
        die(f"{what}: '{text.strip()}' is not an IPv4 address")

ips = []
if text.lstrip().startswith("["):
    try:
        vms = json.loads(text)
    except json.JSONDecodeError as e:
        die(f"not valid JSON: line {e.lineno} column {e.colno}: {e.msg}")
    rows = []
    for i, entry in enumerate(vms):
        vm = entry.get("virtualMachine", {}) if isinstance(entry, dict) else {}
        name = vm.get("name", f"entry {i + 1}")
        private = (vm.get("network") or {}).get("privateIpAddresses") or []
        if not private:
            die(f"VM {name} has no private IP address")
        rows.append((name, ipv4(private[0], f"VM {name}")))
    ips = [ip for _, ip in sorted(rows)]
else:
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            ips.append(ipv4(line, f"line {n}"))
if not ips:
    die("no VM / address found")
seen = set()
for ip in ips:
    if ip in seen:
        die(f"{ip} is listed twice")
    seen.add(ip)
for ip in ips:
    print(f"{ip} slots={slots}")
PY
exec /usr/bin/python3 -c "$program" "$slots" "$input"
