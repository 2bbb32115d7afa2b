#!/usr/bin/env bash
# Run a command with a private, temporary exomem registry, removed afterwards.
set -u
root=$(mktemp -d /dev/shm/exomem-test-$$-XXXXXX)
chmod 1777 "$root"
EXOMEM_ROOT=$root "$@"
rc=$?
rm -rf "$root"
exit $rc
