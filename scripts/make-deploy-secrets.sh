#!/usr/bin/env bash
# Why: docker-compose.yml reads its secrets from files in deploy/secrets/
# (git-ignored), which this makes: the clients' bearer token (auth-token)
# and the workers' join token (join-token; the coordinator refuses to start
# when both are equal), passed as compose secrets, and Grafana's admin
# password (grafana.env, an environment file). Files that already exist are
# kept, so running it again changes nothing; --force makes new ones
# (recreate the stack afterwards).
#
#   scripts/make-deploy-secrets.sh [--force] [DIR]    (DIR: deploy/secrets)
#
# Files are mode 0600. Compose mounts file secrets as they are (it cannot
# change their owner or mode), which is why the mixtrain containers run as
# root: they can read a 0600 file of any owner.
set -euo pipefail

force=0
if [ "${1:-}" = --force ]; then
  force=1
  shift
fi
dir=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/secrets}

random_token() {
  if command -v openssl >/dev/null 2>&1; then
    openssl rand -hex 32
  else
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n'
    echo
  fi
}

umask 077
mkdir -p "$dir"
for name in auth-token join-token grafana.env; do
  file=$dir/$name
  if [ -s "$file" ] && [ "$force" -eq 0 ]; then
    echo "make-deploy-secrets: keeping $file"
    continue
  fi
  if [ "$name" = grafana.env ]; then
    echo "GF_SECURITY_ADMIN_PASSWORD=$(random_token)" >"$file.tmp"
  else
    random_token >"$file.tmp"
  fi
  mv "$file.tmp" "$file"
  echo "make-deploy-secrets: wrote $file"
done
