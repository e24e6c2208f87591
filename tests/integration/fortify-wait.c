/* fortify-wait.c: waits as a program built with _FORTIFY_SOURCE makes them: poll and ppoll of an
 * array whose size the compiler knows become __poll_chk and __ppoll_chk (Debian's nsd waits in
 * __ppoll_chk; haproxy and memcached call __poll_chk). 10 of each, 20 ms timeouts on a pipe
 * nobody writes to, a little CPU between them. Prints "waits 20". Built (-O2
 * -D_FORTIFY_SOURCE=2) and run by test-preload-fortify.sh. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	nfds_t n = (nfds_t)argc; /* 1, not a constant: the size is checked at run time */
	int p[2];
	struct pollfd fds[1];
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	volatile unsigned x = 0;

	if (pipe(p))
		return 2;
	fds[0].fd = p[0];
	fds[0].events = POLLIN;
	for (int i = 0; i < 10; i++) {
		if (poll(fds, n, 20) != 0 || ppoll(fds, n, &ts, NULL) != 0)
			return 3;
		for (unsigned j = 0; j < 100000; j++)
			x += j;
	}
	(void)argv;
	printf("waits 20\n");
	return 0;
}
