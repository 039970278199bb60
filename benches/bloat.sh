#!/usr/bin/env bash
# The release binary: its size as built and stripped (what the package
# ships: scripts/package.sh strips it), its sections, and what the code
# is made of, the largest crates and functions by cargo-bloat. One
# command:
#
#   benches/bloat.sh [N]     (the N largest crates and functions, default 20)
#
# Installs cargo-bloat if it is missing (`cargo install cargo-bloat
# --locked`). cargo-bloat reads the symbols of the unstripped binary; its
# sizes are of `.text`, the code, and its crate of a function is a guess
# for generic code instantiated in another crate.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-20}"

if ! cargo bloat --version >/dev/null 2>&1; then
    echo "cargo-bloat not found: installing it (cargo install cargo-bloat --locked)" >&2
    cargo install cargo-bloat --locked --quiet
fi
for tool in strip size; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$tool not found (binutils)" >&2
        exit 1
    fi
done

started=$(date +%s)
cargo build --release --locked --quiet
echo "cargo build --release: $(($(date +%s) - started)) s wall (0 s if nothing changed)"

target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
binary="$target_dir/release/vigie"
stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
strip -o "$stripped" "$binary"

bytes() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "release binary: $(bytes "$binary") bytes ($(mib "$(bytes "$binary")")) with line tables for vigie's code"
echo "stripped:       $(bytes "$stripped") bytes ($(mib "$(bytes "$stripped")"))"
echo "largest sections of the stripped binary (size -A):"
size -A "$stripped" | awk 'NR > 2 && $2 > 65536 { printf "  %-20s %10d bytes\n", $1, $2 }' | sort -k2 -nr

echo
echo "largest crates (cargo bloat --release --bin vigie --crates -n $N):"
cargo bloat --release --locked --bin vigie --crates -n "$N"
echo
echo "largest functions (cargo bloat --release --bin vigie -n $N):"
cargo bloat --release --locked --bin vigie -n "$N"
