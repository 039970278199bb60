#!/usr/bin/env bash
# vigie and Prometheus blackbox_exporter side by side on the same local HTTPS
# targets, plus the bare TLS handshake floor. One command:
#
#   benches/compare.sh [N [CONCURRENCY [ROUNDS]]]     (defaults 1000 50 3)
#
# Installs Debian's prometheus-blackbox-exporter if it is missing (apt-get,
# as root or through sudo), then runs `cargo bench --bench compare`.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-1000}"
CONCURRENCY="${2:-50}"
ROUNDS="${3:-3}"

if [ -z "${BLACKBOX:-}" ] && ! command -v prometheus-blackbox-exporter >/dev/null 2>&1; then
    echo "installing prometheus-blackbox-exporter (Debian package)..." >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    log="$(mktemp)"
    if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends prometheus-blackbox-exporter; } >"$log" 2>&1; then
        cat "$log" >&2
        exit 1
    fi
    rm -f "$log"
    # The package enables a system service on port 9115; the benchmark starts
    # its own exporter on a free loopback port, so stop the service if it
    # was started (it would only add load).
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus-blackbox-exporter 2>/dev/null; then
        $SUDO systemctl stop prometheus-blackbox-exporter || true
    fi
fi

# N targets need N descriptors in the targets process (plus one per open
# connection in each client): raise the soft limit if it is low.
want=$((2 * N + 1024))
soft="$(ulimit -Sn)"
if [ "$soft" != "unlimited" ] && [ "$soft" -lt "$want" ]; then
    hard="$(ulimit -Hn)"
    if [ "$hard" != "unlimited" ] && [ "$hard" -lt "$want" ]; then want="$hard"; fi
    ulimit -Sn "$want" || echo "warning: cannot raise the open-files limit to $want" >&2
fi

# Build first, so the compiler is not running while the tools are measured.
cargo bench --bench compare --no-run
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec cargo bench --bench compare -- "$N" "$CONCURRENCY" "$ROUNDS"
