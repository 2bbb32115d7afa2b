/* Registry-level VAS helpers shared by vas.c and the process-level calls. */
#ifndef EXOMEM_VAS_INTERNAL_H
#define EXOMEM_VAS_INTERNAL_H

#include <exomem/vas.h>
#include <sys/stat.h>

int exo_vas_stat(vasid_t vid, struct stat *st);
int exo_vas_fill_info(vasid_t vid, struct vas_info *info);
int exo_vas_set_mode(vasid_t vid, mode_t mode);
int exo_vas_set_heap(vasid_t vid, segid_t sid);

#endif
