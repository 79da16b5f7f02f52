#!/usr/bin/env bash
# Make sure Debian's WordPress, PHP and MariaDB packages are installed, so the tests (and
# `make run` without PRESSLOOP_WP_URL) can start a private WordPress on loopback with
# pressloop/local_wordpress/local_site.py. Idempotent and quiet when everything is already there.
# Nothing is started here: each test session starts its own MariaDB and PHP server.
set -euo pipefail

packages=(wordpress wordpress-theme-twentytwentythree php-cli php-mysql mariadb-server)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "missing Debian packages: ${missing[*]}; install them as root with:" >&2
  echo "  apt-get install -y --no-install-recommends ${packages[*]}" >&2
  exit 1
fi

echo "installing Debian packages for the local WordPress: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
started=$(date +%s)
apt-get update -qq
# policy-rc.d 101: the packages must not start the system's own MariaDB or web server.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=1
fi
trap 'if [[ $created_policy -eq 1 ]]; then rm -f "$policy"; fi' EXIT
# (debconf's note that apt-utils is missing is noise; any other message is shown)
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null \
  2> >(grep -v "apt-utils is not installed" >&2)
echo "installed in $(($(date +%s) - started)) s"
