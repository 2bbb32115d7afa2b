/* The runtime's layout that the plugin's inline code relies on (llvm/Tracking.cpp appends to
 * the escape log and registers stack objects without a call). Plain numbers, so that the C++
 * plugin can include this file too; carat_internal.h checks each against offsetof, so that a
 * change to the structs that breaks them fails to compile instead of corrupting memory. */
#ifndef EXOMEM_CARAT_ABI_H
#define EXOMEM_CARAT_ABI_H

/* exo_carat (struct carat_runtime) starts with the table's bounds: every tracked
 * allocation lies in [lo, hi). */
#define EXO_CARAT_ABI_RUNTIME_LO 0
#define EXO_CARAT_ABI_RUNTIME_HI 8

/* struct carat_thread: the escape log (entries of a slot, then a value), then its length. */
#define EXO_CARAT_ABI_LOG_CAP 2048
#define EXO_CARAT_ABI_ENTRY_BYTES 16
#define EXO_CARAT_ABI_ENTRY_SLOT 0
#define EXO_CARAT_ABI_ENTRY_VALUE 8
#define EXO_CARAT_ABI_THREAD_N (EXO_CARAT_ABI_LOG_CAP * EXO_CARAT_ABI_ENTRY_BYTES)

/* The thread-local exo_carat_tls (struct carat_tls, initial-exec TLS). */
#define EXO_CARAT_ABI_TLS_THREAD 0
#define EXO_CARAT_ABI_TLS_STACK_LO 8
#define EXO_CARAT_ABI_TLS_STACK_END 16
#define EXO_CARAT_ABI_TLS_STACK_DEPTH 24
#define EXO_CARAT_ABI_TLS_STACK_RELEASED 40
#define EXO_CARAT_ABI_TLS_STACK_OBJS 48
#define EXO_CARAT_ABI_STACK_OBJS 256
#define EXO_CARAT_ABI_STACK_OBJ_BYTES 24
#define EXO_CARAT_ABI_STACK_OBJ_BASE 0
#define EXO_CARAT_ABI_STACK_OBJ_SIZE 8
#define EXO_CARAT_ABI_STACK_OBJ_SITE 16

#endif
