#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need,
# then format check, lints and every test. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install the Rust toolchain (https://rustup.rs) and rerun" >&2
    exit 1
fi
for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
        echo "cargo $tool not found: run 'rustup component add ${tool/fmt/rustfmt}'" >&2
        exit 1
    fi
done

# The CORS tests run a real S3 server: moto (`python3 -m moto.server`).
# Install it unless it is there already: python3 and pip from apt if missing,
# then moto from PyPI. Output is shown only when a step fails.
quietly() {
    local log
    log=$(mktemp)
    if ! "$@" >"$log" 2>&1; then
        echo "failed: $*" >&2
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "need root to run: $* (or install moto yourself: python3 -m pip install 'moto[server]')" >&2
        return 1
    fi
}
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "cannot install $*: no apt-get; install python3, pip and then: python3 -m pip install 'moto[server]'" >&2
        return 1
    fi
    quietly as_root apt-get update -qq
    quietly as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}
if ! python3 -c 'import moto.server' >/dev/null 2>&1; then
    if ! command -v python3 >/dev/null 2>&1; then
        apt_install python3 python3-pip
    fi
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    pip_log=$(mktemp)
    if ! python3 -m pip install --quiet 'moto[server]' >"$pip_log" 2>&1; then
        # Debian's python3 refuses system-wide pip installs (PEP 668) unless told.
        if grep -q externally-managed-environment "$pip_log"; then
            quietly python3 -m pip install --quiet --break-system-packages 'moto[server]'
        else
            echo "failed: python3 -m pip install 'moto[server]'" >&2
            cat "$pip_log" >&2
            rm -f "$pip_log"
            exit 1
        fi
    fi
    rm -f "$pip_log"
    if ! python3 -c 'import moto.server' >/dev/null 2>&1; then
        echo "moto installed but 'python3 -c \"import moto.server\"' still fails" >&2
        exit 1
    fi
fi

# The mail tests and the outbox benchmark run a real SMTP server: aiosmtpd
# (driven by tests/support/smtp_server.py). Same routine as moto: only when
# missing, python3 and pip from apt if need be, then aiosmtpd from PyPI.
if ! python3 -c 'import aiosmtpd' >/dev/null 2>&1; then
    if ! command -v python3 >/dev/null 2>&1; then
        apt_install python3 python3-pip
    fi
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    pip_log=$(mktemp)
    if ! python3 -m pip install --quiet aiosmtpd >"$pip_log" 2>&1; then
        if grep -q externally-managed-environment "$pip_log"; then
            quietly python3 -m pip install --quiet --break-system-packages aiosmtpd
        else
            echo "failed: python3 -m pip install aiosmtpd" >&2
            cat "$pip_log" >&2
            rm -f "$pip_log"
            exit 1
        fi
    fi
    rm -f "$pip_log"
    if ! python3 -c 'import aiosmtpd' >/dev/null 2>&1; then
        echo "aiosmtpd installed but 'python3 -c \"import aiosmtpd\"' still fails" >&2
        exit 1
    fi
fi

# The status-page tests drive a real browser: Debian's headless Chromium
# through chromedriver (WebDriver).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt_install chromium chromium-driver
fi

# aws-lc (the TLS crypto provider) and zstd are C, built with cc: a brand-new
# machine with only the Rust toolchain lacks a C compiler.
if ! command -v cc >/dev/null 2>&1; then
    apt_install build-essential
fi

# The package test (tests/package.rs) installs the package into a
# directory with dpkg, whose postinst makes the vigie user with
# systemd-sysusers, and checks the binary is stripped with readelf
# (binutils, part of build-essential above).
if ! command -v systemd-sysusers >/dev/null 2>&1; then
    apt_install systemd
fi

cargo fmt --all -- --check
cargo clippy --locked --all-targets --features fault-injection -- -D warnings
# The unit tests and the in-process and process test binaries, a thread per
# core: their time is CPU.
cargo test --locked --features fault-injection --lib --bins --test in_process --test process
cargo test --locked --features fault-injection --doc
# The daemon tests spend their time waiting on their daemons' periods, each
# on its own ports and directories: more of them at once than there are
# cores (docs/testing.md).
cargo test --locked --features fault-injection --test daemon -- --test-threads="${VIGIE_DAEMON_TEST_THREADS:-3}"

# The systemd unit: `systemd-analyze verify` and an exposure of 2.0 or less,
# on the binary the tests above built and ran.
target_dir=$(cargo metadata --locked --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
./systemd/check-unit.sh "$target_dir/debug/vigie"
