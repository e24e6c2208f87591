/* d9-driver.c: a host program for the agent's integration tests and benchmarks. It is linked with
 * libd9core.a, so the agent's constructor runs in it (configured by D9_*) and the real inline
 * hot path records. Worker threads record QueueSample(seq), seq = 1..N, so d9-check can verify
 * per-thread order and exact drop accounting; options add parking, sleeps, fork, exec, exit
 * paths, signal-driven phases and a timing loop. It prints one JSON line per process on stdout
 * (what it recorded) and nothing on stderr: the agent's own stderr lines are what tests count.
 * Used by tests/integration/test-agent-*.sh; `--help` lists the options. */
#include "d9-agent.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum exit_mode { EXIT_RETURN, EXIT_EXIT, EXIT_EXIT_PARKED, EXIT_SIGTERM, EXIT_SIGINT, EXIT_KILL,
	EXIT_HANG, EXIT_JOIN_HANG, EXIT_STARVED };

static const char *const exit_names[] = { "return", "exit", "exit-parked", "sigterm", "sigint",
	"kill", "hang", "join-hang", "exit-starved" };

static struct {
	int threads;
	uint64_t n; /* QueueSample seqs per thread */
	uint64_t park_every, sleep_every, sleep_us;
	enum exit_mode exit;
	int forks, exec, burst, flush, bench, mix, phases, slow_writer, term_handler;
	int slow_writer_cpu; /* --slow-writer-cpu: the CPU of --slow-writer, -1: the first allowed */
	int holders, spawn_ls;
	uint64_t settle_ms;
	uint64_t paused_drops;
	uint64_t churn; /* --churn: worker threads created one batch after another */
	int churn_barrier; /* --churn-barrier: a batch's workers wait for each other once workers */
	int fill_fds; /* --fill-fds: with --churn, every free descriptor taken before the workers */
} opt = { .threads = 1, .n = 1000, .sleep_us = 100, .exit = EXIT_RETURN, .slow_writer_cpu = -1 };

/* One recording thread; written by its thread, read by main after the end barrier. */
struct thr {
	pthread_t th;
	int index;
	uint32_t tid, worker;
	uint64_t progress; /* atomic: last seq recorded (main forks while it is moving) */
	uint64_t attempted; /* every d9_rec_* call, parks included */
	uint64_t first_mono, last_mono, first_real, last_real; /* around the first and last event */
	uint64_t loop_ns; /* the recording loop's duration */
};

static struct thr *thrs;
static int nthrs; /* opt.threads, and main's own entry with --exit exit-starved */
static const char *dlopen_path; /* --dlopen: a library to load after recording */
static const char *close_fds_dir; /* --close-fds: the host's files go there */
static pthread_barrier_t start_barrier, end_barrier;
static volatile sig_atomic_t term_seen;
static int held, release; /* atomics of --holders */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000u), (long)(us % 1000000u) * 1000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A worker's step in --mix: a coroutine is woken by an fd, polled, and the run queue sampled;
 * now and then one is spawned and one exits. Returns the events attempted. */
static uint64_t mix_step(uint64_t seq)
{
	uint64_t co = 100 + seq % 64, n = 4;

	d9_rec_wake(co, 0, D9_WAKE_FD, (int64_t)(seq % 1000));
	d9_rec_poll_start(co, 7);
	d9_rec_poll_end(co);
	d9_rec_queue_sample(seq);
	if (seq % 16 == 0) {
		d9_rec_spawn(100000 + seq, co, 7);
		d9_rec_coroutine_exit(100000 + seq - 16);
		n += 2;
	}
	return n;
}

/* Records seqs from..to on the calling thread with the configured parks and sleeps. */
static void record_range(struct thr *t, uint64_t from, uint64_t to)
{
	int pace = !opt.burst && !opt.bench;

	if (opt.bench && !opt.mix && !opt.park_every && !opt.forks && from > 1) {
		/* --bench: the recording alone, so that loop time / events is the agent's cost per
		 * event, not this loop's bookkeeping (which was about half of the instructions) */
		for (uint64_t seq = from; seq <= to; seq++)
			d9_rec_queue_sample(seq);
		t->attempted += to - from + 1;
		__atomic_store_n(&t->progress, to, __ATOMIC_RELAXED);
		return;
	}
	for (uint64_t seq = from; seq <= to; seq++) {
		if (seq == from && !t->first_mono) {
			t->first_mono = clock_ns(CLOCK_MONOTONIC);
			t->first_real = clock_ns(CLOCK_REALTIME);
		}
		if (opt.mix) {
			t->attempted += mix_step(seq);
		} else {
			d9_rec_queue_sample(seq);
			t->attempted++;
		}
		__atomic_store_n(&t->progress, seq, __ATOMIC_RELAXED);
		if (opt.park_every && seq % opt.park_every == 0) {
			d9_rec_park(D9_CALL_EPOLL_WAIT, (int64_t)opt.sleep_us);
			if (pace)
				sleep_us(opt.sleep_us);
			d9_rec_unpark(1, 0, 0);
			t->attempted += 2;
		} else if (pace && opt.sleep_every && seq % opt.sleep_every == 0) {
			sleep_us(opt.sleep_us);
		}
	}
	t->last_mono = clock_ns(CLOCK_MONOTONIC);
	t->last_real = clock_ns(CLOCK_REALTIME);
}

