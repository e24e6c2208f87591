/* own-malloc.c: a host with an allocator of its own (malloc and its family defined in the
 * executable, as in a program linked with tcmalloc or mimalloc), whose fork handler locks the
 * allocator. Its constructor registers that handler after the agent's (a preloaded library's
 * constructor runs first), so at a fork glibc runs it before the agent's: the allocator is
 * locked while the agent's fork_prepare waits for its own locks. For test-agent-fork.sh.
 *
 *   own-malloc FORKS HOLD_MS
 *
 * A worker thread keeps the agent defining new stacks: each turn it waits in epoll_wait (a loop
 * turn) and then sleeps 2 ms (a blocking call past the threshold) from a new call path, so the
 * writer interns a new Stack definition under its definitions lock, with a malloc, at every
 * pass. Once the worker has made its first stacks and the agent's writer runs (a thread named
 * d9-writer), the main thread forks FORKS times, 50 ms apart (writer passes in between); its
 * fork handler holds the allocator HOLD_MS ms before the fork goes on, so a writer pass that
 * needs malloc meanwhile waits with the definitions lock held. Each child waits once in epoll_wait, prints "child PID", and exits 0; the parent waits
 * for each one (a child that hangs is killed after 30 s and counted). Prints "forks N hung H"
 * and exits 0 when every child exited 0. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the allocator: a bump allocator over one reservation, one lock ----------------------- */
#define ARENA (1ull << 32)
static pthread_mutex_t alloc_mu = PTHREAD_MUTEX_INITIALIZER;
static char *arena, *arena_next;
static int hold_ms;

struct hdr { size_t size; size_t pad; };

static void *bump(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	pthread_mutex_lock(&alloc_mu);
	if (!arena) {
		void *p = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			pthread_mutex_unlock(&alloc_mu);
			return NULL;
		}
		arena = arena_next = p;
	}
	uintptr_t at = ((uintptr_t)arena_next + sizeof(struct hdr) + align - 1) & ~(uintptr_t)(align - 1);
	if (at + n > (uintptr_t)arena + ARENA) {
		pthread_mutex_unlock(&alloc_mu);
		return NULL;
	}
	((struct hdr *)at)[-1].size = n;
	arena_next = (char *)(at + n);
	pthread_mutex_unlock(&alloc_mu);
	return (void *)at;
}

void *malloc(size_t n)
{
	void *p = bump(n, 16);
	if (!p)
		errno = ENOMEM;
	return p;
}

void free(void *p)
{
	/* never reused; the lock, as a real allocator takes one */
	if (p) {
		pthread_mutex_lock(&alloc_mu);
		pthread_mutex_unlock(&alloc_mu);
	}
}

void *calloc(size_t a, size_t b)
{
	if (b && a > SIZE_MAX / b) {
		errno = ENOMEM;
		return NULL;
	}
	return malloc(a * b); /* fresh anonymous memory, never reused: zero */
}

size_t malloc_usable_size(void *p)
{
	return p ? ((struct hdr *)p)[-1].size : 0;
}

void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p) {
		size_t old = malloc_usable_size(p);
		memcpy(q, p, old < n ? old : n);
		free(p);
	}
	return q;
}

void *memalign(size_t align, size_t n)
{
	return bump(n, align);
}

void *aligned_alloc(size_t align, size_t n)
{
	return bump(n, align);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p = bump(n, align);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t n)
{
	return bump(n, 4096);
}

void *pvalloc(size_t n)
{
	return bump((n + 4095) & ~(size_t)4095, 4096);
}

/* ---- the fork handler, registered after the agent's --------------------------------------- */
static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (syscall(SYS_nanosleep, &ts, &ts) != 0 && errno == EINTR)
		;
}

static void prepare(void)
{
	pthread_mutex_lock(&alloc_mu);
	sleep_ms(hold_ms); /* a writer pass that needs malloc now waits for the fork */
}

static void unlock_all(void)
{
	pthread_mutex_unlock(&alloc_mu);
}

__attribute__((constructor)) static void own_init(void)
{
	pthread_atfork(prepare, unlock_all, unlock_all);
}

/* ---- the worker: a new stack at every blocking call --------------------------------------- */
static volatile int sink;
static unsigned turns; /* atomic: the worker's turns so far */

static __attribute__((noinline)) void nap(int depth)
{
	if (depth > 0) {
		nap(depth - 1);
		sink++; /* not a tail call: each level is a frame */
		return;
	}
	struct timespec ts = { 0, 2000000 };
	nanosleep(&ts, NULL);
}

#define VIA(k) static __attribute__((noinline)) void via##k(int d) { nap(d); sink++; }
VIA(0) VIA(1) VIA(2) VIA(3) VIA(4) VIA(5) VIA(6) VIA(7)
VIA(8) VIA(9) VIA(10) VIA(11) VIA(12) VIA(13) VIA(14) VIA(15)
static void (*const vias[])(int) = { via0, via1, via2, via3, via4, via5, via6, via7, via8, via9,
	via10, via11, via12, via13, via14, via15 };

static void *worker(void *arg)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev;

	(void)arg;
	for (unsigned i = 0;; i++) {
		epoll_wait(ep, &ev, 1, 0 + 1); /* a park: this thread is a worker in a loop turn */
		vias[i % 16]((int)((i / 16) % 40));
		__atomic_store_n(&turns, i + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* 1 when a thread of this process is named d9-writer (the agent's writer runs) */
static int writer_runs(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int found = 0;

	while (d && !found && (e = readdir(d))) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
		if (f) {
			found = fgets(comm, sizeof(comm), f) && !strncmp(comm, "d9-writer", 9);
			fclose(f);
		}
	}
	if (d)
		closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: own-malloc FORKS HOLD_MS\n");
		return 2;
	}
	int forks = atoi(argv[1]), hung = 0, bad = 0;
	hold_ms = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	/* until the worker has made its first stacks and, under the agent, its writer runs (10 s
	 * at most: without the agent there is no writer to wait for) */
	int preloaded = getenv("LD_PRELOAD") != NULL;
	for (int waited = 0; waited < 10000; waited += 5) {
		if (__atomic_load_n(&turns, __ATOMIC_RELAXED) >= 20 && (!preloaded || writer_runs()))
			break;
		sleep_ms(5);
	}
	for (int k = 0; k < forks; k++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			int ep = epoll_create1(EPOLL_CLOEXEC);
			struct epoll_event ev;
			epoll_wait(ep, &ev, 1, 1);
			printf("child %d\n", (int)getpid());
			exit(0);
		}
		int st = 0;
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			pid_t r = waitpid(pid, &st, WNOHANG);
			if (r == pid)
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 30) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				hung++;
				break;
			}
			sleep_ms(5);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
		sleep_ms(50); /* the pace of the forks: writer passes (new stacks) between them */
	}
	printf("forks %d hung %d bad %d\n", forks, hung, bad);
	fflush(stdout);
	_exit(bad ? 1 : 0); /* the worker never ends */
}
