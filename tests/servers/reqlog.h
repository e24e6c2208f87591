/* reqlog.h: HTTP_REQUEST_LOG=FILE for the test servers (st-http.c, epoll-http.c): one line per
 * request, "pid fd start_ns end_ns target" (CLOCK_MONOTONIC: from the complete head to the reply
 * written, or queued, as each server says), appended with one write each (forked workers share
 * the file), so tests can compare what a tracer found with the requests the server served
 * (test-requests.sh). Included by one source file each: its functions are static. */
#ifndef D9_TESTS_REQLOG_H
#define D9_TESTS_REQLOG_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int reqlog_fd = -2;              /* -2: not opened yet, -1: off */

/* The request line's target (up to 100 bytes) into t[101]: taken before dispatch, which cuts the
 * head up in place. Also opens the log on first use, outside the timed part. */
static void reqlog_target(const char *head, char *t)
{
	const char *p = strchr(head, ' ');
	size_t k = 0;

	if (reqlog_fd == -2) {
		const char *f = getenv("HTTP_REQUEST_LOG");
		reqlog_fd = f && *f ? open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	}
	p = p ? p + 1 : head;
	while (p[k] && p[k] != ' ' && p[k] != '\r' && p[k] != '\n' && k < 100) {
		t[k] = p[k];
		k++;
	}
	t[k] = '\0';
}

static void reqlog(int fd, uint64_t start, uint64_t end, const char *target)
{
	char line[256];
	int n;

	if (reqlog_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%d %d %llu %llu %s\n", (int)getpid(), fd,
		     (unsigned long long)start, (unsigned long long)end, target);
	if (n > 0 && write(reqlog_fd, line, (size_t)n) < 0)
		reqlog_fd = -1;
}

#endif
