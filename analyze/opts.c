/* opts.c: command-line option helpers shared by the subcommands (analyze.h). */
#include "analyze.h"
#include "trace.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

int d9__parse_id(const char *opt, const char *v, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (*end || end == v || n < 0 || n > UINT32_MAX) {
		fprintf(stderr, "d9-analyze: %s: want a number, not '%s'\n", opt, v);
		return -1;
	}
	*out = n;
	return 0;
}

int d9__opt_window(int argc, char **argv, int *i, struct d9__trace *t, long *pid)
{
	const char *v;
	int r;

	if (pid && (r = d9__opt(argc, argv, i, "--pid", &v)) != 0)
		return r < 0 || d9__parse_id("--pid", v, pid) ? -1 : 1;
	if ((r = d9__opt(argc, argv, i, "--from", &v)) != 0) {
		if (r > 0 && d9__parse_when(v, &t->from)) {
			fprintf(stderr, "d9-analyze: --from: bad time '%s'\n", v);
			return -1;
		}
		return r;
	}
	if ((r = d9__opt(argc, argv, i, "--to", &v)) != 0) {
		if (r > 0 && d9__parse_when(v, &t->to)) {
			fprintf(stderr, "d9-analyze: --to: bad time '%s'\n", v);
			return -1;
		}
		return r;
	}
	return 0;
}

int d9__trace_start(struct d9__trace *t, char **args, int nargs)
{
	int err = d9__trace_open(t, args, nargs);

	free(args);
	if (err) {
		fprintf(stderr, "d9-analyze: out of memory\n");
		d9__trace_close(t);
		return D9_EXIT_NO_TRACE;
	}
	if (!t->readable) {
		fprintf(stderr, "d9-analyze: no readable trace segment in the input\n");
		d9__trace_close(t);
		return D9_EXIT_NO_TRACE;
	}
	return 0;
}

int d9__opt_arg(const char *cmd, char *arg, char **args, int *nargs)
{
	if (arg[0] == '-' && arg[1]) {
		fprintf(stderr, "d9-analyze: %s: unknown option '%s'\n", cmd, arg);
		return -1;
	}
	args[(*nargs)++] = arg;
	return 0;
}

int d9__opt_traces(const char *cmd, int nargs)
{
	if (nargs)
		return 0;
	fprintf(stderr, "d9-analyze: %s: no TRACE given\n", cmd);
	return -1;
}
