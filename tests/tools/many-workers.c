/* many-workers.c: a thread-per-connection host for tests/integration/test-agent-hostile.sh. N
 * threads each park twice in poll(NULL, 0, 2) (so each becomes a d9 worker and takes its
 * Unpark readings), then wait; the main thread then opens /dev/null 100 times and counts the
 * opens that fail (EMFILE when the agent holds descriptors per worker). It also counts its open
 * descriptors that name a .../schedstat file: while the threads wait, in a child forked then,
 * and after every thread was joined. Knows nothing of d9.
 *   many-workers N   prints {"threads":N,"opens":100,"failed":K,"errno":E,"schedstat":S,
 *                     "schedstat_child":C,"schedstat_after":A} */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* this process's descriptors whose link ends in "/schedstat" */
static int schedstat_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], link[256];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, link, sizeof(link) - 1);
		if (k > 10) {
			link[k] = 0;
			n += strcmp(link + k - 10, "/schedstat") == 0;
		}
	}
	closedir(d);
	return n;
}

/* the count in a child forked now (the child's only thread is this one) */
static int schedstat_fds_in_child(void)
{
	int p[2], n = -1, st;

	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		n = schedstat_fds();
		ssize_t w = write(p[1], &n, sizeof(n));
		_exit(w == sizeof(n) ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &n, sizeof(n)) != sizeof(n))
		n = -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	return n;
}

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
	int during = schedstat_fds(), child = schedstat_fds_in_child();
	pthread_mutex_lock(&lock);
	release = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	printf("{\"threads\":%d,\"opens\":100,\"failed\":%d,\"errno\":%d,\"schedstat\":%d,"
		"\"schedstat_child\":%d,\"schedstat_after\":%d}\n", started, failed, last_err, during,
		child, schedstat_fds());
	free(th);
	return 0;
}
