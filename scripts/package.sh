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
set -euo pipefail
cd "$(dirname "$0")/.."

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

cargo build --release --locked --quiet
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
release="$target_dir/release"
assets="$release/deb"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"

"$release/vigie" generate man --out "$assets/man" >/dev/null
# -n: no name or time stamp in the gzip header, so the same sources make
# the same package.
gzip -9n "$assets"/man/*.1
"$release/vigie" generate completions bash --out "$assets/completions" >/dev/null
"$release/vigie" generate completions zsh --out "$assets/completions" >/dev/null

# The packaged config is the example config with the state where the unit
# keeps it (StateDirectory=vigie); checks_dir stays relative to it, so
# /etc/vigie/checks.
sed 's#^state_dir = "state" .*#state_dir = "/var/lib/vigie"            \# StateDirectory=vigie of the unit#' \
    config.toml > "$assets/config.toml"
if ! grep -q '^state_dir = "/var/lib/vigie"' "$assets/config.toml"; then
    echo "config.toml: no 'state_dir = \"state\"' line to point at /var/lib/vigie" >&2
    exit 1
fi

# -q: warnings only; --no-build: built above, with the same profile.
deb=$(cargo deb --no-build --locked --strip --no-dbgsym --quiet)
echo "$deb"
