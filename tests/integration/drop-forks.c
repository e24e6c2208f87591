/* drop-forks.c: test-agent-said-once.sh's program, Apache's prefork worker in small: as root it
 * waits twice in epoll_wait (1 ms: the thread becomes a worker, and with D9_SCHED_EVENTS its perf
 * events open as root), gives up root (setgroups, setresgid, setresuid to UID GID), then forks N
 * children one after the other, as the worker forks a CGI helper per request; each child waits
 * twice (a worker of its own: its perf events open as that user, denied under
 * perf_event_paranoid 2) and exits 0. "reroot" (varnish's manager and its compiler children):
 * the parent gives up root as its effective uid only (root stays its saved uid), and each child
 * becomes root again (setresuid(-1, 0, -1)), waits twice as root, keeps no capability but
 * CAP_SETUID and CAP_SETGID (varnish's jail), then gives up root for good and waits twice more.
 * usage: drop-forks UID GID N [reroot]. Exit 0 when every child exited 0. */
#define _GNU_SOURCE
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void wait_twice(void)
{
	struct epoll_event ev;
	int ep = epoll_create1(0);

	epoll_wait(ep, &ev, 1, 1);
	epoll_wait(ep, &ev, 1, 1);
	close(ep);
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	int reroot = argc == 5 && !strcmp(argv[4], "reroot");
	uid_t uid = (uid_t)atoi(argv[1]);
	gid_t gid = (gid_t)atoi(argv[2]);
	int n = atoi(argv[3]);

	wait_twice();
	if (reroot ? setresuid((uid_t)-1, uid, (uid_t)-1) != 0 :
		setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
		setresuid(uid, uid, uid) != 0) {
		perror("drop");
		return 3;
	}
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 4;
		if (pid == 0) {
			if (reroot) {
				if (setresuid((uid_t)-1, 0, (uid_t)-1) != 0)
					_exit(6);
				wait_twice();
				struct __user_cap_header_struct hd = { _LINUX_CAPABILITY_VERSION_3, 0 };
				struct __user_cap_data_struct cd[2] = { { 0 } };
				cd[0].effective = cd[0].permitted =
					(1u << CAP_SETUID) | (1u << CAP_SETGID);
				if (syscall(SYS_capset, &hd, cd) != 0)
					_exit(8);
				if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
					setresuid(uid, uid, uid) != 0)
					_exit(7);
			}
			wait_twice();
			exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 5;
	}
	return 0;
}
