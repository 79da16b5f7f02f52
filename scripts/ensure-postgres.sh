#!/usr/bin/env bash
# Make sure a PostgreSQL server answers on 127.0.0.1:5432 with trust auth and a `test` database,
# installing Debian's package and starting a cluster if it must. Tests never skip PostgreSQL.
set -euo pipefail

ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if ! command -v pg_isready >/dev/null 2>&1 || ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
  echo "PostgreSQL is not installed: installing Debian's package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi

if ! ready; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  conf=/etc/postgresql/$version/main
  # Trust auth on loopback, as the tests expect (idempotent).
  if ! grep -q "pressloop-test" "$conf/pg_hba.conf"; then
    sed -i '1i host all all 127.0.0.1/32 trust # pressloop-test\nlocal all all trust # pressloop-test' "$conf/pg_hba.conf"
  fi
  echo "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do ready && break; sleep 1; done
fi

ready || { echo "PostgreSQL did not start" >&2; exit 1; }
psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -c "CREATE DATABASE test" >/dev/null
echo "PostgreSQL is ready on 127.0.0.1:5432"
