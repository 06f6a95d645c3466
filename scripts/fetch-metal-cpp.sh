#!/usr/bin/env bash
# Fetch Apple's metal-cpp headers (Apache-2.0) for the C++-wrappers front-end (generator/frontend/objc_cpp.py):
# never vendored, unpacked into an ignored cache directory.  They come inside the pinned `pymetal-cpp` sdist
# (thirdparty/metal-cpp/: Metal/, Foundation/, QuartzCore/, MetalFX/), checked against its sha256.
# Usage: fetch-metal-cpp.sh PYTHON DEST.  Idempotent (a stamp names the pin).  Without the network it says so
# and exits 0: the tests that need the headers skip, naming the reason.
set -euo pipefail
PY=${1:?python}; DEST=${2:?destination}
DIST=pymetal-cpp==0.1.5
SHA256=1118062f635277a2781659fbc4e7e5bac7d565d6948a3461c3b04d6425c15a0e
STAMP="$DEST/.fetched-$DIST"
[ -f "$STAMP" ] && exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! "$PY" -m pip download -q --no-deps --no-binary :all: "$DIST" -d "$tmp" >"$tmp/log" 2>&1; then
    echo "fetch-metal-cpp: could not download $DIST (metal-cpp tests will skip):" >&2; tail -3 "$tmp/log" >&2
    exit 0
fi
sdist=$(ls "$tmp"/pymetal_cpp-*.tar.gz)
echo "$SHA256  $sdist" | sha256sum -c --quiet - || { echo "fetch-metal-cpp: $sdist: sha256 mismatch" >&2; exit 1; }
tar -xzf "$sdist" -C "$tmp" --wildcards '*/thirdparty/metal-cpp/*'
rm -rf "$DEST.new" && mkdir -p "$(dirname "$DEST")"
mv "$tmp"/pymetal_cpp-*/thirdparty/metal-cpp "$DEST.new"
rm -rf "$DEST" && mv "$DEST.new" "$DEST"
touch "$STAMP"
echo "fetch-metal-cpp: $DIST -> $DEST ($(find "$DEST" -name '*.hpp' | wc -l) headers)"
