#!/usr/bin/env bash
# Builds the Debian package: target/debian/vigie_<version>-<rev>_amd64.deb
# (under Cargo's target directory), and prints its path as the last line.
#
# Steps: cargo-deb if missing (`cargo install cargo-deb --locked`), the
# release binary, then what the package holds besides it, all made from
# that binary or the repository: the man pages and the bash and zsh
# completions (`vigie generate`, from the CLI's own definition) and the
# packaged config (config.toml with the state under /var/lib/vigie). The
# binary is stripped (`cargo deb --strip`). What goes where is
# [package.metadata.deb] in Cargo.toml; the maintainer scripts are debian/.
#
# `--prebuilt PROFILE` packages the binary Cargo already built in PROFILE
# (e.g. `dev`: target/debug/vigie) instead of building release, into
# target/debian-PROFILE/. The test suite uses it (tests/package.rs): the
# same package around the binary it already has, without a release build
# of several minutes. A package to install is always made without it.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
prebuilt=no
case "${1:-}" in
"") ;;
--prebuilt)
    profile=${2:?"--prebuilt needs a Cargo profile, e.g. dev"}
    prebuilt=yes
    ;;
*)
    echo "usage: $0 [--prebuilt PROFILE]" >&2
    exit 2
    ;;
esac

if ! cargo deb --version >/dev/null 2>&1; then
    echo "cargo-deb not found: installing it (cargo install cargo-deb --locked)" >&2
    cargo install cargo-deb --locked --quiet
fi
for tool in dpkg-deb gzip; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$tool not found: this builds a Debian package on Debian (apt-get install dpkg gzip)" >&2
        exit 1
    fi
done

if [ "$prebuilt" = no ]; then
    cargo build --release --locked --quiet
fi
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
# Cargo's directory for a profile: dev builds into debug/.
built="$target_dir/${profile/#dev/debug}"
if [ ! -x "$built/vigie" ]; then
    echo "$built/vigie not found: build it first (cargo build --profile $profile)" >&2
    exit 1
fi
assets="$built/deb"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"

"$built/vigie" generate man --out "$assets/man" >/dev/null
# -n: no name or time stamp in the gzip header, so the same sources make
# the same package.
gzip -9n "$assets"/man/*.1
"$built/vigie" generate completions bash --out "$assets/completions" >/dev/null
"$built/vigie" generate completions zsh --out "$assets/completions" >/dev/null

# The packaged config is the example config with the state where the unit
# keeps it (StateDirectory=vigie); checks_dir stays relative to it, so
# /etc/vigie/checks.
sed 's#^state_dir = "state" .*#state_dir = "/var/lib/vigie"            \# StateDirectory=vigie of the unit#' \
    config.toml > "$assets/config.toml"
if ! grep -q '^state_dir = "/var/lib/vigie"' "$assets/config.toml"; then
    echo "config.toml: no 'state_dir = \"state\"' line to point at /var/lib/vigie" >&2
    exit 1
fi

# --quiet: warnings only; --no-build: built above (`target/release/` in
# Cargo.toml's assets stands for the profile's directory).
if [ "$prebuilt" = no ]; then
    out="$target_dir/debian"
else
    out="$target_dir/debian-$profile"
fi
mkdir -p "$out"
fast=()
if [ "$prebuilt" = yes ]; then
    # A package for the tests only: cargo-deb's faster, larger compression.
    fast=(--fast)
    # cargo-deb deletes every vigie_*.deb in target/debian whatever its
    # --output: keep the release package a test run would otherwise take.
    kept=$(mktemp -d)
    trap 'mv "$kept"/*.deb "$target_dir/debian/" 2>/dev/null || true; rm -rf "$kept"' EXIT
    mv "$target_dir"/debian/vigie_*.deb "$kept/" 2>/dev/null || true
fi
deb=$(cargo deb --no-build --locked --profile "$profile" --strip --no-dbgsym --quiet "${fast[@]}" --output "$out")
echo "$deb"
