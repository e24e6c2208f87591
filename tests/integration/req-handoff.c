/* req-handoff.c: test-requests-handoff.sh's server, a thread pool that hands connections over as
 * Apache's event MPM does: the main thread's epoll loop accepts on 127.0.0.1 (a free port, printed
 * as "port N") and reads each request; it hands the connection to the answering thread through a
 * pipe; that thread waits for it in poll, writes the answer ("ok", Content-Length: 3) and
 * closes. One request per connection. A request for /quit ends the server once answered: the
 * answering thread returns, the main thread joins it and returns from main (exit 0). Both end
 * with their events handed over (a thread that is running when another calls _exit loses the
 * events it has not handed over yet: counted as dropped, not what this test is about). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int handoff[2];

static void *answer(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";

	(void)arg;
	for (;;) {
		struct pollfd p = { handoff[0], POLLIN, 0 };
		int fd, quit;
		if (poll(&p, 1, 10000) <= 0)
			return NULL;
		if (read(handoff[0], &fd, sizeof(fd)) != sizeof(fd) ||
			read(handoff[0], &quit, sizeof(quit)) != sizeof(quit))
			return NULL;
		if (write(fd, ok, sizeof(ok) - 1) < 0)
			perror("write");
		close(fd);
		if (quit)
			return NULL;
	}
}

int main(void)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	pthread_t th;

	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 16) != 0 ||
		getsockname(ls, (struct sockaddr *)&a, &al) != 0 || pipe(handoff) != 0 ||
		pthread_create(&th, NULL, answer, NULL) != 0) {
		perror("start");
		return 2;
	}
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = ls };
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	for (;;) {
		struct epoll_event got[8];
		int n = epoll_wait(ep, got, 8, 10000);
		if (n <= 0)
			return 3;
		for (int i = 0; i < n; i++) {
			int fd = got[i].data.fd;
			if (fd == ls) {
				int c = accept(ls, NULL, NULL);
				struct epoll_event ce = { .events = EPOLLIN, .data.fd = c };
				if (c >= 0)
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
				continue;
			}
			char buf[4096];
			ssize_t r = read(fd, buf, sizeof(buf) - 1);
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			if (r <= 0) {
				close(fd);
				continue;
			}
			buf[r] = 0;
			int quit = !strncmp(buf, "GET /quit ", 10);
			if (write(handoff[1], &fd, sizeof(fd)) != sizeof(fd) ||
				write(handoff[1], &quit, sizeof(quit)) != sizeof(quit))
				return 4;
			if (quit)
				return pthread_join(th, NULL) == 0 ? 0 : 5;
		}
	}
}