static void hang_forever(void)
{
	for (;;)
		pause();
}

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	t->tid = (uint32_t)gettid();
	t->worker = d9_agent_become_worker();
	pthread_barrier_wait(&start_barrier);
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	if (t->index < opt.holders) {
		/* --holders: take a block with seq 1 and keep it (running, not parked) until main
		 * has joined every other thread, so the pool stays empty while they record and exit */
		record_range(t, 1, 1);
		__atomic_add_fetch(&held, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE))
			sleep_us(1000);
		if (opt.n > 1)
			record_range(t, 2, opt.n);
	} else {
		while (__atomic_load_n(&held, __ATOMIC_ACQUIRE) < opt.holders)
			sleep_us(1000);
		if (opt.settle_ms && opt.n > 1) {
			/* --settle-ms: the writer drains the buffers before the last event, which then
			 * carries every drop still pending (nothing is left for the thread's exit) */
			record_range(t, 1, opt.n - 1);
			sleep_us(opt.settle_ms * 1000);
			record_range(t, opt.n, opt.n);
		} else if (opt.bench && opt.n > 1) {
			record_range(t, 1, 1); /* the first event takes the start times */
			record_range(t, 2, opt.n);
		} else {
			record_range(t, 1, opt.n);
		}
	}
	t->loop_ns = clock_ns(CLOCK_MONOTONIC) - t0;
	if (opt.paused_drops)
		__atomic_add_fetch(&d9__self.dropped_paused, opt.paused_drops, __ATOMIC_RELAXED);
	if (opt.exit == EXIT_HANG || opt.exit == EXIT_EXIT_PARKED) {
		/* parked: the writer may take this thread's chunk (d9_rec_park) */
		d9_rec_park(D9_CALL_EPOLL_WAIT, -1);
		t->attempted++;
	}
	if (t->index >= opt.holders || !opt.holders)
		pthread_barrier_wait(&end_barrier);
	if (opt.exit == EXIT_HANG || opt.exit == EXIT_EXIT_PARKED || opt.exit == EXIT_STARVED)
		hang_forever(); /* exit-starved: running (not parked), with no block */
	return NULL;
}

/* What --slow-writer did, printed with the result: writer_starved 1 when it was done as asked,
 * 0 when not (pin_error says why: a CPU this process may not use, a cpuset, ...; the test then
 * SKIPs, for the writer may have kept up), -1 when not asked. */
static int writer_starved = -1, pinned_cpu = -1;
static char pin_error[128];

/* The first CPU this thread may run on, or a negative errno. */
static int first_allowed_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -EINVAL;
}

/* --slow-writer: every thread on one CPU (--slow-writer-cpu, else the first this process may use)
 * and the agent's writer at nice 19, so recording threads fill the memory cap before the writer
 * drains it; --idle-writer: the writer in SCHED_IDLE, so it runs only when no recording thread
 * can. Sets writer_starved and pin_error. Returns 0, -ENOENT when the writer thread was not found
 * (the agent is off), or the negative errno of the affinity or priority call that failed. */
