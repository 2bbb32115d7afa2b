/* Text records for the comppage demonstration, test and benchmark: fixed 256-byte records
 * that look like a small table's rows (key, name, counters, a note), so they compress as
 * such data does (about 3-5x with lz4), and that can be checked after a round trip. */
#ifndef EXOMEM_COMPPAGE_RECORDS_H
#define EXOMEM_COMPPAGE_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#define COMPPAGE_RECORD 256

/* Write record `id` at `version` into out. */
void comppage_record(uint64_t id, uint64_t version, char out[COMPPAGE_RECORD]);

/* Is rec record `id` at `version`? */
bool comppage_record_ok(const char rec[COMPPAGE_RECORD], uint64_t id, uint64_t version);

#endif
