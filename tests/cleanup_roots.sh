#!/usr/bin/env bash
# Remove the registries (/dev/shm/exomem-test-<pid>-XXXXXX) of tests that died before their
# own cleanup ran. A registry whose creating process is still alive is in use (perhaps by
# another ctest run) and is left alone.
for dir in /dev/shm/exomem-test-*; do
  [ -d "$dir" ] || continue
  pid=${dir#/dev/shm/exomem-test-}
  pid=${pid%%-*}
  case $pid in ''|*[!0-9]*) continue ;; esac
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "removing $dir, left by dead process $pid"
    # A registry may hold its private huge page mounts (mnt/thp, mnt/2M, mnt/1G): unmount
    # them first, or rm cannot remove them and their huge pages stay taken.
    awk -v r="$dir/" 'index($2, r) == 1 { print $2 }' /proc/mounts | while read -r m; do
      umount -l "$m" 2>/dev/null
    done
    rm -rf "$dir"
  fi
done
exit 0
