/* cxx-http.cc: a small C++ HTTP/1.0-style server for the tests of names (test-names.sh): one
 * epoll loop on the main thread, handlers that are member functions of classes and class
 * templates inside a namespace, so every name in its stacks is mangled in the binary and must be
 * demangled to read well. It knows nothing of d9. One request per connection (the reply carries
 * Connection: close). Endpoints: /fast -> "ok", /burn?ms=N -> burns N ms of this thread's CPU in
 * d9test::Burner<d9test::Spin>::run(long), /quit -> "bye" and exit(0). 127.0.0.1 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace d9test {

[[noreturn]] static void die(const char *what)
{
	perror(what);
	exit(1);
}

static long long thread_cpu_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The work one step of a burn does: a few thousand multiply-adds (some microseconds). */
struct Spin {
	static unsigned long step(unsigned long x)
	{
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ul + 1442695040888963407ul;
		return x;
	}
};

/* Burns CPU with Work's steps: samples taken meanwhile land in run() (and Work::step). */
template <typename Work> class Burner {
public:
	__attribute__((noinline)) unsigned long run(long ms)
	{
		long long end = thread_cpu_ns() + ms * 1000000ll;
		unsigned long x = seed_;

		while (thread_cpu_ns() < end)
			x = Work::step(x);
		seed_ = x;
		return x;
	}

private:
	unsigned long seed_ = 1;
};

class Server {
public:
	explicit Server(int port) : lfd_(listen_on(port)) {}
	int port() const { return port_; }
	void loop(int seconds);

private:
	int listen_on(int port);
	void serve(int fd);
	__attribute__((noinline)) std::string handle_burn(const std::string &query);
	static void reply(int fd, const std::string &body);

	int port_ = 0; /* before lfd_: listen_on sets it while lfd_ is initialized */
	int lfd_;
	Burner<Spin> burner_;
};

int Server::listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in sa = {};
	socklen_t len = sizeof(sa);

	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		die("bind");
	port_ = ntohs(sa.sin_port);
	return fd;
}

void Server::reply(int fd, const std::string &body)
{
	std::string r = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
		"Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
	size_t off = 0;

	while (off < r.size()) {
		ssize_t k = send(fd, r.data() + off, r.size() - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		off += (size_t)k;
	}
}

std::string Server::handle_burn(const std::string &query)
{
	long ms = 10;
	size_t at = query.find("ms=");

	if (at != std::string::npos)
		ms = strtol(query.c_str() + at + 3, nullptr, 10);
	if (ms < 0 || ms > 60000)
		ms = 10;
	burner_.run(ms);
	return "burn ms=" + std::to_string(ms) + "\n";
}

/* Reads one request (blocking: the client sends it at once), answers it, closes. */
void Server::serve(int fd)
{
	std::string req;
	char buf[4096];

	while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		req.append(buf, (size_t)k);
	}
	size_t sp = req.find(' '), sp2 = sp == std::string::npos ? sp : req.find(' ', sp + 1);
	std::string target = sp2 == std::string::npos ? "" : req.substr(sp + 1, sp2 - sp - 1);
	size_t q = target.find('?');
	std::string path = target.substr(0, q), query = q == std::string::npos ? "" : target.substr(q);
	if (path == "/fast")
		reply(fd, "ok\n");
	else if (path == "/burn")
		reply(fd, handle_burn(query));
	else if (path == "/quit") {
		reply(fd, "bye\n");
		close(fd);
		exit(0);
	} else
		reply(fd, "not found\n");
	close(fd);
}

void Server::loop(int seconds)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {}, out[16];
	time_t end = seconds > 0 ? time(nullptr) + seconds : 0;

	if (ep < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.fd = lfd_;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd_, &ev) < 0)
		die("epoll_ctl");
	for (;;) {
		if (end && time(nullptr) >= end)
			exit(0); /* -t: the test's safety net */
		int n = epoll_wait(ep, out, 16, 100);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd >= 0)
				serve(fd);
		}
	}
}

} // namespace d9test

int main(int argc, char **argv)
{
	int c, port = 0, seconds = 0, quiet = 0;
	const char *port_file = nullptr;

	while ((c = getopt(argc, argv, "p:P:t:q")) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'P': port_file = optarg; break;
		case 't': seconds = atoi(optarg); break;
		case 'q': quiet = 1; break;
		default:
			fprintf(stderr, "usage: cxx-http [-p PORT] [-P FILE] [-t SECONDS] [-q]\n");
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	d9test::Server s(port);
	if (!quiet)
		fprintf(stderr, "cxx-http: port=%d pid=%d\n", s.port(), (int)getpid());
	if (port_file) {
		std::string tmp = std::string(port_file) + ".tmp." + std::to_string(getpid());
		FILE *f = fopen(tmp.c_str(), "w");
		if (!f || fprintf(f, "%d\n", s.port()) < 0 || fclose(f) != 0 ||
		    rename(tmp.c_str(), port_file) < 0)
			d9test::die("port file");
	}
	s.loop(seconds);
	return 0;
}
