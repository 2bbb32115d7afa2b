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

/* The lazy escape map (EXOMEM_CARAT_PARTS=shadow; shadow.c): a pointer store into slot s
 * first writes the pointer to s - SHADOW_SUB as well, one instruction. Addresses from
 * SHADOW_USER_LO up to the top of user space (where PIE programs, their heaps, mmap and
 * AddressSanitizer's heap, from 0x500000000000, live) have that shadow; the runtime
 * reserves it, without memory behind it, at start-up: [0x110000000000, 0x410000001000),
 * above AddressSanitizer's own shadow. The distance is a multiple of 8 and not of 4096:
 * a slot and its shadow word on the same offset of their pages would compete for the same
 * cache sets, and a load of one after a store to the other waits on the processor's check
 * of the page offset (4K aliasing). */
#define EXO_CARAT_ABI_SHADOW_SUB (0x3f0000000000ull - 0x840)
#define EXO_CARAT_ABI_SHADOW_USER_LO 0x500000000000ull
#define EXO_CARAT_ABI_SHADOW_USER_HI 0x800000000000ull

#endif
