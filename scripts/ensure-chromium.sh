#!/usr/bin/env bash
# Make sure Debian's Chromium is installed: the admin UI's end-to-end tests drive it with
# Playwright (Playwright's own browser download cannot reach its servers from here).
# Idempotent and quiet when it is already there.
set -euo pipefail

[[ -x /usr/bin/chromium ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "Chromium is missing; install it as root with: apt-get install -y chromium" >&2
  exit 1
fi
echo "installing Debian's chromium for the UI tests"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --version
