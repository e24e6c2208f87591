/* many-workers.c: a thread-per-connection host for tests/integration/test-agent-hostile.sh. N
 * threads each park twice in poll(NULL, 0, 2) (so each becomes a d9 worker and takes its
 * Unpark readings), then wait; the main thread then opens /dev/null 100 times and counts the
 * opens that fail (EMFILE when the agent holds descriptors per worker). Knows nothing of d9.
 *   many-workers N   prints {"threads":N,"opens":100,"failed":K,"errno":E} */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int parked, release;

static void *worker(void *arg)
{
	(void)arg;
	poll(NULL, 0, 2);
	poll(NULL, 0, 2);
	pthread_mutex_lock(&lock);
	parked++;
	pthread_cond_broadcast(&cond);
	while (!release)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	pthread_t *th = calloc((size_t)(n > 0 ? n : 1), sizeof(*th));
	pthread_attr_t a;
	int started = 0, failed = 0, last_err = 0, fds[100];

	if (n < 1 || !th)
		return 2;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 128 << 10);
	for (; started < n; started++)
		if (pthread_create(&th[started], &a, worker, NULL) != 0)
			break;
	pthread_mutex_lock(&lock);
	while (parked < started)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 100; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			failed++;
			last_err = errno;
		}
	}
	for (int i = 0; i < 100; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	pthread_mutex_lock(&lock);
	release = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	printf("{\"threads\":%d,\"opens\":100,\"failed\":%d,\"errno\":%d}\n", started, failed, last_err);
	free(th);
	return 0;
}
