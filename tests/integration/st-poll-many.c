/* st-poll-many.c: a coroutine that waits in st_poll on more descriptors than the State Threads
 * adapter's on-stack array holds (8), in rounds of 12, 12 again, 200 (its array then takes more
 * than mem.c's largest size class, 4 KiB) and 12: each round, main sleeps 20 ms and writes one
 * byte to the round's last pipe. Prints "round <k> fd <n>" for each round's ready descriptor;
 * test-preload-regress.sh checks that each comes back as an fd Wake of the waiting coroutine
 * for that descriptor. */
#include <st.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#define MAXP 200
static int rd[MAXP], wr[MAXP];
static const int sizes[] = { 12, 12, 200, 12 };
static int round_no = -1;

static void *waiter(void *x)
{
	static struct pollfd p[MAXP];

	for (int k = 0; k < 4; k++) {
		for (int i = 0; i < sizes[k]; i++)
			p[i] = (struct pollfd){ .fd = rd[i], .events = POLLIN };
		round_no = k;
		if (st_poll(p, sizes[k], ST_UTIME_NO_TIMEOUT) != 1)
			return x;
		for (int i = 0; i < sizes[k]; i++)
			if (p[i].revents & POLLIN) {
				char c;
				if (read(rd[i], &c, 1) != 1)
					return x;
				printf("round %d fd %d\n", k, rd[i]);
			}
	}
	return x;
}

int main(void)
{
	for (int i = 0; i < MAXP; i++) {
		int f[2];
		if (pipe(f) != 0)
			return 2;
		rd[i] = f[0];
		wr[i] = f[1];
	}
	if (st_init() != 0)
		return 2;
	st_thread_t w = st_thread_create(waiter, NULL, 1, 0);
	for (int k = 0; k < 4; k++) {
		while (round_no != k) /* the waiter is in this round's st_poll when main runs again */
			st_usleep(1000);
		st_usleep(20000);
		if (write(wr[sizes[k] - 1], "x", 1) != 1)
			return 2;
		st_usleep(1000);
	}
	st_thread_join(w, NULL);
	fflush(stdout);
	return 0;
}
