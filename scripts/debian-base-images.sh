#!/usr/bin/env bash
# Why: deploy/Dockerfile.cpu builds FROM debian:bookworm and runs in
# debian:bookworm-slim, and a machine whose Docker reaches no registry
# (an air-gapped site, or this project's build machines, which reach only
# Debian's mirror) cannot pull them. This makes both from Debian's own
# packages instead: debootstrap of bookworm (minbase) from the mirror the
# machine's apt already uses, imported as an image. An image already
# present, or one a registry gives, is used as it is.
#
#   scripts/debian-base-images.sh
#
# Needs root, docker and debootstrap (scripts/install-deps.sh --docker).
set -euo pipefail

# The first Debian mirror in the machine's apt sources (deb822 or
# one-line form), else deb.debian.org.
debian_mirror() {
  local found
  found=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /debian\/?$/ && $i !~ /security/) { print $i; exit } }')
  if [[ -z "$found" ]]; then
    found=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  fi
  echo "${found:-http://deb.debian.org/debian}"
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

missing=()
for image in debian:bookworm debian:bookworm-slim; do
  if have_image "$image"; then
    echo "base image $image: present"
  elif timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    echo "base image $image: pulled"
  else
    missing+=("$image")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v debootstrap >/dev/null; then
  echo "debian-base-images: no registry gave ${missing[*]} and debootstrap is missing" \
    "(scripts/install-deps.sh --docker installs it)" >&2
  exit 1
fi
mirror=$(debian_mirror)
root=$(mktemp -d /var/tmp/mixtrain-bookworm.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base images ${missing[*]}: no registry answered; debootstrap bookworm from $mirror"
start=$(date +%s)
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -20 "$root.log" >&2
  rm -f "$root.log"
  echo "debian-base-images: debootstrap failed" >&2
  exit 1
}
rm -f "$root.log"
# What an official image leaves out: package caches and the lists.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
for image in "${missing[@]}"; do
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$image" >/dev/null
  echo "base image $image: made with debootstrap ($(($(date +%s) - start)) s)"
done
