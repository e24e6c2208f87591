/* main.c: d9-analyze, the offline analyzer. Dispatches to one file per subcommand; without a
 * subcommand (first argument an option or an input path) it runs `summary`.
 * Exit codes: 0 ok, 2 usage, 3 nothing readable as a trace, 4 output written but some input was
 * damaged (truncated or corrupt segments: details on stderr). A segment without a trailer is
 * truncated unless it is the .active file of a process still running on this host (trace.h,
 * d9__segment_live). */
#include "analyze.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct cmd cmds[] = {
	{ "summary", d9__cmd_summary, "where the time went: workers, polls, locations, delays (default)" },
	{ "check", d9__cmd_check, "diagnosis: the problems found, worst first, with what to run next" },
	{ "polls", d9__cmd_polls, "one line per poll, with filters" },
	{ "requests", d9__cmd_requests, "requests (D9_REQUESTS=1), slowest first, with their time split" },
	{ "flame", d9__cmd_flame, "folded stacks of CPU samples or blocking calls, for flame graphs" },
	{ "events", d9__cmd_events, "the application's marks, values and custom events (d9.h)" },
	{ "jsonl", d9__cmd_jsonl, "every event as JSON lines, ids resolved" },
	{ "chrome", d9__cmd_chrome, "Chrome Trace Event JSON for the Perfetto UI" },
	{ "dump", d9__cmd_dump, "every record of segment files as JSON lines, ids unresolved" },
	{ "html", d9__cmd_html, "one self-contained HTML file: the viewer with the trace embedded" },
	{ "pprof", d9__cmd_pprof, "CPU and off-CPU profiles as gzip-compressed pprof protobuf" },
	{ "diff", d9__cmd_diff, "two traces or two time ranges compared, largest changes first" },
	{ "ls", d9__cmd_ls, "what is stored under s3://BUCKET/PREFIX: services, hosts, time span, bytes" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: d9-analyze [COMMAND] [OPTIONS] TRACE...\n\n"
		"TRACE: segment files (.bin, .bin.gz, .active) or directories of them, any mix of\n"
		"processes, or s3://BUCKET/PREFIX (selected with --from/--to/--service/--host).\n"
		"Without a COMMAND, 'summary' runs.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n'd9-analyze COMMAND --help' describes a command's options. --quiet, with any\n"
		"command: no progress line on a terminal.\n"
		"exit status: 0 ok, 2 usage, 3 no readable trace, 4 some input damaged\n");
}

int main(int argc, char **argv)
{
	d9__s3_args(&argc, argv); /* --service/--host select s3:// inputs for every command */
	d9__progress_args(&argc, argv); /* --quiet: no progress line, for every command */
	if (argc < 2) {
		usage(stderr);
		return D9_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return D9_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	/* no command: the default, summary, when the first argument is an option or an input */
	struct stat st;
	if ((argv[1][0] == '-' && argv[1][1]) || stat(argv[1], &st) == 0 || strchr(argv[1], '/') ||
	    strchr(argv[1], '.'))
		return d9__cmd_summary(argc, argv);
	fprintf(stderr, "d9-analyze: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return D9_EXIT_USAGE;
}
