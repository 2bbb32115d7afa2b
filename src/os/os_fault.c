/* Fault injection (os.h, "Injected faults"): the Nth call of one kind fails with a chosen
 * errno, as SQLite's replaceable system-call table lets its tests do. Off, it costs each
 * wrapper one load of exo_os_fault_on and a branch that is never taken. */
#include "os/os.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

int exo_os_fault_on;

static atomic_ulong calls[EXO_FAULT_KINDS];
static int armed_kind = -1;
static unsigned long armed_nth;
static int armed_errno;
static atomic_int fired;

static const char *const kind_names[EXO_FAULT_KINDS] = {
    [EXO_FAULT_OPEN] = "open",       [EXO_FAULT_READ] = "read",
    [EXO_FAULT_WRITE] = "write",     [EXO_FAULT_SIZE] = "size",
    [EXO_FAULT_NAME] = "name",       [EXO_FAULT_MAP] = "map",
    [EXO_FAULT_MOVE] = "move",       [EXO_FAULT_PROTECT] = "protect",
    [EXO_FAULT_LOCK] = "lock",       [EXO_FAULT_MOUNT] = "mount",
    [EXO_FAULT_POOL] = "pool",       [EXO_FAULT_RESIDENT] = "resident",
};

const char *exo_os_fault_kind_name(enum exo_fault_kind kind)
{
    return (unsigned)kind < EXO_FAULT_KINDS ? kind_names[kind] : "?";
}

int exo_os_fault_kind_parse(const char *name)
{
    for (int k = 0; k < EXO_FAULT_KINDS; k++)
        if (kind_names[k] && !strcmp(kind_names[k], name))
            return k;
    return -1;
}

void exo_os_fault_arm(int kind, unsigned long nth, int err)
{
    for (int k = 0; k < EXO_FAULT_KINDS; k++)
        atomic_store(&calls[k], 0);
    atomic_store(&fired, 0);
    armed_kind = kind;
    armed_nth = nth;
    armed_errno = err;
    exo_os_fault_on = 1;
}

void exo_os_fault_disarm(void)
{
    exo_os_fault_on = 0;
    armed_kind = -1;
}

unsigned long exo_os_fault_calls(enum exo_fault_kind kind)
{
    return (unsigned)kind < EXO_FAULT_KINDS ? atomic_load(&calls[kind]) : 0;
}

bool exo_os_fault_fired(void)
{
    return atomic_load(&fired) != 0;
}

bool exo_os_fault_hit(enum exo_fault_kind kind)
{
    unsigned long n = atomic_fetch_add(&calls[kind], 1) + 1;
    if ((int)kind != armed_kind || n != armed_nth)
        return false;
    atomic_store(&fired, 1);
    errno = armed_errno;
    return true;
}