static int slow_writer(void)
{
	struct sched_param idle = { 0 };
	cpu_set_t one;
	int found = 0, err = 0;
	int cpu = opt.slow_writer_cpu >= 0 ? opt.slow_writer_cpu : first_allowed_cpu();

	writer_starved = 0;
	if (cpu < 0 || cpu >= CPU_SETSIZE) {
		snprintf(pin_error, sizeof(pin_error), "no CPU to pin to: %s",
			strerror(cpu < 0 ? -cpu : EINVAL));
		return cpu < 0 ? cpu : -EINVAL;
	}
	pinned_cpu = cpu;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	for (int tries = 0; tries < 200 && !found; tries++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		if (!d) {
			snprintf(pin_error, sizeof(pin_error), "/proc/self/task: %s", strerror(errno));
			return -errno;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			pid_t tid = (pid_t)atoi(e->d_name);
			char path[64], comm[32] = "";
			snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
			FILE *f = fopen(path, "r");
			if (f) {
				if (!fgets(comm, sizeof(comm), f))
					comm[0] = 0;
				fclose(f);
			}
			/* a thread that ended since readdir (ESRCH) needs no pinning */
			if (sched_setaffinity(tid, sizeof(one), &one) != 0 && errno != ESRCH && !err) {
				err = -errno;
				snprintf(pin_error, sizeof(pin_error), "sched_setaffinity(CPU %d): %s", cpu,
					strerror(errno));
			}
			if (!strncmp(comm, "d9-writer", 9)) {
				int r = opt.slow_writer == 2 ? sched_setscheduler(tid, SCHED_IDLE, &idle) :
					setpriority(PRIO_PROCESS, (id_t)tid, 19);
				if (r != 0 && !err) {
					err = -errno;
					snprintf(pin_error, sizeof(pin_error), "%s: %s", opt.slow_writer == 2 ?
						"sched_setscheduler(SCHED_IDLE)" : "setpriority(19)", strerror(errno));
				}
				found = 1;
			}
		}
		closedir(d);
		if (!found)
			sleep_us(10000); /* the writer names itself right after it starts */
	}
	if (err)
		return err;
	if (!found)
		return -ENOENT;
	writer_starved = 1;
	return 0;
}

static void on_host_term(int sig)
{
	(void)sig;
	term_seen = 1;
}

/* --phases P: waits for SIGUSR1 P times; each one records a phase of N seqs on the main thread,
 * then prints {"phase":k,...}. The toggle test switches recording between phases. */
static void run_phases(struct thr *t, sigset_t *usr1)
{
	uint64_t next = 1;

	printf("{\"ready\":1,\"pid\":%d}\n", (int)getpid());
	fflush(stdout);
	for (int k = 1; k <= opt.phases; k++) {
		int sig;
		while (sigwait(usr1, &sig) != 0)
			;
		int enabled = __atomic_load_n(&d9__enabled, __ATOMIC_RELAXED);
		t->worker = d9_agent_become_worker();
		record_range(t, next, next + opt.n - 1);
		printf("{\"phase\":%d,\"enabled\":%d,\"from\":%" PRIu64 ",\"to\":%" PRIu64 "}\n", k, enabled,
			next, next + opt.n - 1);
		fflush(stdout);
		next += opt.n;
	}
}

struct child { pid_t pid; int status; int timed_out; };

/* Forks while the workers record; the child records its own N seqs on one thread and exits.
 * The parent waits for the child with a deadline (a deadlocked child is killed and reported). */
static void fork_child(struct child *c)
{
	fflush(stdout);
	c->pid = fork();
	if (c->pid < 0) {
		c->status = -errno;
		return;
	}
	if (c->pid > 0) {
		printf("{\"forked\":%d}\n", (int)c->pid); /* before waiting: tests act on it */
		fflush(stdout);
	}
	if (c->pid == 0) {
		struct thr self = { .index = 0 };
		self.tid = (uint32_t)gettid();
		self.worker = d9_agent_become_worker();
		record_range(&self, 1, opt.n);
		printf("{\"role\":\"child\",\"pid\":%d,\"ppid\":%d,\"threads\":[{\"tid\":%u,\"worker\":%u,"
			"\"seqs\":%" PRIu64 ",\"attempted\":%" PRIu64 "}]}\n", (int)getpid(), (int)getppid(),
			self.tid, self.worker, opt.n, self.attempted);
		fflush(stdout);
		exit(0);
	}
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + 30000000000ull;
	for (;;) {
		pid_t r = waitpid(c->pid, &c->status, WNOHANG);
		if (r == c->pid)
			return;
		if (clock_ns(CLOCK_MONOTONIC) > deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &c->status, 0);
			c->timed_out = 1;
			return;
		}
		sleep_us(5000);
	}
}

