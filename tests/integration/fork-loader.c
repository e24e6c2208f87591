#define _GNU_SOURCE
/* fork-loader.c: a threaded host that forks after loading and unloading a library, for
 * test-agent-fork.sh (run under LD_PRELOAD=libd9agent.so; it knows nothing of d9).
 *   fork-loader LIB N [SECONDS]: a thread waits in epoll_wait (1 ms) in a loop, so that a traced host has
 *   a writer that runs. The main thread, N times: loads and unloads LIB (dlopen/dlclose: the
 *   loader's list changed, which makes the agent's writer walk every module at its next pass),
 *   waits 0 to 1 ms (a different moment of the writer's pass each time), forks, and waits for
 *   the child. Each child does what a forked worker may do first: walks the loaded objects
 *   (dl_iterate_phdr, as a C++ throw does), loads LIB (dlopen, as NSS does) and formats a local
 *   time (localtime_r, as a log line does), then exits 0. A child that is not done within
 *   SECONDS (default 5) is killed by its own alarm: a lock of libc that no thread of the child
 *   will ever release.
 *   Only the forking thread itself loads libraries (a host thread that did while another
 *   forks would make the host unsafe on its own: glibc does not reset that lock in the child).
 * Stops at the first child that does not exit 0 and exits 1, saying which and how; else prints
 * "ok N children". */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *lib;
static unsigned alarm_s = 5;
static volatile int done;

static void *waiter(void *arg)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev;

	(void)arg;
	while (!done)
		epoll_wait(ep, &ev, 1, 1);
	return NULL;
}

static int count(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	++*(int *)arg;
	return 0;
}

static void child(void)
{
	int n = 0;
	struct tm tm;
	time_t now = time(NULL);

	alarm(alarm_s);
	dl_iterate_phdr(count, &n);
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h || n == 0)
		_exit(2);
	localtime_r(&now, &tm);
	_exit(0);
}

int main(int argc, char **argv)
{
	pthread_t b;
	int n, hung = 0;

	if ((argc != 3 && argc != 4) || (n = atoi(argv[2])) <= 0 ||
		(argc == 4 && (alarm_s = (unsigned)atoi(argv[3])) == 0)) {
		fprintf(stderr, "usage: fork-loader LIB N [SECONDS]\n");
		return 2;
	}
	lib = argv[1];
	if (pthread_create(&b, NULL, waiter, NULL))
		return 1;
	for (int i = 0; i < n; i++) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		if (h)
			dlclose(h);
		struct timespec pause = { 0, (long)(i * 397 % 1000) * 1000 };
		nanosleep(&pause, NULL);
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			child();
		int st = 0;
		pid_t w;
		while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
			;
		if (w != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			hung = i + 1;
			printf("child %d of %d: %s %d%s\n", hung, n,
				w != pid ? "waitpid failed, errno" : WIFSIGNALED(st) ? "killed by signal" :
				"exit status", w != pid ? errno : WIFSIGNALED(st) ? WTERMSIG(st) :
				WEXITSTATUS(st), WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ?
				" (its alarm: it hung)" : "");
			break;
		}
	}
	done = 1;
	pthread_join(b, NULL);
	if (hung)
		return 1;
	printf("ok %d children\n", n);
	return 0;
}
