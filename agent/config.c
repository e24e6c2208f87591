/* config.c: the D9_* environment variables and the agent's logging. Configuration is read once,
 * at load; a bad value prints one line naming the variable and the accepted form, and the agent
 * stays off while the host runs normally. README.md ("Configuration") documents every variable. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int d9__log_level = D9_LOG_WARN;

/* Descriptor 2 as the program means it: its stderr when the agent started, or what it dup2'd
 * onto 2 since (nginx: its error log). The agent writes a line to descriptor 2 only while it is
 * that file, or a terminal or other character device: a daemon that closed its stderr may have
 * its database, an append-only file or a client's socket at number 2 later, which a line of the
 * agent's would corrupt. The line is then left out (the trace records the event anyway). Two
 * words stored apart: a reader that sees half of a change skips one line. */
static uint64_t err_dev, err_ino;
enum { ERR_UNSEEN = 0, ERR_KNOWN = 1, ERR_NONE = 2, ERR_CHANGING = 3 };
static int err_state;

void d9__stderr_meant(void)
{
	int saved = errno;
	struct stat st;

	if (!d9__calls_off() && !d9__fd_same_process())
		return; /* a vfork child's dup2 before its exec: not the parent's stderr */
	/* on a thread under a seccomp filter no fstat (a call it may kill at): stderr unseen, the
	 * next line of another thread's looks */
	if (d9__calls_off()) {
		__atomic_store_n(&err_state, ERR_UNSEEN, __ATOMIC_RELEASE);
		errno = saved;
		return;
	}
	int ok = fstat(2, &st) == 0;

	__atomic_store_n(&err_state, ERR_CHANGING, __ATOMIC_RELEASE);
	__atomic_store_n(&err_dev, ok ? (uint64_t)st.st_dev : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&err_ino, ok ? (uint64_t)st.st_ino : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&err_state, ok ? ERR_KNOWN : ERR_NONE, __ATOMIC_RELEASE);
	errno = saved;
}

/* Whether a file (its stat) is the stderr the program means, or a character device. */
static int stderr_meant_is(const struct stat *st)
{
	if (__atomic_load_n(&err_state, __ATOMIC_ACQUIRE) == ERR_UNSEEN)
		d9__stderr_meant(); /* a line before the configuration is read: the start's stderr */
	if (S_ISCHR(st->st_mode))
		return 1; /* a terminal, /dev/null, a console */
	return __atomic_load_n(&err_state, __ATOMIC_ACQUIRE) == ERR_KNOWN &&
		(uint64_t)st->st_dev == __atomic_load_n(&err_dev, __ATOMIC_RELAXED) &&
		(uint64_t)st->st_ino == __atomic_load_n(&err_ino, __ATOMIC_RELAXED);
}

/* Whether fd (descriptor 2, or a copy of the program's) is the stderr the program means. */
static int stderr_ours_at(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && stderr_meant_is(&st);
}

int d9__stderr_ours(void)
{
	if (d9__self.fd_private)
		return 1; /* checked on the copy d9__log takes */
	return stderr_ours_at(2);
}

/* An agent thread with a descriptor table of its own (fdown.c) has /dev/null at 2: a line goes to
 * a copy of the program's descriptor 2, taken for that line only (a lasting copy would keep a
 * pipe the program closes open), under the same checks: pidfd_getfd (Linux 5.6), except under a
 * seccomp filter, which may kill the process at a call it does not list. Otherwise, or where the
 * copy is refused, the file is opened again by its /proc name when it is the program's stderr
 * file or a character device (appending, never blocking; not a pipe, a FIFO or a socket such as
 * journald's, whose lines are then left out). */
