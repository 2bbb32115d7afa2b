#!/usr/bin/env bash
# Run a command with a private, temporary exomem registry, removed afterwards.
set -u
root=$(mktemp -d /dev/shm/exomem-test-$$-XXXXXX)
chmod 1777 "$root"
EXOMEM_ROOT=$root "$@"
rc=$?
# Private huge page mounts of the registry (mnt/thp, mnt/2M, mnt/1G) go first.
awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | while read -r m; do
  umount -l "$m" 2>/dev/null
done
rm -rf "$root"
exit $rc
