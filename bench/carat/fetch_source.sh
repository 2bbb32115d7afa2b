#!/bin/sh
# fetch_source.sh PACKAGE CACHE: the Debian 12 source package PACKAGE, unpacked with Debian's
# patches applied, in CACHE/src/PACKAGE (printed on stdout). Cached: a second call finds it
# there and downloads nothing.
#
# The deb-src line is kept in a private apt configuration under CACHE/apt, signed by Debian's
# archive keyring, so the machine's own apt sources are neither needed nor changed.
set -eu
pkg=$1
cache=$2
dest="$cache/src/$pkg"
if [ -f "$dest/.exomem-fetched" ]; then
  echo "$dest"
  exit 0
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || { echo "fetch_source: $keyring missing (apt-get install debian-archive-keyring)" >&2; exit 1; }
command -v dpkg-source >/dev/null || { echo "fetch_source: dpkg-source missing (apt-get install dpkg-dev)" >&2; exit 1; }
apt="$cache/apt"
mkdir -p "$apt/lists/partial" "$cache/download/$pkg"
echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
opts="-o Dir::Etc::SourceList=$apt/sources.list -o Dir::Etc::SourceParts=/dev/null
      -o Dir::State::Lists=$apt/lists -o Dir::Cache=$apt/cache -o APT::Sandbox::User=root"
mkdir -p "$apt/cache/archives/partial"
# One index download per cache (about 50 MB); refreshed only when it is missing.
if ! ls "$apt/lists/"*Sources* >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  apt-get -q $opts update >&2
fi
cd "$cache/download/$pkg"
# shellcheck disable=SC2086
apt-get -q $opts source --download-only "$pkg" >&2
dsc=$(ls ./*.dsc | head -n 1)
rm -rf "$dest.tmp" && mkdir -p "$cache/src"
dpkg-source --no-check -x "$dsc" "$dest.tmp" >&2
touch "$dest.tmp/.exomem-fetched"
mv "$dest.tmp" "$dest"
echo "$dest"
