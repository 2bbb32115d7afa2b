/* gupswin_mpi: the MP design of GUPS over windows (SpaceJMP Figure 8; gupswin.h). One MPI
 * process per window holds that window in its own memory; rank 0, which also holds window
 * 0, runs the batched update stream and sends each batch for another window to its owner
 * as one message, then waits for the owner's answer before going on (the paper's master
 * "blocks, waiting for the slave to apply the batch"). After each run every rank verifies
 * its window (HPCC's rule, gups_verify_part) and rank 0 adds the counts up.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np W gupswin_mpi --window-log2 L
 *       [--batches 16,64] [--ms MS] [--max-updates N] [--repeats R]
 *
 * W (the number of ranks) is the number of windows. Rank 0 prints the same JSON lines as
 * bench_gupswin's other designs (gupswin_emit(), design "mp"); exit 1 when a verification
 * failed, 2 on bad arguments. More ranks than cores is oversubscription: Open MPI then
 * yields in its polling loops instead of spinning.
 */
#include "gupswin.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_BATCH = 1, TAG_ANSWER, TAG_VERIFY, TAG_QUIT };

struct master {
    uint64_t *part; /* window 0 */
    unsigned window_log2;
};

static int mp_apply(void *ctx, unsigned w, const uint64_t *values, unsigned count,
                    struct gupswin_result *res)
{
    struct master *m = ctx;
    if (w == 0) {
        gupswin_apply(m->part, m->window_log2, values, count);
        return 0;
    }
    uint64_t t0 = gupswin_now_ns();
    MPI_Comm world = MPI_COMM_WORLD;
    if (MPI_Send(values, (int)count, MPI_UINT64_T, (int)w, TAG_BATCH, world) != MPI_SUCCESS ||
        MPI_Recv(NULL, 0, MPI_BYTE, (int)w, TAG_ANSWER, world, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return exomem_set_error(EXO_EIO, "gupswin_mpi: sending a batch to rank %u failed", w);
    res->change_ns += gupswin_now_ns() - t0;
    res->changes++;
    return 0;
}

/* Every rank: verify its window after a run of `updates`; rank 0 gets the sum. */
static uint64_t verify_all(uint64_t *part, const struct gupswin_config *cfg, int rank,
                           uint64_t updates)
{
    uint64_t len = UINT64_C(1) << cfg->window_log2;
    uint64_t mine = gups_verify_part(part, gupswin_table_log2(cfg), updates,
                                     (uint64_t)rank * len, len), sum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    return sum;
}

/* Ranks other than 0: apply batches, answer, verify, until told to quit. */
static void serve(uint64_t *part, const struct gupswin_config *cfg, int rank)
{
    static uint64_t buf[GUPSWIN_MAX_BATCH];
    for (;;) {
        MPI_Status st;
        MPI_Recv(buf, GUPSWIN_MAX_BATCH, MPI_UINT64_T, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        int count = 0;
        MPI_Get_count(&st, MPI_UINT64_T, &count);
        if (st.MPI_TAG == TAG_BATCH) {
            gupswin_apply(part, cfg->window_log2, buf, (unsigned)count);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ANSWER, MPI_COMM_WORLD);
        } else if (st.MPI_TAG == TAG_VERIFY) {
            verify_all(part, cfg, rank, buf[0]);
        } else {
            return;
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: mpirun -np WINDOWS gupswin_mpi --window-log2 L [--batches 16,64] "
                    "[--ms MS] [--max-updates N] [--repeats R]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct gupswin_config cfg = { .windows = (unsigned)size, .window_log2 = 0, .batch = 16 };
    unsigned batches[8] = { 16, 64 }, nbatches = 2;
    uint64_t ms = 200;
    int repeats = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--window-log2") == 0) {
            cfg.window_log2 = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--batches") == 0) {
            nbatches = 0;
            for (char *s = (char *)v, *end; *s && nbatches < 8; s = *end ? end + 1 : end) {
                batches[nbatches++] = (unsigned)strtoul(s, &end, 10);
                if (end == s)
                    break;
            }
        } else if (strcmp(a, "--ms") == 0) {
            ms = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--max-updates") == 0) {
            cfg.max_updates = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--repeats") == 0) {
            repeats = atoi(v);
        } else {
            argc = 0; /* unknown option */
        }
    }
    cfg.max_ns = ms * 1000000u;
    bool ok = argc % 2 == 1 && repeats > 0 && nbatches > 0 && gupswin_check(&cfg) == 0;
    for (unsigned b = 0; b < nbatches; b++) {
        cfg.batch = batches[b];
        ok = ok && gupswin_check(&cfg) == 0;
    }
    if (!ok) {
        if (rank == 0) {
            fprintf(stderr, "gupswin_mpi: %s\n", exomem_last_error());
            usage();
        }
        MPI_Finalize();
        return 2;
    }
    uint64_t len = UINT64_C(1) << cfg.window_log2;
    uint64_t *part = aligned_alloc(4096, len * sizeof(uint64_t));
    if (!part) {
        fprintf(stderr, "gupswin_mpi: rank %d: no memory for its window\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    gups_init_part(part, (uint64_t)rank * len, len);
    int failed = 0;
    if (rank != 0) {
        serve(part, &cfg, rank);
    } else {
        struct master m = { part, cfg.window_log2 };
        struct gupswin_design design = { mp_apply, &m };
        uint64_t *pending = malloc(sizeof(uint64_t) * GUPSWIN_MAX_BATCH * cfg.windows);
        unsigned fill[GUPSWIN_MAX_WINDOWS];
        if (!pending)
            MPI_Abort(MPI_COMM_WORLD, 1);
        char note[96];
        snprintf(note, sizeof note, "%d MPI processes", size);
        for (int r = 0; r < repeats && !failed; r++) {
            for (unsigned b = 0; b < nbatches && !failed; b++) {
                cfg.batch = batches[b];
                struct gupswin_result res;
                if (gupswin_drive(&cfg, &design, pending, fill, &res) != 0) {
                    fprintf(stderr, "gupswin_mpi: %s\n", exomem_last_error());
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                for (int w = 1; w < size; w++)
                    MPI_Send(&res.updates, 1, MPI_UINT64_T, w, TAG_VERIFY, MPI_COMM_WORLD);
                uint64_t errors = verify_all(part, &cfg, 0, res.updates);
                failed |= !gupswin_emit(stdout, "mp", &cfg, &res, errors, note);
            }
        }
        for (int w = 1; w < size; w++)
            MPI_Send(NULL, 0, MPI_BYTE, w, TAG_QUIT, MPI_COMM_WORLD);
        free(pending);
    }
    free(part);
    MPI_Finalize();
    return failed;
}
