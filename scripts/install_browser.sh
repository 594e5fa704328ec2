#!/usr/bin/env bash
# Make sure a Chromium exists for the browser tests (tests/browser/). Safe to run again and again.
#
# We drive Debian's chromium through the Playwright Python package; we never run
# `playwright install` (it downloads a browser build of its own).
#   - Chromium already there (/usr/bin/chromium, or $CHROMIUM): nothing to do.
#   - Missing and we are root with apt-get: install Debian's chromium package.
#   - Otherwise: say what to run, and exit 0 so that the browser tests simply SKIP.
set -euo pipefail

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
    echo "install_browser: using $chromium"
    exit 0
fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get > /dev/null; then
    echo "install_browser: $chromium is missing; installing Debian's chromium package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium > /dev/null
    if [ -x /usr/bin/chromium ]; then
        echo "install_browser: installed /usr/bin/chromium"
        exit 0
    fi
    echo "install_browser: apt-get finished but /usr/bin/chromium is still missing" >&2
    exit 1
fi

echo "install_browser: no Chromium at $chromium and cannot install it here (needs root and apt-get)."
echo "  Debian/Ubuntu: sudo apt-get install chromium    (Ubuntu's package may be chromium-browser)"
echo "  or point CHROMIUM=/path/to/chromium at a Chromium you have."
echo "  Without it the browser tests in tests/browser/ are skipped."
exit 0
