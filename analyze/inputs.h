/* inputs.h: turns command-line TRACE arguments (files and directories) into a list of segment
 * files, in a stable order. */
#ifndef D9_ANALYZE_INPUTS_H
#define D9_ANALYZE_INPUTS_H
#include <stddef.h>

struct d9__inputs {
	char **paths;
	size_t n;
	int every_file; /* set before expanding: keep X.bin next to X.bin.gz (dump shows files) */
};

/* Expands files and directories (their *.bin, *.bin.gz and *.active entries that are regular
 * files, sorted by name; not recursive; X.bin left out next to X.bin.gz unless every_file). Returns 0 or a negative errno; unreadable arguments are reported on stderr
 * and counted in *bad. */
int d9__inputs_expand(struct d9__inputs *in, char **args, int nargs, int *bad);
void d9__inputs_free(struct d9__inputs *in);
/* analyze/s3.c: downloads the selected segments of s3://BUCKET/PREFIX into a new temporary
 * directory (its path into dir; removed at exit). Weak: the unit tests link no libcurl.
 * Failed listings and downloads are said on stderr and counted in *bad. Returns 0, 1 (nothing
 * fetched: said) or -errno. */
int d9__s3_fetch(const char *url, char *dir, size_t cap, int *bad) __attribute__((weak));
#endif
