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

cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked
