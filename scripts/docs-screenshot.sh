#!/usr/bin/env bash
# The documentation site as a reader sees it (issue 25 item 6): screenshots of the home page, the API reference,
# the command-line reference and a guide page, taken by headless Chromium (Debian: apt-get install chromium).
#
#   scripts/docs-screenshot.sh [OUT_DIR]      PNGs into OUT_DIR (default /tmp/site), 1280x2000 each
#
# Builds the site first (make docs: strict), unless DOCS_HTML names an already built one.  A page's lower part:
# HEIGHT=12000 gives one tall screenshot per page.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/site}
height=${HEIGHT:-2000}
html=${DOCS_HTML:-}
if [ -z "$html" ]; then
    make -C "$root" --no-print-directory docs
    html=$root/docs/_build/html
fi
html=$(cd "$html" && pwd)

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "docs-screenshot: no Chromium found (apt-get install chromium)" >&2
    exit 1
fi
flags=(--headless --disable-gpu --hide-scrollbars --window-size="1280,$height")
if [ "$(id -u)" = 0 ]; then
    flags+=(--no-sandbox)  # Chromium refuses to run as root with its sandbox
fi

mkdir -p "$out"
shot() {  # NAME PAGE: $out/NAME.png of $html/PAGE
    if [ ! -f "$html/$2" ]; then
        echo "docs-screenshot: $html/$2 was not built" >&2
        return 1
    fi
    "$browser" "${flags[@]}" --screenshot="$out/$1.png" "file://$html/$2" >/dev/null 2>&1
    echo "$out/$1.png  ($2)"
}

shot home index.html
shot api reference/api.html
shot cli reference/cli.html
guide=guide/memory.html
[ -f "$html/$guide" ] || guide=$(cd "$html" && ls guide/*.html 2>/dev/null | head -1)
if [ -n "$guide" ]; then
    shot guide "$guide"
else
    echo "docs-screenshot: no guide page was built (docs/guide/)" >&2
    exit 1
fi
