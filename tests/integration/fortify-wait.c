/* fortify-wait.c: waits and a read as a program built with _FORTIFY_SOURCE makes them: poll and
 * ppoll of an array whose size the compiler knows become __poll_chk and __ppoll_chk (Debian's
 * nsd waits in __ppoll_chk; haproxy and memcached call __poll_chk), and pread into a buffer of
 * known size __pread_chk (or __pread64_chk). 10 waits of each kind, 20 ms timeouts on a pipe
 * nobody writes to, a little CPU between them; then one pread of 64 MiB from a file it wrote
 * (unlinked) in the directory given as its argument, a call of milliseconds (copying, page
 * faults: on CPU, or off it when the file's pages are not all in memory). Prints "waits 20" and
 * "pread N". Built (-O2 -D_FORTIFY_SOURCE=2) and run by test-preload-fortify.sh. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (64u << 20)
static char big[BIG];

int main(int argc, char **argv)
{
	nfds_t n = (nfds_t)(argc - 1); /* 1, not a constant: the sizes are checked at run time */
	int p[2];
	struct pollfd fds[1];
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	volatile unsigned x = 0;
	char path[4096];

	if (argc != 2 || pipe(p))
		return 2;
	fds[0].fd = p[0];
	fds[0].events = POLLIN;
	for (int i = 0; i < 10; i++) {
		if (poll(fds, n, 20) != 0 || ppoll(fds, n, &ts, NULL) != 0)
			return 3;
		for (unsigned j = 0; j < 100000; j++)
			x += j;
	}
	printf("waits 20\n");

	snprintf(path, sizeof(path), "%s/fortify-wait.XXXXXX", argv[1]);
	int fd = mkstemp(path);
	if (fd < 0)
		return 4;
	unlink(path);
	memset(big, 'f', BIG);
	for (size_t off = 0; off < BIG;) {
		ssize_t w = write(fd, big + off, BIG - off);
		if (w <= 0)
			return 5;
		off += (size_t)w;
	}
	memset(big, 0, BIG); /* the buffer's pages are the program's before the read */
	ssize_t r = pread(fd, big, (size_t)BIG * n, 0);
	if (r != (ssize_t)BIG || big[BIG - 1] != 'f')
		return 6;
	printf("pread %zd\n", r);
	return 0;
}
