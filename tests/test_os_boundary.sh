#!/usr/bin/env bash
# src/os is the only code that calls the kernel (src/os/os.h's contract): fail on any
# system call made from another file under src/. src/config.c alone reads the environment.
set -u
src=${EXOMEM_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
calls='mmap|munmap|mremap|mprotect|madvise|mincore|mlock|munlock|msync|open|openat|creat|close|read|write|pread|pwrite|readv|writev|lseek|ftruncate|truncate|fallocate|posix_fallocate|fsync|fdatasync|mkdir|rmdir|unlink|unlinkat|link|linkat|symlink|readlink|rename|renameat|stat|fstat|lstat|fstatat|statfs|fstatfs|chmod|fchmod|chown|fchown|lchown|access|opendir|fdopendir|readdir|closedir|flock|fcntl|ioctl|mount|umount|umount2|syscall|userfaultfd|memfd_create|fork|vfork|clone|execve|kill|tgkill|raise|sigaction|signal|sigprocmask|pthread_sigmask|sigaltstack|getpid|gettid|getuid|geteuid|getgid|getegid|setuid|setgid|sysconf|getpagesize|sched_yield|nanosleep|usleep|sleep|poll|select|epoll_wait|eventfd|pipe|pipe2|dup|dup2|dup3|socket|connect|fopen|fdopen|popen|setmntent|getenv|secure_getenv'
found=$(cd "$src" && grep -rnE "(^|[^A-Za-z0-9_.>])($calls)\(" src --include='*.c' --include='*.h' |
        grep -v '^src/os/' |
        grep -vE '^src/config\.c:[0-9]+:.*\bgetenv\(' |
        grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)')
if [ -n "$found" ]; then
    echo "system calls outside src/os (move them behind a wrapper in src/os):"
    echo "$found"
    exit 1
fi
echo "no system call outside src/os"
