/* cmd-diff.c: `d9-analyze diff` (in progress). */
#include "analyze.h"

#include <stdio.h>

int d9__cmd_diff(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "d9-analyze: diff: not yet\n");
	return D9_EXIT_USAGE;
}
