/* The runtime across fork: a child that goes on running instrumented code (a server that
 * forks its workers) has a copy of the heap, so it keeps a copy of the runtime's records
 * of it (carat_mem's mappings and the node arena are inherited, as is the shadow). Two
 * things of the parent's do not carry over: the runtime's lock, if another thread held it
 * at the fork (so the fork waits for it, and both sides release it), and the other
 * threads. Their records stay in the child's list, as the blocks they allocated (their
 * pending rings, their logs) are the child's too; the ranges of their reallocs in flight
 * are dropped, as those will never end there. A mover thread does not carry over either:
 * the child has none, whatever the parent ran, until its first move starts one. */
#include "carat/carat_internal.h"

/* In the order the runtime takes them: a move's request, the mover's state, the table. */
static void before_fork(void)
{
    exo_carat_mover_fork_prepare();
    pthread_mutex_lock(&exo_carat.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_mover_fork_parent();
}

static void after_fork_child(void)
{
    exo_carat_realloc_forget_all();
    pthread_mutex_unlock(&exo_carat.lock);
    exo_carat_mover_fork_child();
}

void exo_carat_fork_init(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
