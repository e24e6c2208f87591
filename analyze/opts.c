/* opts.c: command-line option helpers shared by the subcommands (analyze.h). */
#include "analyze.h"

#include <stdio.h>
#include <string.h>

int d9__opt(int argc, char **argv, int *i, const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (strncmp(a, name, n))
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n])
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "d9-analyze: %s needs a value\n", name);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}
