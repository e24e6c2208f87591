/* analyze.h: the subcommands of d9-analyze; main.c dispatches to one file per subcommand.
 * Each returns the process exit status (see main.c for the meaning of each code). */
#ifndef D9_ANALYZE_H
#define D9_ANALYZE_H

enum {
	D9_EXIT_OK = 0,
	D9_EXIT_USAGE = 2, /* bad command line */
	D9_EXIT_NO_TRACE = 3, /* no input could be read as a d9 trace */
	D9_EXIT_DAMAGED = 4, /* output written, but some input was truncated or corrupt */
};

int d9__cmd_dump(int argc, char **argv);
int d9__cmd_summary(int argc, char **argv);
int d9__cmd_polls(int argc, char **argv);
int d9__cmd_requests(int argc, char **argv);
int d9__cmd_jsonl(int argc, char **argv);
int d9__cmd_flame(int argc, char **argv);
int d9__cmd_chrome(int argc, char **argv);
int d9__cmd_html(int argc, char **argv);
int d9__cmd_events(int argc, char **argv);
int d9__cmd_check(int argc, char **argv);
int d9__cmd_pprof(int argc, char **argv);
int d9__cmd_diff(int argc, char **argv);
/* s3.c: `ls s3://...`; d9__s3_args takes --service/--host off the command line and notes
 * absolute --from/--to, which choose what an s3:// input lists (README.md, "S3") */
int d9__cmd_ls(int argc, char **argv);
void d9__s3_args(int *argc, char **argv);

/* Option parsing shared by the subcommands: when argv[*i] is "--name VALUE" or "--name=VALUE",
 * stores VALUE, advances *i past it and returns 1; returns -1 (after a message on stderr) when
 * the value is missing, 0 when argv[*i] is another argument. */
int d9__opt(int argc, char **argv, int *i, const char *name, const char **val);
/* A number for option opt (a pid, a worker id) into *out. Returns 0, or -1 (message printed). */
int d9__parse_id(const char *opt, const char *v, long *out);
struct d9__trace;
/* --pid (when pid is not NULL), --from and --to, which the event-filtering commands share.
 * Returns 1 when argv[*i] was one of them (consumed), 0 when it is none, -1 when its value is
 * bad (message printed). */
int d9__opt_window(int argc, char **argv, int *i, struct d9__trace *t, long *pid);
/* An argument no option of command cmd took: a TRACE, appended to args, or an unknown option
 * (said on stderr). Returns 0, or -1 for an unknown option. */
int d9__opt_arg(const char *cmd, char *arg, char **args, int *nargs);
/* 0 when at least one TRACE was given; else says so on stderr and returns -1. */
int d9__opt_traces(const char *cmd, int nargs);
/* Opens the inputs (frees args) and checks that something is readable. Returns 0, or the exit
 * status after saying why (the trace is then closed). */
int d9__trace_start(struct d9__trace *t, char **args, int nargs);
struct d9__stack;
/* cmd-flame.c: the folded line of a stack (malloc'd; NULL when out of memory): prefix, then the
 * frames outermost first with inlined functions expanded (outermost first too), then call;
 * ';' and control characters in names become '_'. flame and diff --folded. */
char *d9__fold_stack(struct d9__trace *t, const char *prefix, const struct d9__stack *st,
	const char *call);
/* cmd-summary.c: the function of a frame name, its line left out ("f (a.c:12)" -> "f (a.c)"),
 * interned in t: summary's hot spots and diff count per function. */
const char *d9__function_of(struct d9__trace *t, const char *name);
#endif
