/* hostile-daemon.c: a host that does what real daemons do to descriptors they did not open, for
 * tests/integration/test-agent-hostile.sh. Run under LD_PRELOAD=libd9agent.so (it knows nothing
 * of d9; generic mode). It parks in poll(NULL, 0, 1) in a loop; once an .active segment shows up
 * in --trace-dir it closes every descriptor from 3 to 1023, opens its own log files (and its
 * database file), optionally dup2()s a log onto every number from --fill-high up to 1023 (so the
 * agent's old descriptor number now names the host's file), and appends one known line per log
 * per turn. With --steal, each turn also dup2()s its first log onto every descriptor number that
 * names the trace's .active segment (the agent's, found in /proc/self/fd): the agent must let
 * the number go before the dup2 lands, with no byte of its in the log. Exits 0 when every write
 * of its own succeeded; prints one JSON line with its counts.
 *   hostile-daemon --trace-dir D --log-dir L --turns N [--db FILE] [--fill-high K] [--logs M]
 *                  [--steal] [--sweep loop|closefrom|syscall] [--close-stderr]
 * --sweep: how it closes 3..1023: close() in a loop (the default), closefrom(3), or
 * syscall(SYS_close) in a loop. --close-stderr: the sweep starts at 2, and the database, opened
 * first, gets number 2 (a daemon that dropped its stderr: a line written to "stderr" now lands
 * in its database). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* dup2()s `to` onto every number that names an .active file under dir; returns how many. */
static long steal(const char *dir, int to)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = strlen(dir);
	long stolen = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char p[300], target[4096];
		int fd = atoi(e->d_name);
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(p, target, sizeof(target) - 1);
		if (k <= 0 || fd == to || fd == dirfd(d))
			continue;
		target[k] = 0;
		/* a copy of the log on the agent's number, closed again: the agent's next number is
		 * likely the same one, stolen again next turn */
		if (!strncmp(target, dir, n) && k > 7 && !strcmp(target + k - 7, ".active") &&
			dup2(to, fd) >= 0) {
			stolen++;
			close(fd);
		}
	}
	closedir(d);
	return stolen;
}

static int has_active(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n > 7 && !strcmp(e->d_name + n - 7, ".active");
	}
	closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	const char *trace_dir = NULL, *log_dir = NULL, *db = NULL, *sweep = "loop";
	long turns = 1000, fill_high = 0, nlogs = 3, do_steal = 0, stolen = 0, close_stderr = 0;
	static const struct option opts[] = {
		{ "trace-dir", 1, 0, 't' }, { "log-dir", 1, 0, 'l' }, { "turns", 1, 0, 'n' },
		{ "db", 1, 0, 'd' }, { "fill-high", 1, 0, 'f' }, { "logs", 1, 0, 'm' },
		{ "steal", 0, 0, 's' }, { "sweep", 1, 0, 'w' }, { "close-stderr", 0, 0, 'e' },
		{ 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': trace_dir = optarg; break;
		case 'l': log_dir = optarg; break;
		case 'n': turns = atol(optarg); break;
		case 'd': db = optarg; break;
		case 'f': fill_high = atol(optarg); break;
		case 'm': nlogs = atol(optarg); break;
		case 's': do_steal = 1; break;
		case 'w': sweep = optarg; break;
		case 'e': close_stderr = 1; break;
		default: return 2;
		}
	}
	if (!trace_dir || !log_dir || nlogs < 1 || nlogs > 16) {
		fprintf(stderr, "usage: hostile-daemon --trace-dir D --log-dir L [--turns N] [--db F] "
			"[--fill-high K] [--logs M]\n");
		return 2;
	}
	/* park until the agent has a segment open (60 s at most) */
	long waited = 0;
	while (!has_active(trace_dir) && waited++ < 60000)
		poll(NULL, 0, 1);
	if (!has_active(trace_dir)) {
		fprintf(stderr, "hostile-daemon: no .active segment in %s\n", trace_dir);
		return 3;
	}
	/* what daemons do after start: close everything they did not open themselves */
	int first = close_stderr ? 2 : 3, dbfd = -1;
	if (!strcmp(sweep, "closefrom")) {
		closefrom(first);
	} else {
		for (int fd = first; fd < 1024; fd++)
			if (!strcmp(sweep, "syscall"))
				syscall(SYS_close, fd);
			else
				close(fd);
	}
	if (close_stderr && db && (dbfd = open(db, O_RDWR | O_CLOEXEC)) != 2)
		return 4; /* not at 2 (or not opened): the case tests nothing; no stderr to say it */
	int logs[16];
	for (long i = 0; i < nlogs; i++) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/log%ld.txt", log_dir, i);
		logs[i] = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
		if (logs[i] < 0) {
			fprintf(stderr, "hostile-daemon: %s: %s\n", p, strerror(errno));
			return 4;
		}
	}
	if (db && dbfd < 0 && (dbfd = open(db, O_RDWR | O_CLOEXEC)) < 0) {
		fprintf(stderr, "hostile-daemon: %s: %s\n", db, strerror(errno));
		return 4;
	}
	long filled = 0;
	for (long fd = fill_high; fill_high > 0 && fd < 1024; fd++)
		if (fcntl((int)fd, F_GETFD) < 0 && dup2(dbfd >= 0 && fd % 2 ? dbfd : logs[0], (int)fd) >= 0)
			filled++;
	long lines = 0, parks = waited;
	for (long t = 0; t < turns; t++) {
		poll(NULL, 0, 1);
		parks++;
		if (do_steal)
			stolen += steal(trace_dir, logs[0]);
		for (long i = 0; i < nlogs; i++) {
			char line[64];
			int n = snprintf(line, sizeof(line), "host line %ld of log %ld\n", t, i);
			if (write(logs[i], line, (size_t)n) != n) {
				fprintf(stderr, "hostile-daemon: write: %s\n", strerror(errno));
				return 5;
			}
			lines++;
		}
	}
	printf("{\"parks\":%ld,\"lines\":%ld,\"filled\":%ld,\"stolen\":%ld}\n", parks, lines,
		filled, stolen);
	return 0;
}
