/* requests.h: zero-code requests (D9_REQUESTS=1): the socket interposers tell requests.c what
 * moved on which descriptor, and it finds where each request on an accepted connection begins and
 * ends (agent/DESIGN.md, "Requests"). With D9_REQUESTS off every hook below is behind one
 * predictable branch on d9__pcfg.requests (or, at a wait, on d9__pl.req_npending, always 0 then). */
#ifndef D9_REQUESTS_H
#define D9_REQUESTS_H

#include <stddef.h>
#include <sys/types.h>

#include "preload.h"

struct iovec;
struct msghdr;

/* Requests ended by loop turns: d9__pl.req_npending (preload.h) counts those waiting for the
 * thread's next wait call. */

/* A connection was accepted on fd (a listening socket's child): its requests are tracked. */
void d9__req_accepted(int fd);
/* A read on fd returned n (buf holds n bytes when n > 0). These hooks keep errno as the call left
 * it: what they call on their common path never sets it (the recording's slow path keeps it). */
void d9__req_read(int fd, const void *buf, ssize_t n);
/* The same for a scatter read (readv, recvmsg). */
void d9__req_readv(int fd, const struct iovec *iov, size_t cnt, ssize_t n);
/* A write on fd sent n bytes (n <= 0: nothing). */
void d9__req_wrote(int fd, ssize_t n);
/* fd is about to be closed. */
void d9__req_close(int fd);
/* The calling thread's loop turn ends (it is about to wait): requests it answered end. Returns
 * the d9__now() their ends were recorded at, 0 when none was. */
uint64_t d9__req_turn_end(void);

/* The application API (agent/api.c, d9.h) names requests itself: begin and end on the calling
 * thread and coroutine. A zero-code request of the same coroutine (thread, in generic mode) that
 * contains an API request is replaced by it in the analyzer (agent/DESIGN.md, "Requests"). */
void d9__api_request_begin(uint64_t id);
void d9__api_request_end(uint64_t id, int status);

#define D9__REQ_HOOK(call)                                                        \
	do {                                                                      \
		if (D9_UNLIKELY(d9__pcfg.requests) && !d9__self.fd_private &&    \
			!d9__calls_off())                                         \
			call;                                                     \
	} while (0)
#endif
