/* libc-fds.c: the descriptors on which a read or a write cannot wait, so that the blocking-call
 * wrappers (libc-block.c) need not time them: sockets and pipes in non-blocking mode. Nothing is
 * asked of the kernel (a F_GETFL per call is the very cost this saves): the table learns only
 * from the calls it sees make a socket or pipe (socket, socketpair, accept, accept4, pipe,
 * pipe2) and set or clear O_NONBLOCK (fcntl F_SETFL, ioctl FIONBIO, and the creation flags).
 * Every other way a number changes hands forgets it: close, close_range, dup, dup2, dup3,
 * F_DUPFD, open, syscall(SYS_close, ...), and a forked child forgets all of them. A forgotten
 * descriptor is timed, as every descriptor was before this table: an error here can only
 * cost time, except in the cases agent/DESIGN.md ("Calls that cannot wait") lists. */
#include "preload.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

uint64_t d9__fd_stream[D9__FD_BITS / 64], d9__fd_nonblock[D9__FD_BITS / 64];

/* A plain load first: the bit is usually as wanted already (close and open of numbers that
 * were never sockets), and a locked read-modify-write costs more than the rest of the wrapper. */
static void set_bit(uint64_t *t, int fd, int on)
{
	uint64_t m = 1ull << (fd & 63);
	uint64_t *w = &t[fd >> 6];

	if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & m) == !on)
		return;
	if (on)
		__atomic_fetch_or(w, m, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(w, ~m, __ATOMIC_RELAXED);
}

void d9__fd_made(int fd, int stream, int nonblock)
{
	/* one an agent thread makes (libcurl's) is the agent's (agent/fdown.c) */
	if (D9_UNLIKELY(d9__self.role == D9_ROLE_AGENT) && fd >= 0)
		d9__fd_mark_new(fd);
	/* an agent thread with a table of its own: its numbers are not the program's */
	if (fd < 0 || fd >= D9__FD_BITS || D9_UNLIKELY(d9__self.fd_private))
		return;
	/* the stream bit last: until then the descriptor is timed */
	set_bit(d9__fd_stream, fd, 0);
	set_bit(d9__fd_nonblock, fd, nonblock);
	set_bit(d9__fd_stream, fd, stream);
}

void d9__fd_forget(int fd)
{
	if (fd >= 0 && fd < D9__FD_BITS && !d9__self.fd_private)
		set_bit(d9__fd_stream, fd, 0);
}

void d9__fd_set_nonblock(int fd, int on)
{
	if (fd >= 0 && fd < D9__FD_BITS && !d9__self.fd_private)
		set_bit(d9__fd_nonblock, fd, on);
}

void d9__fd_forget_range(unsigned int first, unsigned int last)
{
	if (d9__self.fd_private)
		return;
	for (unsigned int fd = first; fd <= last && fd < D9__FD_BITS; fd++)
		set_bit(d9__fd_stream, (int)fd, 0);
}

void d9__fd_forget_all(void)
{
	for (unsigned int i = 0; i < D9__FD_BITS / 64; i++)
		__atomic_store_n(&d9__fd_stream[i], 0, __ATOMIC_RELAXED);
}

/* A forked child shares its descriptions with the parent, which may change their mode unseen. */
__attribute__((constructor)) static void fds_init(void)
{
	pthread_atfork(NULL, NULL, d9__fd_forget_all);
}

D9_INTERPOSE int socket(int domain, int type, int protocol)
{
	D9_REAL(int, socket, (int, int, int));
	int r = real_socket ? real_socket(domain, type, protocol)
			    : (int)syscall(SYS_socket, domain, type, protocol);
	d9__fd_made(r, 1, type & SOCK_NONBLOCK);
	return r;
}

D9_INTERPOSE int socketpair(int domain, int type, int protocol, int sv[2])
{
	D9_REAL(int, socketpair, (int, int, int, int *));
	int r = real_socketpair ? real_socketpair(domain, type, protocol, sv)
				: (int)syscall(SYS_socketpair, domain, type, protocol, sv);
	if (r == 0) {
		d9__fd_made(sv[0], 1, type & SOCK_NONBLOCK);
		d9__fd_made(sv[1], 1, type & SOCK_NONBLOCK);
	}
	return r;
}

