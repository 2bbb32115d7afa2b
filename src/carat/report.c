/* The per-process report (EXOMEM_CARAT_REPORT=file): at exit, one JSON line with the
 * runtime's counters is appended to the file, so that a test suite of many processes,
 * each built with exomem-cc, leaves one line per process for the evaluation to sum
 * (docs/carat.md). Appended with a single write of one line: processes that exit at the
 * same time do not interleave within a line. */
#include "carat/carat_internal.h"
#include "os/os.h"
#include "internal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The causes' names in the report's "refused_by", in the order of enum exo_carat_refusal. */
static const char *const refusal_names[] = { "no_copy", "logged", "derived", "libc", "altstack" };
_Static_assert(sizeof refusal_names / sizeof refusal_names[0] == EXO_CARAT_REFUSALS,
               "a name for every cause of a refused move");

static void write_report(void)
{
    const char *path = exo_config()->carat_report;
    struct exo_carat_stats st;
    exo_carat_get_stats(&st);
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "{\"allocs_total\":%llu,\"stack_objects\":%llu,\"frees_total\":%llu,"
                     "\"escapes_total\":%llu,\"table_peak_bytes\":%llu,\"guard_slow\":%llu,"
                     "\"moves\":%llu,\"moves_refused\":%llu,\"pinned\":%llu,\"move_ns\":%llu,"
                     "\"peak_rss_bytes\":%llu,\"refused_by\":{",
                     (unsigned long long)st.allocs_total, (unsigned long long)st.stack_objects_total,
                     (unsigned long long)st.frees_total, (unsigned long long)st.escapes_total,
                     (unsigned long long)st.table_peak_bytes, (unsigned long long)st.guard_slow,
                     (unsigned long long)st.moves, (unsigned long long)st.moves_refused,
                     (unsigned long long)st.pinned,
                     (unsigned long long)st.move_ns,
                     (unsigned long long)exo_os_peak_rss_bytes());
    for (int why = 0; why < EXO_CARAT_REFUSALS && n > 0 && (size_t)n < sizeof line; why++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s\"%s\":%llu", why ? "," : "",
                      refusal_names[why], (unsigned long long)st.refused_by[why]);
    if (n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "},\"escape_hist\":[");
    for (int b = 0; b < EXO_CARAT_ESCAPE_BUCKETS && n > 0 && (size_t)n < sizeof line; b++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s%llu", b ? "," : "",
                      (unsigned long long)st.escape_hist[b]);
    if (n > 0 && (size_t)n < sizeof line - 3)
        n += snprintf(line + n, sizeof line - (size_t)n, "]}\n");
    else
        return;
    int fd = exo_os_open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "exomem carat: EXOMEM_CARAT_REPORT=%s: cannot open it\n", path);
        return;
    }
    /* O_APPEND: the offset is ignored, the line goes at the end. */
    if (exo_os_pwrite_all(fd, line, (size_t)n, 0) != 0)
        fprintf(stderr, "exomem carat: EXOMEM_CARAT_REPORT=%s: write failed\n", path);
    exo_os_close(fd);
}

static void register_report(void)
{
    const char *path = exo_config()->carat_report;
    if (path && *path)
        atexit(write_report);
}

void exo_carat_report_at_exit(void)
{
    /* Asked for at start-up by the guards' part and by the rest of the runtime's: one line
     * a process. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_report);
}