static void write_private(const char *line, size_t len)
{
	long fd = -1;
	struct stat st;

	if (!d9__seccomp_filtered()) {
		long pidfd = syscall(SYS_pidfd_open, getpid(), 0);
		if (pidfd >= 0) {
			fd = syscall(SYS_pidfd_getfd, (int)pidfd, 2, 0);
			close((int)pidfd);
		}
	}
	if (fd < 0 && stat("/proc/self/fd/2", &st) == 0 &&
		(S_ISCHR(st.st_mode) || S_ISREG(st.st_mode)) && stderr_meant_is(&st))
		fd = open("/proc/self/fd/2", O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	if (stderr_ours_at((int)fd)) {
		ssize_t w = write((int)fd, line, len);
		(void)w;
	}
	close((int)fd);
}

/* A line to descriptor 2 from one of the program's threads. A program that lowered
 * RLIMIT_FSIZE (OpenSSH's privilege-separated child sets it to 0) gets SIGXFSZ, which ends it, at
 * a write past the limit into a regular file: the agent's line must not be that write. SIGXFSZ
 * is blocked around it, and the one the write raised (EFBIG) is taken back, unless one was
 * pending already (the program's). The agent's own threads block every signal. */
static void write_stderr(const char *line, size_t len)
{
	sigset_t xfsz, old, pending;

	sigemptyset(&xfsz);
	sigaddset(&xfsz, SIGXFSZ);
	int before = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
	if (pthread_sigmask(SIG_BLOCK, &xfsz, &old) != 0)
		return;
	ssize_t w = write(2, line, len);
	if (w < 0 && errno == EFBIG && !before) {
		struct timespec none = { 0, 0 };
		sigtimedwait(&xfsz, NULL, &none);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void d9__log(int level, const char *fmt, ...)
{
	char line[512];
	int saved = errno;

	if (level > d9__log_level || !d9__stderr_ours()) {
		errno = saved;
		return;
	}
	int n = snprintf(line, sizeof(line), "d9[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	if (d9__self.fd_private) {
		write_private(line, len);
	} else {
		write_stderr(line, len);
	}
	errno = saved;
}

/* The strict start of every number: decimal digits only, no space, no sign (strtoull would skip
 * spaces and accept "-1" as 2^64-1). Reads the digits into *v and leaves *end after them.
 * Returns NULL, or what is wrong with s. */
static const char *scan_uint(const char *s, unsigned long long *v, char **end)
{
	if (*s == ' ' || *s == '\t' || *s == '\n')
		return "leading space";
	if (*s == '-' || *s == '+')
		return "a sign is not allowed";
	if (*s < '0' || *s > '9')
		return "no number";
	errno = 0;
	*v = strtoull(s, end, 10);
	if (errno == ERANGE)
		return "too large";
	return NULL;
}

/* What is wrong with the rest of a value after its number and unit. */
static const char *trailing(const char *end)
{
	return strpbrk(end, " \t\n") ? "trailing space" : "unknown unit or trailing characters";
}

/* "64M", "512K", "1G", "1048576" -> bytes. Returns NULL, or what is wrong with s. */
static const char *parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	const char *why = scan_uint(s, &v, &end);

	if (why)
		return why;
	uint64_t mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30;
	if (mul != 1) {
		end++;
		if (!strcmp(end, "B") || !strcmp(end, "iB")) /* tolerate 64MB, 64MiB */
			end += strlen(end);
	}
	if (*end)
		return trailing(end);
	if (v > UINT64_MAX / mul)
		return "too large";
	*out = v * mul;
	return NULL;
}

/* "500us", "100ms", "10s", "5m", "1h", "0" -> ns; a unit is required except for 0. Returns NULL,
 * or what is wrong with s. */
static const char *parse_duration(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	const char *why = scan_uint(s, &v, &end);

	if (why)
		return why;
	uint64_t mul;
	if (!strcmp(end, "us"))
		mul = 1000ull;
	else if (!strcmp(end, "ms"))
		mul = 1000000ull;
	else if (!strcmp(end, "s") || (!*end && v == 0))
		mul = 1000000000ull;
	else if (!strcmp(end, "m"))
		mul = 60000000000ull;
	else if (!strcmp(end, "h"))
		mul = 3600000000000ull;
	else if (!*end)
		return "no unit";
	else
		return trailing(end);
	if (v > UINT64_MAX / mul)
		return "too large";
	*out = v * mul;
	return NULL;
}

/* A plain decimal number ("99"), with no unit. Returns NULL, or what is wrong with s. */
static const char *parse_uint(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	const char *why = scan_uint(s, &v, &end);

	if (why)
		return why;
	if (*end)
		return trailing(end);
	*out = v;
	return NULL;
}

static const char *parse_bool(const char *s, int *out)
{
	if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "on") || !strcasecmp(s, "yes"))
		*out = 1;
	else if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "off") ||
		!strcasecmp(s, "no"))
		*out = 0;
	else
		return "not a boolean";
	return NULL;
}

