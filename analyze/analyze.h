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
#endif