static void print_result(uint64_t start_mono, uint64_t end_mono, uint64_t start_real,
	uint64_t end_real, const struct child *kids, int nkids)
{
	uint64_t total = 0, loop_ns = 0, seqs = 0;

	printf("{\"role\":\"parent\",\"pid\":%d,\"ppid\":%d,\"exit\":\"%s\",\"clock\":\"%s\","
		"\"enabled\":%d,\"active\":%d,\"threads\":[", (int)getpid(), (int)getppid(),
		exit_names[opt.exit], d9__clock_tsc ? "tsc" : "monotonic",
		__atomic_load_n(&d9__enabled, __ATOMIC_RELAXED), d9_agent_active());
	for (int i = 0; i < nthrs; i++) {
		struct thr *t = &thrs[i];
		printf("%s{\"tid\":%u,\"worker\":%u,\"seqs\":%" PRIu64 ",\"attempted\":%" PRIu64
			",\"first_mono_ns\":%" PRIu64 ",\"last_mono_ns\":%" PRIu64 ",\"first_real_ns\":%" PRIu64
			",\"last_real_ns\":%" PRIu64 ",\"loop_ns\":%" PRIu64 "}", i ? "," : "", t->tid, t->worker,
			__atomic_load_n(&t->progress, __ATOMIC_RELAXED), t->attempted, t->first_mono,
			t->last_mono, t->first_real, t->last_real, t->loop_ns);
		total += t->attempted;
		loop_ns += t->loop_ns;
		seqs += t->progress;
	}
	printf("],\"children\":[");
	for (int i = 0; i < nkids; i++)
		printf("%s{\"pid\":%d,\"exited\":%d,\"code\":%d,\"signal\":%d,\"timed_out\":%d}", i ? "," : "",
			(int)kids[i].pid, WIFEXITED(kids[i].status), WIFEXITED(kids[i].status) ?
			WEXITSTATUS(kids[i].status) : -1, WIFSIGNALED(kids[i].status) ?
			WTERMSIG(kids[i].status) : 0, kids[i].timed_out);
	printf("],\"events\":%" PRIu64 ",\"seqs\":%" PRIu64 ",\"ns_per_event\":%.2f,\"start_mono_ns\":%"
		PRIu64 ",\"end_mono_ns\":%" PRIu64 ",\"start_real_ns\":%" PRIu64 ",\"end_real_ns\":%" PRIu64
		",\"term_handled\":%d,\"writer_starved\":%d,\"pinned_cpu\":%d,\"pin_error\":\"%s\"}\n", total,
		seqs, total ? (double)loop_ns / (double)total : 0.0, start_mono, end_mono, start_real, end_real,
		(int)term_seen, writer_starved, pinned_cpu, pin_error);
	fflush(stdout);
}

static int churn_emfile, churn_open_errors; /* atomics: the host's own open() that failed */

/* --churn: a short-lived worker (with profiling on, it opens and closes its perf events). It
 * sleeps once (a context switch: an off-CPU sample with D9_SCHED_EVENTS) and opens a file of
 * its own, which must never fail for want of descriptors. arg: NULL, or (--churn-barrier) the
 * batch's barrier, passed once this thread is a worker: then every worker of the batch holds its
 * perf events at the same time, however fast threads start and end on this machine. */
static void *churn_main(void *arg)
{
	struct timespec ts = { 0, 100000 };

	d9_agent_become_worker();
	if (arg)
		pthread_barrier_wait(arg);
	for (int i = 1; i <= 10; i++) {
		d9_rec_poll_start((uint64_t)i, 0);
		if (i == 5)
			nanosleep(&ts, NULL);
		d9_rec_poll_end((uint64_t)i);
	}
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	else if (errno == EMFILE || errno == ENFILE)
		__atomic_add_fetch(&churn_emfile, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&churn_open_errors, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Open descriptors of this process, and how many of them are perf events. */
static void count_fds(int *all, int *perf)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], link[128];

	*all = *perf = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		(*all)++;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			if (strstr(link, "perf_event"))
				(*perf)++;
		}
	}
	closedir(d);
}

/* Creates opt.churn workers, 16 at a time, then reports the descriptors left open. With
 * --slow-writer the first worker starts the agent, then the writer is starved (nice 19 on the
 * CPU where every later worker runs too); with --churn-barrier a batch's workers are all alive at
 * once. */