/* A size or duration that parse_*() has just stored in *v (a pointer: the call's arguments are
 * evaluated in any order) must lie in [min, max]. Returns NULL, or what is wrong. */
static const char *in_range(const char *why, const uint64_t *v, uint64_t min, uint64_t max)
{
	if (why)
		return why;
	if (*v < min)
		return "too small";
	if (*v > max)
		return "too large";
	return NULL;
}

static const char *parse_signal(const char *s, int *out)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "HUP", SIGHUP }, { "WINCH", SIGWINCH },
		{ "URG", SIGURG }, { "PROF", SIGPROF }, { "VTALRM", SIGVTALRM },
	};

	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcasecmp(s, sigs[i].name)) {
			*out = sigs[i].sig;
			return NULL;
		}
	if (!strncasecmp(s, "RTMIN+", 6)) {
		uint64_t n;
		const char *why = parse_uint(s + 6, &n);
		if (why)
			return why;
		if (n > (uint64_t)(SIGRTMAX - SIGRTMIN))
			return "beyond SIGRTMAX";
		*out = SIGRTMIN + (int)n;
		return NULL;
	}
	return "unknown signal";
}

/* Prints the one line about a bad value: the variable, the value, what is wrong with it and the
 * accepted form. The agent then stays off (lifecycle.c). Returns -EINVAL. */
static int bad(const char *var, const char *val, const char *why, const char *form)
{
	d9__log(D9_LOG_ERROR, "invalid %s=\"%s\": %s; expected %s; tracing is off", var, val, why, form);
	return -EINVAL;
}

/* One of names (case-insensitive) into *out (its index). Returns NULL, or what is wrong. */
static const char *parse_word(const char *s, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (!strcasecmp(s, names[i])) {
			*out = i;
			return NULL;
		}
	return "unknown value";
}
#define WORD(s, out, ...) \
	parse_word(s, (const char *const[]){ __VA_ARGS__ }, \
		(int)(sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *)), out)

/* preload/runtimes.c */
int d9__runtime_parse(const char *v) __attribute__((weak));
extern const char d9__runtime_choices[] __attribute__((weak));

