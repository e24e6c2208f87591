/* secure-prog.c: test-preload-secure.sh's program. "run": 5 waits of 20 ms (each a Park: the
 * thread becomes a worker and its process writes a segment), exit 0. "exec PROG": the real uid
 * becomes nobody's (65534) with the effective one still root, as squid's master runs when it
 * execs its kid, then PROG run: the kernel starts it in secure-execution mode. "spawn PROG":
 * the same through posix_spawn, waited for. "same PROG": exec with the ids as they are.
 * Exit status 2, 3: a call failed. */
#define _GNU_SOURCE
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "same")) {
		execv(argv[2], (char *[]){ argv[2], "run", NULL });
		perror("execv");
		return 3;
	}
	if (argc > 2 && (!strcmp(argv[1], "exec") || !strcmp(argv[1], "spawn"))) {
		if (setresuid(65534, 0, 0) != 0) {
			perror("setresuid");
			return 2;
		}
		char *args[] = { argv[2], "run", NULL };
		if (!strcmp(argv[1], "exec")) {
			execv(argv[2], args);
			perror("execv");
			return 3;
		}
		pid_t pid;
		int st;
		if (posix_spawn(&pid, argv[2], NULL, NULL, args, environ) != 0 ||
			waitpid(pid, &st, 0) != pid) {
			perror("posix_spawn");
			return 3;
		}
		return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
	}
	for (int i = 0; i < 5; i++)
		poll(NULL, 0, 20);
	return 0;
}