static int churn(void)
{
	pthread_t th[16];
	pthread_barrier_t batch;
	int all0, perf0, all1, perf1, peak = 0, filled = 0;

	count_fds(&all0, &perf0);
	while (opt.fill_fds && open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0)
		filled++; /* a host at its descriptor limit: perf_event_open gets EMFILE */
	if (opt.slow_writer) {
		if (pthread_create(&th[0], NULL, churn_main, NULL) != 0)
			return 1;
		pthread_join(th[0], NULL);
		slow_writer(); /* writer_starved, pin_error */
	}
	for (uint64_t done = 0; done < opt.churn;) {
		int k = opt.churn - done < 16 ? (int)(opt.churn - done) : 16;
		if (opt.churn_barrier && pthread_barrier_init(&batch, NULL, (unsigned)k) != 0)
			return 1;
		for (int i = 0; i < k; i++)
			if (pthread_create(&th[i], NULL, churn_main, opt.churn_barrier ? &batch : NULL) != 0)
				return 1;
		for (int i = 0; i < k; i++)
			pthread_join(th[i], NULL);
		if (opt.churn_barrier)
			pthread_barrier_destroy(&batch);
		done += (uint64_t)k;
		if (done % 1024 == 0) {
			count_fds(&all1, &perf1);
			if (perf1 > peak)
				peak = perf1;
		}
	}
	/* no wait for the writer: exited workers' descriptors are closed by the workers */
	count_fds(&all1, &perf1);
	printf("{\"role\":\"churn\",\"pid\":%d,\"threads\":%" PRIu64 ",\"writer_starved\":%d,"
		"\"pinned_cpu\":%d,\"pin_error\":\"%s\",\"fds_before\":%d,\"fds_after\":%d,"
		"\"perf_fds_after\":%d,\"perf_fds_peak\":%d,\"host_emfile\":%d,\"host_open_errors\":%d,"
		"\"filled\":%d}\n", (int)getpid(), opt.churn, writer_starved, pinned_cpu, pin_error, all0,
		all1, perf1, peak, churn_emfile, churn_open_errors, filled);
	fflush(stdout);
	if (opt.flush)
		d9_agent_flush(10000);
	return 0;
}

/* --close-fds DIR: a daemon that closes every descriptor from 3 to 1023 after start, while its
 * profiled workers (set 0) run. A second set of workers starts then: their perf events get the
 * numbers set 0's had, as do the 32 files the host opens next (DIR/host.K). Set 0 exits (the
 * agent must leave those numbers alone: they are set 1's events and the host's files), then set
 * 1. The host checks that each of its descriptors is still the file it opened, appends a line
 * and closes it. Prints {"role":"close-fds",...}: perf descriptors before the close, while set 1
 * runs alone (as many as before when none was taken from it), and at the end. */
#define CF_FILES 32
#define CF_WORKERS 4

static int cf_stop[2], cf_started[2];

