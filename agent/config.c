/* config.c: the D9_* environment variables and the agent's logging. Configuration is read once,
 * at load; a bad value prints one line naming the variable and the accepted form, and the agent
 * stays off while the host runs normally. README.md ("Configuration") documents every variable. */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int d9__log_level = D9_LOG_WARN;

void d9__log(int level, const char *fmt, ...)
{
	char line[512];
	int saved = errno;

	if (level > d9__log_level)
		return;
	int n = snprintf(line, sizeof(line), "d9[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(2, line, len);
	(void)w;
	errno = saved;
}

/* "64M", "512K", "1G", "1048576" -> bytes. Returns 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);

	if (errno || end == s || s[0] == '-')
		return -1;
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
	if (*end || v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* "500us", "100ms", "10s", "5m", "1h", "0" -> ns; a unit is required except for 0. Returns 0 or
 * -1. */
static int parse_duration(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);

	if (errno || end == s || s[0] == '-')
		return -1;
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
	else
		return -1;
	if (v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static int parse_bool(const char *s, int *out)
{
	if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "on") || !strcasecmp(s, "yes"))
		*out = 1;
	else if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "off") ||
		!strcasecmp(s, "no"))
		*out = 0;
	else
		return -1;
	return 0;
}

static int parse_signal(const char *s, int *out)
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
			return 0;
		}
	if (!strncasecmp(s, "RTMIN+", 6)) {
		char *end;
		long n = strtol(s + 6, &end, 10);
		if (end != s + 6 && !*end && n >= 0 && SIGRTMIN + n <= SIGRTMAX) {
			*out = SIGRTMIN + (int)n;
			return 0;
		}
	}
	return -1;
}

static int bad(const char *var, const char *val, const char *form)
{
	d9__log(D9_LOG_ERROR, "invalid %s=\"%s\": expected %s; tracing is off", var, val, form);
	return -EINVAL;
}

/* Splits trace_path into dir and stem (the name without its extension). */
static int split_path(struct d9__config *c)
{
	const char *slash = strrchr(c->trace_path, '/');
	const char *name = slash ? slash + 1 : c->trace_path;

	if (!*name)
		return -1;
	if (slash)
		snprintf(c->dir, sizeof(c->dir), "%.*s", (int)(slash - c->trace_path + (slash == c->trace_path)),
			c->trace_path);
	else
		snprintf(c->dir, sizeof(c->dir), ".");
	const char *dot = strchr(name, '.');
	size_t n = dot && dot != name ? (size_t)(dot - name) : strlen(name);
	if (n >= sizeof(c->stem))
		return -1;
	memcpy(c->stem, name, n);
	c->stem[n] = 0;
	return 0;
}