D9_INTERPOSE int pipe(int fds[2])
{
	D9_REAL(int, pipe, (int *));
	int r = real_pipe ? real_pipe(fds) : (int)syscall(SYS_pipe2, fds, 0);
	if (r == 0) {
		d9__fd_made(fds[0], 1, 0);
		d9__fd_made(fds[1], 1, 0);
	}
	return r;
}

D9_INTERPOSE int pipe2(int fds[2], int flags)
{
	D9_REAL(int, pipe2, (int *, int));
	int r = real_pipe2 ? real_pipe2(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
	if (r == 0) {
		d9__fd_made(fds[0], 1, flags & O_NONBLOCK);
		d9__fd_made(fds[1], 1, flags & O_NONBLOCK);
	}
	return r;
}

/* O_NONBLOCK belongs to the open file description, which a duplicate shares: a later F_SETFL
 * through either number changes both, so both are forgotten. */
D9_INTERPOSE int dup(int fd)
{
	D9_REAL(int, dup, (int));
	d9__fd_forget(fd);
	int r = real_dup ? real_dup(fd) : (int)syscall(SYS_dup, fd);
	d9__fd_forget(r);
	return r;
}

/* dup2, dup3, close_range and closefrom can take a number of the agent's: each waits for the
 * agent's write in progress on it, and the agent lets it go (agent/fdown.c). */
D9_INTERPOSE int dup2(int fd, int to)
{
	D9_REAL(int, dup2, (int, int));
	d9__fd_forget(fd);
	d9__fd_forget(to);
	int take = fd != to && d9__self.role != D9_ROLE_AGENT;
	if (take)
		d9__fd_host_take(to);
	int r = real_dup2 ? real_dup2(fd, to) : (int)syscall(SYS_dup2, fd, to);
	if (take)
		d9__fd_host_done(to);
	if (D9_UNLIKELY(r == 2) && take)
		d9__stderr_meant(); /* the program's new stderr (nginx: its error log) */
	return r;
}

D9_INTERPOSE int dup3(int fd, int to, int flags)
{
	D9_REAL(int, dup3, (int, int, int));
	d9__fd_forget(fd);
	d9__fd_forget(to);
	int take = d9__self.role != D9_ROLE_AGENT;
	if (take)
		d9__fd_host_take(to);
	int r = real_dup3 ? real_dup3(fd, to, flags) : (int)syscall(SYS_dup3, fd, to, flags);
	if (take)
		d9__fd_host_done(to);
	if (D9_UNLIKELY(r == 2) && take)
		d9__stderr_meant();
	return r;
}

D9_INTERPOSE int close_range(unsigned int first, unsigned int last, int flags)
{
	D9_REAL(int, close_range, (unsigned int, unsigned int, int));
	d9__fd_forget_range(first, last);
	/* CLOSE_RANGE_CLOEXEC only marks them (the agent's are close-on-exec already) */
	/* CLOSE_RANGE_UNSHARE closes them in a copy of the table: the agent's stay open in its */
	int closes = !(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) &&
		d9__self.role != D9_ROLE_AGENT;
	if (closes)
		d9__fd_host_take_range(first, last);
	int r = real_close_range ? real_close_range(first, last, flags)
				 : (int)syscall(SYS_close_range, first, last, flags);
	if (closes)
		d9__fd_host_range_done();
	return r;
}

/* glibc's closefrom calls its own close_range, unseen by the one above. */
D9_INTERPOSE void closefrom(int lowfd)
{
	D9_REAL(void, closefrom, (int));
	unsigned first = lowfd < 0 ? 0u : (unsigned)lowfd;
	int host = d9__self.role != D9_ROLE_AGENT;
	d9__fd_forget_range(first, ~0u);
	if (host)
		d9__fd_host_take_range(first, ~0u);
	if (real_closefrom)
		real_closefrom(lowfd);
	else
		syscall(SYS_close_range, first, ~0u, 0);
	if (host)
		d9__fd_host_range_done();
}

/* glibc declares ioctl with an unsigned long request; every argument fits a pointer-sized
 * register. */
D9_INTERPOSE int ioctl(int fd, unsigned long request, ...)
{
	D9_REAL(int, ioctl, (int, unsigned long, ...));
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int r = real_ioctl ? real_ioctl(fd, request, arg) : (int)syscall(SYS_ioctl, fd, request, arg);
	if (request == FIONBIO) {
		if (r == 0 && arg)
			d9__fd_set_nonblock(fd, *(int *)arg != 0);
		else
			d9__fd_forget(fd);
	}
	return r;
}
