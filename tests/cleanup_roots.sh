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
    rm -rf "$dir"
  fi
done
exit 0
