/* req-fork.c: test-requests-fork.sh's server, a loop that forks a child per request as a CGI
 * does under Apache's prefork: one epoll loop on 127.0.0.1:PORT (argv[1]; 0: any; it prints
 * "port N pid P"), keep-alive connections; for each request (one read) it forks a child that
 * closes the client's socket it inherited (mod_cgi's child does) and exits at once (_exit),
 * waits for it, then answers "ok" (Content-Length: 3). A request for /quit ends the server
 * (exit 0) after its answer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		.sin_port = htons(argc > 1 ? (unsigned short)atoi(argv[1]) : 0) };
	socklen_t al = sizeof(a);

	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 16) != 0 ||
		getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
		perror("listen");
		return 2;
	}
	printf("port %d pid %d\n", ntohs(a.sin_port), (int)getpid());
	fflush(stdout);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = ls };
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	for (;;) {
		struct epoll_event got[8];
		int n = epoll_wait(ep, got, 8, 10000);
		if (n <= 0)
			return n == 0 ? 3 : 4; /* no client for 10 s, or a failed wait */
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
			if (r <= 0) {
				close(fd);
				continue;
			}
			buf[r] = 0;
			pid_t pid = fork();
			if (pid == 0) {
				close(fd);
				_exit(0);
			}
			if (pid > 0)
				waitpid(pid, NULL, 0);
			static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
			if (write(fd, ok, sizeof(ok) - 1) < 0)
				close(fd);
			if (!strncmp(buf, "GET /quit ", 10))
				return 0;
		}
	}
}