int d9__config_load(struct d9__config *c)
{
	const char *v;

	memset(c, 0, sizeof(*c));
	c->max_file_size = 64ull << 20;
	c->max_total_size = 1ull << 30;
	c->max_memory = 64ull << 20;
	c->rotation_period_ns = 600ull * 1000000000ull;
	c->flush_interval_ns = 100ull * 1000000ull;
	c->compress = 1;
	c->enabled = 1;
	c->log_level = D9_LOG_WARN;
	c->pre.runtime = D9_RUNTIME_AUTO;
	c->pre.blocking = 1;
	c->pre.blocking_threshold_ns = 1000000;
	c->pre.queue_interval_ns = 10000000;
	c->stack_dump = 8192;
	c->profile_signal = SIGURG; /* ignored by default: a program resetting it cannot be killed by it */
	c->symbolize = 1;

	if ((v = getenv("D9_LOG")) && *v) {
		static const char *const levels[] = { "error", "warn", "info", "debug" };
		c->log_level = -1;
		for (int i = 0; i < 4; i++)
			if (!strcasecmp(v, levels[i]))
				c->log_level = i;
		if (c->log_level < 0)
			return bad("D9_LOG", v, "error, warn, info or debug");
	}
	d9__log_level = c->log_level;

	if ((v = getenv("D9_TRACE_PATH")) && *v) {
		if (strlen(v) >= sizeof(c->trace_path) - 64)
			return bad("D9_TRACE_PATH", v, "a path shorter than 1900 bytes");
		snprintf(c->trace_path, sizeof(c->trace_path), "%s", v);
	} else {
		/* per-user directory: writable for an unprivileged user, kept across reboots */
		snprintf(c->trace_path, sizeof(c->trace_path), "/var/tmp/d9-%u/trace.bin",
			(unsigned)getuid());
	}
	if (split_path(c))
		return bad("D9_TRACE_PATH", c->trace_path, "a file path such as /var/tmp/d9/trace.bin");

	if ((v = getenv("D9_MAX_FILE_SIZE")) && *v &&
		(parse_size(v, &c->max_file_size) || c->max_file_size < (1u << 20)))
		return bad("D9_MAX_FILE_SIZE", v, "a size of at least 1M, like 64M (suffixes K, M, G)");
	if ((v = getenv("D9_MAX_TOTAL_SIZE")) && *v &&
		(parse_size(v, &c->max_total_size) || c->max_total_size < (2u << 20)))
		return bad("D9_MAX_TOTAL_SIZE", v, "a size of at least 2M, like 1G (suffixes K, M, G)");
	if ((v = getenv("D9_MAX_MEMORY")) && *v &&
		(parse_size(v, &c->max_memory) || c->max_memory < (1u << 20) ||
			c->max_memory > (64ull << 30)))
		return bad("D9_MAX_MEMORY", v, "a size from 1M to 64G, like 64M (suffixes K, M, G)");
	if ((v = getenv("D9_ROTATION_PERIOD")) && *v &&
		(parse_duration(v, &c->rotation_period_ns) ||
			(c->rotation_period_ns && c->rotation_period_ns < 1000000000ull)))
		return bad("D9_ROTATION_PERIOD", v, "0 (off) or a duration of at least 1s, like 10m (ms, s, m, h)");
	if ((v = getenv("D9_FLUSH_INTERVAL")) && *v &&
		(parse_duration(v, &c->flush_interval_ns) || c->flush_interval_ns < 1000000ull ||
			c->flush_interval_ns > 60000000000ull))
		return bad("D9_FLUSH_INTERVAL", v, "a duration from 1ms to 60s, like 100ms (ms, s, m)");
	if ((v = getenv("D9_COMPRESS")) && *v && parse_bool(v, &c->compress))
		return bad("D9_COMPRESS", v, "0 or 1");
	if ((v = getenv("D9_ENABLED")) && *v && parse_bool(v, &c->enabled))
		return bad("D9_ENABLED", v, "0 or 1");
	if ((v = getenv("D9_TOGGLE_SIGNAL")) && *v && parse_signal(v, &c->toggle_signal))
		return bad("D9_TOGGLE_SIGNAL", v, "a signal name: USR1, USR2, HUP, WINCH, URG, PROF, VTALRM or RTMIN+N");
	if ((v = getenv("D9_CLOCK")) && *v) {
		if (!strcasecmp(v, "auto"))
			c->clock = 0;
		else if (!strcasecmp(v, "tsc"))
			c->clock = 1;
		else if (!strcasecmp(v, "monotonic"))
			c->clock = 2;
		else
			return bad("D9_CLOCK", v, "auto, tsc or monotonic");
	}
	if ((v = getenv("D9_RUNTIME")) && *v) {
		if (!strcasecmp(v, "auto"))
			c->pre.runtime = D9_RUNTIME_AUTO;
		else if (!strcasecmp(v, "st"))
			c->pre.runtime = D9_RUNTIME_ST;
		else if (!strcasecmp(v, "generic"))
			c->pre.runtime = D9_RUNTIME_GENERIC;
		else
			return bad("D9_RUNTIME", v, "auto, st or generic");
	}
	if ((v = getenv("D9_BLOCKING")) && *v && parse_bool(v, &c->pre.blocking))
		return bad("D9_BLOCKING", v, "0 or 1");
	if ((v = getenv("D9_BLOCKING_THRESHOLD")) && *v &&
		(parse_duration(v, &c->pre.blocking_threshold_ns) ||
			c->pre.blocking_threshold_ns < 10000ull))
		return bad("D9_BLOCKING_THRESHOLD", v, "a duration of at least 10us, like 1ms (us, ms, s)");
	if ((v = getenv("D9_QUEUE_INTERVAL")) && *v &&
		(parse_duration(v, &c->pre.queue_interval_ns) || c->pre.queue_interval_ns < 1000000ull))
		return bad("D9_QUEUE_INTERVAL", v, "a duration of at least 1ms, like 10ms");
	if ((v = getenv("D9_CPU_PROFILE")) && *v) {
		char *end;
		unsigned long hz = strtoul(v, &end, 10);
		if (end == v || *end || hz > 10000)
			return bad("D9_CPU_PROFILE", v, "0 (off), 1 (on, 99 Hz) or a frequency from 2 to 10000 Hz");
		c->cpu_hz = hz == 1 ? 99 : (uint32_t)hz;
	}
	if ((v = getenv("D9_CPU_PROFILE_MODE")) && *v) {
		if (!strcasecmp(v, "auto"))
			c->profile_mode = D9_PROF_AUTO;
		else if (!strcasecmp(v, "perf"))
			c->profile_mode = D9_PROF_PERF;
		else if (!strcasecmp(v, "ctimer"))
			c->profile_mode = D9_PROF_CTIMER;
		else
			return bad("D9_CPU_PROFILE_MODE", v, "auto, perf or ctimer");
	}
	if ((v = getenv("D9_SCHED_EVENTS")) && *v && parse_bool(v, &c->sched_events))
		return bad("D9_SCHED_EVENTS", v, "0 or 1");
	if ((v = getenv("D9_STACKS")) && *v) {
		if (!strcasecmp(v, "auto"))
			c->stacks = D9_STACKS_AUTO;
		else if (!strcasecmp(v, "fp"))
			c->stacks = D9_STACKS_FP;
		else if (!strcasecmp(v, "dwarf"))
			c->stacks = D9_STACKS_DWARF;
		else
			return bad("D9_STACKS", v, "auto, fp or dwarf");
	}
	if ((v = getenv("D9_STACK_DUMP")) && *v) {
		uint64_t n;
		if (parse_size(v, &n) || n < 1024 || n > 60000)
			return bad("D9_STACK_DUMP", v, "a size from 1K to 58K, like 8K");
		c->stack_dump = (uint32_t)n & ~7u;
	}
	if ((v = getenv("D9_PROFILE_SIGNAL")) && *v && parse_signal(v, &c->profile_signal))
		return bad("D9_PROFILE_SIGNAL", v, "a signal name: USR1, USR2, HUP, WINCH, URG, PROF, VTALRM or RTMIN+N");
	if ((v = getenv("D9_SYMBOLIZE")) && *v && parse_bool(v, &c->symbolize))
		return bad("D9_SYMBOLIZE", v, "0 or 1");
	/* A segment may never exceed half the budget, so the budget can always be kept by deleting
	 * sealed segments while one segment is active. */
	if (c->max_file_size > c->max_total_size / 2) {
		d9__log(D9_LOG_INFO, "D9_MAX_FILE_SIZE lowered to half of D9_MAX_TOTAL_SIZE");
		c->max_file_size = c->max_total_size / 2;
	}
	return 0;
}