int d9__config_load(struct d9__config *c)
{
	const char *v, *why;
	uint64_t n;

	d9__stderr_meant(); /* first: a bad value below is said on it */
	memset(c, 0, sizeof(*c));
	c->max_file_size = 64ull << 20;
	c->max_total_size = 1ull << 30;
	c->max_files = 256;
	c->max_memory = 64ull << 20;
	c->rotation_period_ns = 600ull * 1000000000ull;
	c->flush_interval_ns = 100ull * 1000000ull;
	c->exit_timeout_ns = 100ull * 1000000ull;
	c->compress = D9_COMPRESS_AUTO;
	c->enabled = 1;
	c->log_level = D9_LOG_WARN;
	c->pre.runtime = D9_RUNTIME_AUTO;
	c->pre.blocking = 1;
	c->pre.blocking_threshold_ns = 1000000;
	c->pre.queue_interval_ns = 10000000;
	c->stack_dump = 8192;
	c->profile_signal = SIGURG; /* ignored by default: a program resetting it cannot be killed by it */
	c->symbolize = 1;
	c->symbolize_memory = 8ull << 20;
	c->cmdline = D9_CMDLINE_REDACTED;
	c->flight_window_ns = 60ull * 1000000000ull;
	c->flight_after_ns = 10ull * 1000000000ull;
	c->trigger_cooldown_ns = 60ull * 1000000000ull;

	/* An empty variable counts as unset (a common way to unset one in a unit or env file). */
	if ((v = getenv("D9_LOG")) && *v) {
		if ((why = WORD(v, &c->log_level, "error", "warn", "info", "debug")))
			return bad("D9_LOG", v, why, "error, warn, info or debug");
	}
	d9__log_level = c->log_level;

	if ((v = getenv("D9_TRACE_PATH")) && *v) {
		if (strlen(v) >= sizeof(c->trace_path) - 64)
			return bad("D9_TRACE_PATH", v, "too long", "a path shorter than 1900 bytes");
		snprintf(c->trace_path, sizeof(c->trace_path), "%s", v);
	} else {
		/* per-user directory: writable for an unprivileged user, kept across reboots; named
		 * by the effective uid, the owner the directory check asks for (setuid programs) */
		snprintf(c->trace_path, sizeof(c->trace_path), "/var/tmp/d9-%u/trace.bin",
			(unsigned)geteuid());
	}
	if ((why = d9__path_check(c)))
		return bad("D9_TRACE_PATH", c->trace_path, why,
			"a file path such as /var/tmp/d9/trace.bin, or an existing directory");
	if ((v = getenv("D9_ALLOW_SHARED_DIR")) && *v && (why = parse_bool(v, &c->allow_shared_dir)))
		return bad("D9_ALLOW_SHARED_DIR", v, why, "0 or 1");

	if ((v = getenv("D9_MAX_FILE_SIZE")) && *v &&
		(why = in_range(parse_size(v, &c->max_file_size), &c->max_file_size, 1u << 20, UINT64_MAX)))
		return bad("D9_MAX_FILE_SIZE", v, why, "a size of at least 1M, like 64M (suffixes K, M, G)");
	if ((v = getenv("D9_MAX_TOTAL_SIZE")) && *v &&
		(why = in_range(parse_size(v, &c->max_total_size), &c->max_total_size, 2u << 20, UINT64_MAX)))
		return bad("D9_MAX_TOTAL_SIZE", v, why, "a size of at least 2M, like 1G (suffixes K, M, G)");
	if ((v = getenv("D9_MAX_FILES")) && *v &&
		(why = in_range(parse_uint(v, &c->max_files), &c->max_files, 4, 1000000)))
		return bad("D9_MAX_FILES", v, why, "a number of files from 4 to 1000000, like 256");
	if ((v = getenv("D9_MAX_MEMORY")) && *v &&
		(why = in_range(parse_size(v, &c->max_memory), &c->max_memory, 1u << 20, 64ull << 30)))
		return bad("D9_MAX_MEMORY", v, why, "a size from 1M to 64G, like 64M (suffixes K, M, G)");
	if ((v = getenv("D9_ROTATION_PERIOD")) && *v) {
		why = parse_duration(v, &c->rotation_period_ns);
		if (!why && c->rotation_period_ns && c->rotation_period_ns < 1000000000ull)
			why = "too small";
		if (why)
			return bad("D9_ROTATION_PERIOD", v, why,
				"0 (off) or a duration of at least 1s, like 10m (ms, s, m, h)");
	}
	if ((v = getenv("D9_FLUSH_INTERVAL")) && *v &&
		(why = in_range(parse_duration(v, &c->flush_interval_ns), &c->flush_interval_ns, 1000000ull,
			60000000000ull)))
		return bad("D9_FLUSH_INTERVAL", v, why, "a duration from 1ms to 60s, like 100ms (ms, s, m)");
	if ((v = getenv("D9_EXIT_TIMEOUT")) && *v &&
		(why = in_range(parse_duration(v, &c->exit_timeout_ns), &c->exit_timeout_ns, 1000000ull,
			60000000000ull)))
		return bad("D9_EXIT_TIMEOUT", v, why, "a duration from 1ms to 60s, like 100ms (ms, s, m)");
	if ((v = getenv("D9_COMPRESS")) && *v && strcasecmp(v, "auto") &&
		(why = parse_bool(v, &c->compress)))
		return bad("D9_COMPRESS", v, why, "auto, 0 or 1");
	if ((v = getenv("D9_ENABLED")) && *v && (why = parse_bool(v, &c->enabled)))
		return bad("D9_ENABLED", v, why, "0 or 1");
	if ((v = getenv("D9_TOGGLE_SIGNAL")) && *v && (why = parse_signal(v, &c->toggle_signal)))
		return bad("D9_TOGGLE_SIGNAL", v, why, "a signal name: USR1, USR2, HUP, WINCH, URG, PROF, VTALRM or RTMIN+N");
	if ((v = getenv("D9_CLOCK")) && *v && (why = WORD(v, &c->clock, "auto", "tsc", "monotonic")))
		return bad("D9_CLOCK", v, why, "auto, tsc or monotonic");
	if ((v = getenv("D9_AGENT_FDS")) && *v &&
		(why = WORD(v, &c->agent_fds_shared, "private", "shared")))
		return bad("D9_AGENT_FDS", v, why, "private or shared");
	if ((v = getenv("D9_CHROOT")) && *v && (why = WORD(v, &c->chroot_follow, "stop", "follow")))
		return bad("D9_CHROOT", v, why, "stop or follow");
	if ((v = getenv("D9_RUNTIME")) && *v) {
		/* the adapters' names come from preload/runtimes.c (absent in the test driver) */
		int r = d9__runtime_parse ? d9__runtime_parse(v) : -2;
		if (r == -2)
			return bad("D9_RUNTIME", v, "not a runtime d9 knows",
				d9__runtime_parse ? d9__runtime_choices : "auto or generic");
		c->pre.runtime = r;
	}
	if ((v = getenv("D9_BLOCKING")) && *v && (why = parse_bool(v, &c->pre.blocking)))
		return bad("D9_BLOCKING", v, why, "0 or 1");
	if ((v = getenv("D9_BLOCKING_THRESHOLD")) && *v) {
		if ((why = in_range(parse_duration(v, &n), &n, 10000ull, UINT64_MAX)))
			return bad("D9_BLOCKING_THRESHOLD", v, why, "a duration of at least 10us, like 1ms (us, ms, s)");
		c->pre.blocking_threshold_ns = n;
	}
	if ((v = getenv("D9_REQUESTS")) && *v && (why = parse_bool(v, &c->pre.requests)))
		return bad("D9_REQUESTS", v, why, "0 or 1");
	if ((v = getenv("D9_REQUESTS_PREVIEW")) && *v && (why = WORD(v, &c->pre.requests_preview, "0", "1", "query")))
		return bad("D9_REQUESTS_PREVIEW", v, why, "0, 1 (method and path) or query (with the query string)");
	if ((v = getenv("D9_QUEUE_INTERVAL")) && *v) {
		if ((why = in_range(parse_duration(v, &n), &n, 1000000ull, UINT64_MAX)))
			return bad("D9_QUEUE_INTERVAL", v, why, "a duration of at least 1ms, like 10ms");
		c->pre.queue_interval_ns = n;
	}
	if ((v = getenv("D9_CPU_PROFILE")) && *v) {
		if ((why = in_range(parse_uint(v, &n), &n, 0, 10000)))
			return bad("D9_CPU_PROFILE", v, why, "0 (off), 1 (on, 99 Hz) or a frequency from 2 to 10000 Hz");
		c->cpu_hz = n == 1 ? 99 : (uint32_t)n;
	}
	if ((v = getenv("D9_CPU_PROFILE_MODE")) && *v &&
		(why = WORD(v, &c->profile_mode, "auto", "perf", "ctimer")))
		return bad("D9_CPU_PROFILE_MODE", v, why, "auto, perf or ctimer");
	if ((v = getenv("D9_SCHED_EVENTS")) && *v && (why = parse_bool(v, &c->sched_events)))
		return bad("D9_SCHED_EVENTS", v, why, "0 or 1");
	if ((v = getenv("D9_STACKS")) && *v && (why = WORD(v, &c->stacks, "auto", "fp", "dwarf")))
		return bad("D9_STACKS", v, why, "auto, fp or dwarf");
	if ((v = getenv("D9_STACK_DUMP")) && *v) {
		if ((why = in_range(parse_size(v, &n), &n, 1024, 60000)))
			return bad("D9_STACK_DUMP", v, why, "a size from 1K to 58K, like 8K");
		c->stack_dump = (uint32_t)n & ~7u;
	}
	if ((v = getenv("D9_PROFILE_SIGNAL")) && *v && (why = parse_signal(v, &c->profile_signal)))
		return bad("D9_PROFILE_SIGNAL", v, why, "a signal name: USR1, USR2, HUP, WINCH, URG, PROF, VTALRM or RTMIN+N");
	if ((v = getenv("D9_SYMBOLIZE")) && *v && (why = parse_bool(v, &c->symbolize)))
		return bad("D9_SYMBOLIZE", v, why, "0 or 1");
	if ((v = getenv("D9_SYMBOLIZE_MEMORY")) && *v &&
		(why = in_range(parse_size(v, &c->symbolize_memory), &c->symbolize_memory, 0, 64ull << 30)))
		return bad("D9_SYMBOLIZE_MEMORY", v, why, "a size from 0 to 64G, like 8M (suffixes K, M, G)");
	if ((v = getenv("D9_CMDLINE")) && *v && (why = WORD(v, &c->cmdline, "full", "redacted", "name")))
		return bad("D9_CMDLINE", v, why, "full, redacted or name");
	if ((v = getenv("D9_MODE")) && *v && (why = WORD(v, &c->flight, "continuous", "flight")))
		return bad("D9_MODE", v, why, "continuous or flight");
	if ((v = getenv("D9_FLIGHT_WINDOW")) && *v &&
		(why = in_range(parse_duration(v, &c->flight_window_ns), &c->flight_window_ns, 1000000000ull,
			3600000000000ull)))
		return bad("D9_FLIGHT_WINDOW", v, why, "a duration from 1s to 1h, like 60s (ms, s, m, h)");
	if ((v = getenv("D9_FLIGHT_AFTER")) && *v &&
		(why = in_range(parse_duration(v, &c->flight_after_ns), &c->flight_after_ns, 0,
			3600000000000ull)))
		return bad("D9_FLIGHT_AFTER", v, why, "a duration from 0 to 1h, like 10s (ms, s, m, h)");
	if ((v = getenv("D9_TRIGGER_POLL")) && *v &&
		(why = in_range(parse_duration(v, &c->trigger_poll_ns), &c->trigger_poll_ns, 0, 3600000000000ull)))
		return bad("D9_TRIGGER_POLL", v, why, "0 (off) or a duration, like 50ms (us, ms, s)");
	if ((v = getenv("D9_TRIGGER_BLOCKING")) && *v &&
		(why = in_range(parse_duration(v, &c->trigger_blocking_ns), &c->trigger_blocking_ns, 0,
			3600000000000ull)))
		return bad("D9_TRIGGER_BLOCKING", v, why, "0 (off) or a duration, like 20ms (us, ms, s)");
	if ((v = getenv("D9_TRIGGER_SCHED_DELAY")) && *v &&
		(why = in_range(parse_duration(v, &c->trigger_sched_ns), &c->trigger_sched_ns, 0,
			3600000000000ull)))
		return bad("D9_TRIGGER_SCHED_DELAY", v, why, "0 (off) or a duration, like 20ms (us, ms, s)");
	if ((v = getenv("D9_TRIGGER_DROPS")) && *v && (why = parse_uint(v, &c->trigger_drops)))
		return bad("D9_TRIGGER_DROPS", v, why, "0 (off) or a number of dropped events, like 1000");
	if ((v = getenv("D9_TRIGGER_COOLDOWN")) && *v &&
		(why = in_range(parse_duration(v, &c->trigger_cooldown_ns), &c->trigger_cooldown_ns, 0,
			86400000000000ull)))
		return bad("D9_TRIGGER_COOLDOWN", v, why, "a duration from 0 to 24h, like 60s (ms, s, m, h)");
	if ((v = getenv("D9_DUMP_SIGNAL")) && *v && strcasecmp(v, "none") &&
		(why = parse_signal(v, &c->dump_signal)))
		return bad("D9_DUMP_SIGNAL", v, why, "none or a signal name: USR1, USR2, HUP, WINCH, URG, PROF, VTALRM or RTMIN+N");
	if (c->dump_signal && (c->dump_signal == c->toggle_signal ||
		(c->dump_signal == c->profile_signal && c->cpu_hz)))
		return bad("D9_DUMP_SIGNAL", v, "the signal D9_TOGGLE_SIGNAL or D9_PROFILE_SIGNAL uses",
			"a signal of its own");
	/* A segment may never exceed half the budget, so the budget can always be kept by deleting
	 * sealed segments while one segment is active. */
	if (c->max_file_size > c->max_total_size / 2) {
		d9__log(D9_LOG_INFO, "D9_MAX_FILE_SIZE lowered to half of D9_MAX_TOTAL_SIZE");
		c->max_file_size = c->max_total_size / 2;
	}
	return 0;
}
