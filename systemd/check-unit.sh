#!/usr/bin/env bash
# Checks systemd/vigie.service: `systemd-analyze verify` passes and
# `systemd-analyze security` rates it OK or better (exposure <= 2.0).
# Usage: systemd/check-unit.sh PATH_TO_VIGIE_BINARY
set -euo pipefail
binary=$(realpath "$1")
cd "$(dirname "$0")"

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "systemd-analyze not found: installing systemd's tools" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq systemd >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Point ExecStart/ExecStartPre at the binary just built: verify checks that
# the executable exists.
sed "s#/usr/bin/vigie#$binary#g" vigie.service > "$work/vigie.service"

# Documentation= names man:vigie(1): verify looks it up, so the page made
# from this binary is put where man finds it.
mkdir -p "$work/man/man1"
"$binary" generate man --out "$work/man/man1" >/dev/null
MANPATH="$work/man:" systemd-analyze verify "$work/vigie.service"
# --threshold is the exposure level times ten: 20 means "2.0, OK".
if ! report=$(systemd-analyze security --offline=true --threshold=20 "$work/vigie.service" 2>&1); then
    echo "$report" >&2
    echo "vigie.service: exposure above 2.0 (systemd-analyze security)" >&2
    exit 1
fi
echo "vigie.service: $(echo "$report" | grep -o 'Overall exposure level.*')"