static void *cf_worker(void *arg)
{
	struct timespec ts = { 0, 1000000 };
	int set = (int)(intptr_t)arg;

	d9_agent_become_worker(); /* opens the perf events before it counts itself started */
	__atomic_add_fetch(&cf_started[set], 1, __ATOMIC_RELEASE);
	for (uint64_t i = 1; !__atomic_load_n(&cf_stop[set], __ATOMIC_ACQUIRE); i++) {
		d9_rec_poll_start(i, 0);
		for (volatile int k = 0; k < 200000; k++)
			;
		d9_rec_poll_end(i);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int cf_start(pthread_t *th, int set)
{
	for (int i = 0; i < CF_WORKERS; i++)
		if (pthread_create(&th[i], NULL, cf_worker, (void *)(intptr_t)set) != 0)
			return -1;
	while (__atomic_load_n(&cf_started[set], __ATOMIC_ACQUIRE) < CF_WORKERS)
		sleep_us(1000);
	return 0;
}

static void cf_stop_set(pthread_t *th, int set)
{
	__atomic_store_n(&cf_stop[set], 1, __ATOMIC_RELEASE);
	for (int i = 0; i < CF_WORKERS; i++)
		pthread_join(th[i], NULL);
}

static int close_fds(const char *dir)
{
	pthread_t th[2][CF_WORKERS];
	struct { int fd; dev_t dev; ino_t ino; } h[CF_FILES];
	int all, perf0, perf1, perf2, bad = 0, short_writes = 0;
	char path[4096], line[64];

	if (cf_start(th[0], 0) != 0)
		return 1;
	sleep_us(100000); /* samples in the rings, the writer running */
	count_fds(&all, &perf0);
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	if (cf_start(th[1], 1) != 0)
		return 1;
	for (int k = 0; k < CF_FILES; k++) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/host.%d", dir, k);
		h[k].fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
		if (h[k].fd < 0 || fstat(h[k].fd, &st) != 0)
			return 1;
		h[k].dev = st.st_dev;
		h[k].ino = st.st_ino;
		int n = snprintf(line, sizeof(line), "host %d open\n", k);
		if (write(h[k].fd, line, (size_t)n) != n)
			short_writes++;
	}
	cf_stop_set(th[0], 0);
	count_fds(&all, &perf1);
	sleep_us(200000);
	cf_stop_set(th[1], 1);
	count_fds(&all, &perf2);
	for (int k = 0; k < CF_FILES; k++) {
		struct stat st;
		if (fcntl(h[k].fd, F_GETFD) < 0 || fstat(h[k].fd, &st) != 0 || st.st_dev != h[k].dev ||
			st.st_ino != h[k].ino) {
			bad++;
			continue;
		}
		int n = snprintf(line, sizeof(line), "host %d close\n", k);
		if (write(h[k].fd, line, (size_t)n) != n)
			short_writes++;
		close(h[k].fd);
	}
	printf("{\"role\":\"close-fds\",\"pid\":%d,\"files\":%d,\"first_fd\":%d,\"last_fd\":%d,"
		"\"perf_fds_before\":%d,\"perf_fds_second_set\":%d,\"perf_fds_after\":%d,"
		"\"host_fds_bad\":%d,\"short_writes\":%d}\n", (int)getpid(), CF_FILES, h[0].fd,
		h[CF_FILES - 1].fd, perf0, perf1, perf2, bad, short_writes);
	fflush(stdout);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: d9-driver [-t THREADS] [-n EVENTS_PER_THREAD] [OPTIONS]\n"
		"  --park-every K   park/unpark around a sleep of --sleep-us every K events\n"
		"  --sleep-every K  sleep --sleep-us (running, not parked) every K events\n"
		"  --sleep-us US    the sleep (default 100)\n"
		"  --exit MODE      how the program ends (default return):\n"
		"                   return, exit: from main after joining the workers\n"
		"                   exit-parked: exit() from main while the workers stay parked\n"
		"                   sigterm, sigint: raise the signal after joining the workers\n"
		"                   kill: d9_agent_flush, then SIGKILL itself\n"
		"                   hang: the workers park and everything sleeps until killed\n"
		"                   join-hang: the workers exit, main sleeps until killed\n"
		"                   exit-starved: with --holders, the holders keep their blocks, the\n"
		"                   other workers stay alive, main records N seqs (no free block:\n"
		"                   all dropped) and calls exit()\n"
		"  --holders H      threads 0..H-1 hold a block (seq 1, running) until the others exited\n"
		"  --spawn-ls K     once the agent runs, fork+exec `ls -l /proc/self/fd` K times\n"
		"  --settle-ms M    sleep M ms before each thread's last event\n"
		"  --paused-drops K after its last event each thread adds K to the agent's count of\n"
		"                   events refused while it was stopped (as a pause that ended just\n"
		"                   before the thread exits would): its exit must report them\n"
		"  --dlopen LIB     load LIB (dlopen) after recording, then record once more\n"
		"  --fork, --forks K  fork K times while the workers record; each child records N seqs\n"
		"  --exec           at the end exec `ls -l /proc/self/fd` (shows leaked fds)\n"
		"  --burst          no sleeps (parks are still recorded): record as fast as possible\n"
		"  --slow-writer    pin every thread to one CPU and run the agent's writer at nice 19 (the\n"
		"                   result says writer_starved 1, or 0 with pin_error when a call failed)\n"
		"  --idle-writer    the same with the writer in SCHED_IDLE (runs only when recording waits)\n"
		"  --slow-writer-cpu C  that CPU (default: the first this process may run on)\n"
		"  --flush          d9_agent_flush at the end\n"
		"  --bench          as --burst, for timing: ns_per_event is loop time / events\n"
		"  --mix            record a poll/wake/spawn mix around each QueueSample(seq)\n"
		"  --phases P       record a phase of N seqs on the main thread at each SIGUSR1\n"
		"  --term-handler   install a host SIGTERM handler (the program then returns normally)\n"
		"  --churn K        only create K short-lived workers (16 at a time) and report open fds\n"
		"                   (with --slow-writer: the writer starved; --flush: flush at the end;\n"
		"                   --fill-fds: every free descriptor taken first; --churn-barrier: the\n"
		"                   16 of a batch wait for each other once workers, so all are alive at once)\n"
		"  --close-fds DIR  a daemon closing fds 3..1023 while profiled, then opening DIR/host.*\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "park-every", required_argument, NULL, 'p' },
		{ "sleep-every", required_argument, NULL, 'e' },
		{ "sleep-us", required_argument, NULL, 's' },
		{ "exit", required_argument, NULL, 'x' },
		{ "fork", no_argument, NULL, 'f' },
		{ "forks", required_argument, NULL, 'F' },
		{ "exec", no_argument, NULL, 'E' },
		{ "burst", no_argument, NULL, 'b' },
		{ "slow-writer", no_argument, NULL, 'w' },
		{ "idle-writer", no_argument, NULL, 'I' },
		{ "slow-writer-cpu", required_argument, NULL, 'U' },
		{ "flush", no_argument, NULL, 'l' },
		{ "bench", no_argument, NULL, 'B' },
		{ "mix", no_argument, NULL, 'm' },
		{ "phases", required_argument, NULL, 'P' },
		{ "term-handler", no_argument, NULL, 'T' },
		{ "holders", required_argument, NULL, 'H' },
		{ "spawn-ls", required_argument, NULL, 'L' },
		{ "settle-ms", required_argument, NULL, 'S' },
		{ "paused-drops", required_argument, NULL, 'Q' },
		{ "dlopen", required_argument, NULL, 'D' },
		{ "churn", required_argument, NULL, 'C' },
		{ "close-fds", required_argument, NULL, 'K' },
		{ "fill-fds", no_argument, NULL, 'N' },
		{ "churn-barrier", no_argument, NULL, 'G' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "t:n:h", longs, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 't': bad = parse_u64(optarg, &v) || v < 1 || v > 256; opt.threads = (int)v; break;
		case 'n': bad = parse_u64(optarg, &opt.n) || opt.n < 1; break;
		case 'p': bad = parse_u64(optarg, &opt.park_every); break;
		case 'e': bad = parse_u64(optarg, &opt.sleep_every); break;
		case 's': bad = parse_u64(optarg, &opt.sleep_us); break;
		case 'x':
			bad = 1;
			for (size_t i = 0; i < sizeof(exit_names) / sizeof(exit_names[0]); i++)
				if (!strcmp(optarg, exit_names[i])) {
					opt.exit = (enum exit_mode)i;
					bad = 0;
				}
			break;
		case 'f': opt.forks = 1; break;
		case 'F': bad = parse_u64(optarg, &v) || v > 64; opt.forks = (int)v; break;
		case 'E': opt.exec = 1; break;
		case 'b': opt.burst = 1; break;
		case 'w': opt.slow_writer = 1; break;
		case 'I': opt.slow_writer = 2; break;
		case 'U': bad = parse_u64(optarg, &v) || v >= CPU_SETSIZE; opt.slow_writer_cpu = (int)v; break;
		case 'l': opt.flush = 1; break;
		case 'B': opt.bench = 1; break;
		case 'm': opt.mix = 1; break;
		case 'P': bad = parse_u64(optarg, &v) || v < 1 || v > 1000; opt.phases = (int)v; break;
		case 'T': opt.term_handler = 1; break;
		case 'H': bad = parse_u64(optarg, &v) || v > 255; opt.holders = (int)v; break;
		case 'S': bad = parse_u64(optarg, &opt.settle_ms); break;
		case 'Q': bad = parse_u64(optarg, &opt.paused_drops); break;
		case 'L': bad = parse_u64(optarg, &v) || v > 100000; opt.spawn_ls = (int)v; break;
		case 'D': dlopen_path = optarg; break;
		case 'C': bad = parse_u64(optarg, &opt.churn) || opt.churn < 1; break;
		case 'K': close_fds_dir = optarg; break;
		case 'N': opt.fill_fds = 1; break;
		case 'G': opt.churn_barrier = 1; break;
		case 'h': usage(stdout); return 0;
		default: bad = 1; break;
		}
		if (bad) {
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || opt.holders >= opt.threads || (opt.exit == EXIT_STARVED && !opt.holders)) {
		usage(stderr);
		return 2;
	}

	if (opt.churn)
		return churn();
	if (close_fds_dir)
		return close_fds(close_fds_dir);
	if (opt.term_handler) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_host_term;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
	}
	uint64_t start_mono = clock_ns(CLOCK_MONOTONIC), start_real = clock_ns(CLOCK_REALTIME);

	if (opt.phases) {
		/* SIGUSR1 blocked before the agent starts its threads, so sigwait gets every one */
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
		opt.threads = 1;
		thrs = calloc(1, sizeof(*thrs));
		if (!thrs)
			return 1;
		nthrs = 1;
		thrs[0].tid = (uint32_t)gettid();
		run_phases(&thrs[0], &usr1);
		print_result(start_mono, clock_ns(CLOCK_MONOTONIC), start_real, clock_ns(CLOCK_REALTIME),
			NULL, 0);
		return 0;
	}

	nthrs = opt.threads + (opt.exit == EXIT_STARVED);
	thrs = calloc((size_t)nthrs, sizeof(*thrs));
	if (!thrs)
		return 1;
	pthread_barrier_init(&start_barrier, NULL, (unsigned)opt.threads + 1);
	pthread_barrier_init(&end_barrier, NULL, (unsigned)(opt.threads - opt.holders) + 1);
	for (int i = 0; i < opt.threads; i++) {
		thrs[i].index = i;
		if (pthread_create(&thrs[i].th, NULL, thread_main, &thrs[i]) != 0)
			return 1;
	}
	pthread_barrier_wait(&start_barrier);
	/* after the barrier: the agent starts its writer at the workers' first events (before it,
	 * there was no d9-writer to find, and the writer ran at nice 0) */
	if (opt.slow_writer && slow_writer() == -ENOENT)
		fprintf(stdout, "{\"warning\":\"--slow-writer: no d9-writer thread\"}\n");
	for (int k = 0; k < opt.spawn_ls; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			execl("/bin/ls", "ls", "-l", "/proc/self/fd/", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}

	struct child kids[64];
	int nkids = 0;
	for (int k = 0; k < opt.forks; k++) {
		/* fork at k/(forks+1) of the way through, while every worker is mid-stream */
		uint64_t at = opt.n * (uint64_t)(k + 1) / (uint64_t)(opt.forks + 1);
		for (int i = 0; i < opt.threads; i++)
			while (__atomic_load_n(&thrs[i].progress, __ATOMIC_RELAXED) < at)
				sleep_us(200);
		memset(&kids[nkids], 0, sizeof(kids[nkids]));
		fork_child(&kids[nkids++]);
	}

	pthread_barrier_wait(&end_barrier);
	if (opt.exit == EXIT_STARVED) {
		/* the holders still keep every block: main's own seqs are all dropped, and its
		 * exit() must count them (and the holders' unwritten events) in the trace */
		struct thr *m = &thrs[opt.threads];
		m->index = opt.threads;
		m->tid = (uint32_t)gettid();
		m->worker = d9_agent_become_worker();
		record_range(m, 1, opt.n);
	} else if (opt.holders) {
		for (int i = opt.holders; i < opt.threads; i++)
			pthread_join(thrs[i].th, NULL);
		__atomic_store_n(&release, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < opt.holders; i++)
			pthread_join(thrs[i].th, NULL);
	} else if (opt.exit != EXIT_HANG && opt.exit != EXIT_EXIT_PARKED) {
		for (int i = 0; i < opt.threads; i++)
			pthread_join(thrs[i].th, NULL);
	}
	print_result(start_mono, clock_ns(CLOCK_MONOTONIC), start_real, clock_ns(CLOCK_REALTIME), kids,
		nkids);
	if (opt.exit == EXIT_HANG || opt.exit == EXIT_JOIN_HANG)
		hang_forever();
	if (dlopen_path) {
		/* a library loaded after recording started: the module map must follow (modules.c) */
		if (!dlopen(dlopen_path, RTLD_NOW)) {
			fprintf(stderr, "d9-driver: dlopen %s: %s\n", dlopen_path, dlerror());
			return 1;
		}
		usleep(300000); /* a few writer passes */
		d9_rec_queue_sample(0);
	}
	if (opt.flush || opt.exit == EXIT_KILL || opt.exec) {
		int fr = d9_agent_flush(10000);
		if (fr)
			fprintf(stderr, "d9-driver: d9_agent_flush returned %d\n", fr);
	}
	if (opt.exec) {
		execl("/bin/ls", "ls", "-l", "/proc/self/fd/", (char *)NULL);
		return 127;
	}
	switch (opt.exit) {
	case EXIT_EXIT:
	case EXIT_EXIT_PARKED:
	case EXIT_STARVED:
		exit(0);
	case EXIT_SIGTERM:
		raise(SIGTERM);
		break; /* reached with --term-handler: the host's handler ran */
	case EXIT_SIGINT:
		raise(SIGINT);
		break;
	case EXIT_KILL:
		kill(getpid(), SIGKILL);
		break;
	default:
		break;
	}
	if (opt.term_handler) {
		/* the test sends SIGTERM; the host's handler (not the agent's) must see it */
		uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + 30000000000ull;
		while (!term_seen && clock_ns(CLOCK_MONOTONIC) < deadline)
			sleep_us(1000);
		printf("{\"term_handled\":%d}\n", (int)term_seen);
		fflush(stdout);
	}
	return 0;
}
