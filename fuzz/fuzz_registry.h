/* Shared by the fuzz targets: a private registry made once per fuzzing process, with one
 * real segment ("f", id 1, 1 MiB) and one real VAS ("fv", with the segment attached), whose
 * files the targets overwrite with each input before calling the public API that reads
 * them. */
#ifndef EXOMEM_FUZZ_REGISTRY_H
#define EXOMEM_FUZZ_REGISTRY_H

#include <exomem/exomem.h>
#include <stddef.h>
#include <stdint.h>

extern segid_t fuzz_seg;
extern vasid_t fuzz_vas;

/* Make the registry (once); exits the process if that fails. */
void fuzz_registry_init(void);
/* The path of a registry file ("segs/1", "ids", ...). */
const char *fuzz_path(const char *rel);
/* Replace file rel's contents with data (the file keeps its mode). */
void fuzz_write(const char *rel, const uint8_t *data, size_t size);
/* The bytes of file rel as they are now (the seed), into buf (at most cap); returns size. */
size_t fuzz_read(const char *rel, uint8_t *buf, size_t cap);
/* Seal a record of `size` bytes with the library's exo_record_seal() (nothing below 8
 * bytes), so that mutations reach the checks behind the checksum. */
void fuzz_seal(uint8_t *rec, size_t size);
/* Once per process: when EXOMEM_FUZZ_SEEDS names a directory, write the real file `rel`,
 * behind the mode byte `mode`, into it as a seed input (tests/test_fuzz.sh). */
void fuzz_seed(const char *rel, uint8_t mode);

#endif
