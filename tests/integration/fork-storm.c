/* fork-storm.c: a fork-per-request server's shape, for test-agent-budget.sh (run under
 * LD_PRELOAD=libd9agent.so; it knows nothing of d9). The parent waits in epoll_wait twice, then
 * forks N children, at most P alive at once; each child waits in epoll_wait twice (1 ms, nothing
 * ready) and exits with exit(0). Prints "child PID" for each child and "parent PID" on stdout;
 * exits 1 if a fork fails or a child does not exit 0. Usage: fork-storm N [P] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

static void wait_twice(int ep)
{
	struct epoll_event ev;

	epoll_wait(ep, &ev, 1, 1);
	epoll_wait(ep, &ev, 1, 1);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500, p = argc > 2 ? atoi(argv[2]) : 4, alive = 0, bad = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || n < 1 || p < 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	wait_twice(ep);
	for (int i = 0; i < n; i++) {
		if (alive == p) {
			int st;
			if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
				bad = 1;
			alive--;
		}
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			wait_twice(ep);
			exit(0);
		}
		alive++;
		printf("child %d\n", (int)pid);
	}
	for (int st; alive > 0; alive--)
		if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
			bad = 1;
	printf("parent %d\n", (int)getpid());
	return bad;
}
