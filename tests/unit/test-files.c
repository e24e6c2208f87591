/* test-files.c: the agent's directory scans and stdio streams (agent/files.c) read descriptors of
 * the agent's, so that a program that closes the number in the middle of a scan (a daemon's
 * sweep of 3..1023, seen by the interposers or not) and opens a file of its own under it never
 * has that file read or closed by the agent. With real directories, files and /proc; each test
 * runs in its own child (t.h), with an alarm against a hang. */
#include "../../agent/fdown.c"
#include "../../agent/files.c"
#include "t.h"

#include <pthread.h>
#include <stdlib.h>

/* What fdown.c and files.c call of the agent's (clock.c), stood in for: clock.c brings the
 * logger. */
/* The agent's state that fdown.c reads: the calling thread's and the configuration. */
__thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
int d9__no_calls; /* the agent's (record.c), never set here */
/* paths.c's: no subdirectory of a user here, so no file is given to another owner */
uid_t d9__trace_dir_owner(const char *path)
{
	(void)path;
	return (uid_t)-1;
}
struct d9__agent d9__g;

uint64_t d9__mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char tmpdir[64];

static void rm_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	T_EQ(system(cmd), 0);
}

/* A fresh directory holding n empty files named like long segment names. */
static void make_dir(int n)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/d9-test-files.XXXXXX");
	T_ASSERT(mkdtemp(tmpdir) != NULL);
	for (int i = 0; i < n; i++) {
		char p[160];
		snprintf(p, sizeof(p), "%s/trace.%d.%06d.bin.with-a-long-tail-to-fill-the-buffer", tmpdir,
			4242, i);
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		T_ASSERT(fd >= 0);
		close(fd);
	}
}

/* What the program does in the middle of the agent's use of fd: closes the number, seen by the
 * interposers (close, syscall(SYS_close): d9__fd_host_take) or not (a raw system call), and opens
 * path, which gets the number. Returns that file's descriptor. */
static int program_steals(int fd, int seen, const char *path, struct stat *host)
{
	if (seen)
		d9__fd_host_take(fd);
	T_EQ(syscall(SYS_close, fd), 0);
	if (seen)
		d9__fd_host_done(fd);
	int mine = open(path, O_RDONLY | O_CLOEXEC);
	T_ASSERT(mine >= 0);
	if (mine != fd) { /* a lower number was free: the program's file onto fd all the same */
		int moved = fcntl(mine, F_DUPFD_CLOEXEC, fd);
		close(mine);
		mine = moved;
	}
	T_EQ(mine, fd);
	T_EQ(fstat(mine, host), 0);
	return mine;
}

/* The program's file is still open at its number, and still its file. */
static void program_file_intact(int fd, const struct stat *host)
{
	struct stat st;
	T_EQ(fstat(fd, &st), 0);
	T_ASSERT(st.st_dev == host->st_dev && st.st_ino == host->st_ino);
}

TEST(scan_lists_every_entry_once)
{
	alarm(20);
	make_dir(300); /* about 20 KB of entries: several reads of the 2 KB buffer */
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	struct stat st;
	T_EQ(d9__dir_open(&dir, AT_FDCWD, tmpdir, 0, &st), 0);
	T_ASSERT(S_ISDIR(st.st_mode));
	T_ASSERT(d9__fd_still(dir.fd));
	static char seen[300];
	const char *name;
	int n = 0;
	while ((name = d9__dir_next(&dir, &rd))) {
		int pid, seq;
		T_EQ(sscanf(name, "trace.%d.%d.bin", &pid, &seq), 2);
		T_ASSERT(seq >= 0 && seq < 300 && !seen[seq]);
		seen[seq] = 1;
		n++;
	}
	T_EQ(n, 300);
	T_EQ(rd.err, 0); /* the end */
	T_EQ(d9__file_close(&dir), 0);
	T_EQ(dir.fd, -1);
	rm_dir();
}

TEST(open_refuses_what_is_not_a_directory)
{
	alarm(20);
	make_dir(1);
	struct d9__file dir;
	char p[160];
	snprintf(p, sizeof(p), "%s/link", tmpdir);
	T_EQ(symlink("/tmp", p), 0);
	T_ASSERT(d9__dir_open(&dir, AT_FDCWD, p, 0, NULL) < 0); /* a d9-uid-N: never followed */
	T_EQ(dir.fd, -1);
	snprintf(p, sizeof(p), "%s/trace.4242.000000.bin.with-a-long-tail-to-fill-the-buffer",
		tmpdir);
	T_EQ(d9__dir_open(&dir, AT_FDCWD, p, 1, NULL), -ENOTDIR);
	T_EQ(dir.fd, -1);
	rm_dir();
}

/* The trace directory is followed when a link: a worker's /proc/self/fd/N after a privilege
 * drop (paths.c), where it cannot reach the directory by its path (nginx's workers: their budget
 * deleted nothing while the scan refused the link); any link with `follow`. */
TEST(trace_directory_links_are_followed)
{
	alarm(20);
	make_dir(3);
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	struct stat want, st;
	char p[160];
	T_EQ(stat(tmpdir, &want), 0);
	int kept = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	T_ASSERT(kept >= 0);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", kept);
	T_EQ(d9__dir_open(&dir, AT_FDCWD, p, 1, &st), 0);
	T_ASSERT(st.st_dev == want.st_dev && st.st_ino == want.st_ino);
	int n = 0;
	while (d9__dir_next(&dir, &rd))
		n++;
	T_EQ(n, 3);
	T_EQ(d9__file_close(&dir), 0);
	snprintf(p, sizeof(p), "%s.link", tmpdir);
	T_EQ(symlink(tmpdir, p), 0);
	T_EQ(d9__dir_open(&dir, AT_FDCWD, p, 1, &st), 0);
	T_ASSERT(st.st_dev == want.st_dev && st.st_ino == want.st_ino);
	T_EQ(d9__file_close(&dir), 0);
	unlink(p);
	rm_dir();
}

/* The scan stops at the number's change and the close leaves the program's file open. */
static void scan_stolen(int seen)
{
	alarm(20);
	make_dir(300);
	struct d9__file dir;
	struct d9__dir_read rd = { 0 };
	struct stat host;
	T_EQ(d9__dir_open(&dir, AT_FDCWD, tmpdir, 1, NULL), 0);
	T_ASSERT(d9__dir_next(&dir, &rd) != NULL); /* the scan is under way */
	int fd = dir.fd;
	program_steals(fd, seen, "/usr/lib", &host); /* a directory of the program's */
	const char *name;
	int more = 0;
	while ((name = d9__dir_next(&dir, &rd))) {
		T_ASSERT(!strncmp(name, "trace.", 6)); /* none of the program's directory */
		more++;
	}
	T_ASSERT(more < 299); /* the rest of the buffer at most */
	T_EQ(rd.err, -ESTALE); /* cut short, not the end */
	d9__file_close(&dir);
	program_file_intact(fd, &host);
	rm_dir();
}

TEST(scan_leaves_a_number_the_program_took)
{
	scan_stolen(1);
}

TEST(scan_leaves_a_number_closed_unseen)
{
	scan_stolen(0);
}

/* d9__file_fopen_read on /proc/self/maps (which the kernel refuses nobody in the process) reads
 * it; once the program has the number, the stream's reads fail and its fclose closes nothing. */
static void stream(int steal, int seen)
{
	alarm(20);
	make_dir(1);
	FILE *f = d9__file_fopen_read("/proc/self/maps");
	T_ASSERT(f != NULL);
	setvbuf(f, NULL, _IONBF, 0); /* every getline reads the descriptor */
	char *line = NULL;
	size_t cap = 0;
	T_ASSERT(getline(&line, &cap, f) > 0);
	T_ASSERT(strchr(line, '-') != NULL); /* "start-end perms ..." */
	/* the descriptor under the stream: the highest agent number marked */
	int fd = -1;
	for (int i = 0; i <= d9__fd_top; i++)
		if (d9__fd_still(i))
			fd = i;
	T_ASSERT(fd >= 0);
	struct stat host;
	if (steal) {
		char p[160];
		snprintf(p, sizeof(p), "%s/trace.4242.000000.bin.with-a-long-tail-to-fill-the-buffer",
			tmpdir);
		program_steals(fd, seen, p, &host);
		T_ASSERT(getline(&line, &cap, f) < 0);
	} else {
		while (getline(&line, &cap, f) > 0)
			;
	}
	T_EQ(fclose(f), 0);
	free(line);
	if (steal)
		program_file_intact(fd, &host);
	else
		T_ASSERT(fcntl(fd, F_GETFD) < 0 && errno == EBADF);
	rm_dir();
}

TEST(stream_reads_and_closes_its_own)
{
	stream(0, 0);
}

TEST(stream_leaves_a_number_the_program_took)
{
	stream(1, 1);
}

TEST(stream_leaves_a_number_closed_unseen)
{
	stream(1, 0);
}

/* A file named through a link (d9__file_fopen_read follows it, as fopen does), read, rewound and
 * read again. */
TEST(stream_follows_links_and_seeks)
{
	alarm(20);
	make_dir(0);
	char file[160], link[160], line[64];
	snprintf(file, sizeof(file), "%s/file", tmpdir);
	snprintf(link, sizeof(link), "%s/link", tmpdir);
	FILE *w = fopen(file, "w");
	T_ASSERT(w != NULL);
	fputs("first\nsecond\n", w);
	T_EQ(fclose(w), 0);
	T_EQ(symlink(file, link), 0);
	int before = open("/dev/null", O_RDONLY | O_CLOEXEC);
	T_ASSERT(before >= 0);
	close(before);
	FILE *f = d9__file_fopen_read(link);
	T_ASSERT(f != NULL);
	T_ASSERT(fgets(line, sizeof(line), f) && !strcmp(line, "first\n"));
	T_ASSERT(fgets(line, sizeof(line), f) && !strcmp(line, "second\n"));
	T_EQ(fseek(f, 0, SEEK_SET), 0);
	T_EQ(ftell(f), 0);
	T_ASSERT(fgets(line, sizeof(line), f) && !strcmp(line, "first\n"));
	T_EQ(fclose(f), 0);
	int after = open("/dev/null", O_RDONLY | O_CLOEXEC);
	T_EQ(after, before); /* no descriptor left behind */
	close(after);
	errno = 0;
	T_ASSERT(d9__file_fopen_read(file + 1) == NULL && errno == ENOENT); /* relative: none */
	rm_dir();
}

/* d9__file_read_small: the whole file up to cap - 1 bytes, NUL-terminated; 0 for a file that is
 * not there; errno kept; no descriptor left behind; and no number left marked the agent's. */
TEST(small_files_read_whole)
{
	alarm(20);
	char buf[64], big[8192];
	int before = open("/dev/null", O_RDONLY | O_CLOEXEC);
	T_ASSERT(before >= 0);
	close(before);
	errno = 1234;
	size_t n = d9__file_read_small("/proc/self/stat", big, sizeof(big));
	T_ASSERT(n > 20 && n == strlen(big) && big[n - 1] == '\n');
	T_EQ(errno, 1234);
	T_EQ(d9__file_read_small("/proc/self/stat", buf, 8), 7); /* cut to cap - 1 */
	T_EQ(strlen(buf), 7);
	T_EQ(d9__file_read_small("/nonexistent/d9", buf, sizeof(buf)), 0);
	T_EQ(buf[0], 0);
	T_EQ(errno, 1234);
	int after = open("/dev/null", O_RDONLY | O_CLOEXEC);
	T_EQ(after, before);
	T_ASSERT(!(__atomic_load_n(&d9__fd_words[after], __ATOMIC_SEQ_CST) & D9__FD_OURS));
	close(after);
}

/* A number that fails adopt's identity check (the name now names another file: renamed or
 * removed since the open, as a thread's /proc entry is when it exits between the open and the
 * check): in the shared table it may be the program's by now and is left open, unmarked; on an
 * agent thread with a table of its own nobody else can have refilled it, so it is closed (left
 * open, it would leak in the agent's table for the process's life). */
static int stale_result = -1;

static void *stale_take(void *arg)
{
	const char *other = arg;
	int priv = 0;
	if (strcmp(other, "shared") != 0) {
		d9__fd_private_begin(0);
		if (!d9__self.fd_private) {
			stale_result = 100; /* refused: an older kernel, or a seccomp filter */
			return NULL;
		}
		priv = 1;
	}
	char a[160], b[160];
	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	int fd = open(a, O_RDONLY | O_CLOEXEC);
	struct d9__file f;
	int r = 0;
	if (fd < 0)
		r = 1;
	else if (d9__file_take(&f, fd, AT_FDCWD, b) != -ESTALE || f.fd != -1)
		r = 2;
	else if (priv && (fcntl(fd, F_GETFD) != -1 || errno != EBADF))
		r = 3; /* its own table: closed */
	else if (!priv && fcntl(fd, F_GETFD) < 0)
		r = 4; /* the shared table: left open ... */
	else if (!priv && (__atomic_load_n(&d9__fd_words[fd], __ATOMIC_SEQ_CST) & D9__FD_OURS))
		r = 5; /* ... and not the agent's */
	if (!priv && fd >= 0)
		close(fd);
	stale_result = r;
	return NULL;
}

static void stale(const char *how)
{
	alarm(20);
	make_dir(0);
	char a[160], b[160];
	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	T_ASSERT(close(open(a, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
	T_ASSERT(close(open(b, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
	pthread_t t;
	T_EQ(pthread_create(&t, NULL, stale_take, (void *)how), 0);
	T_EQ(pthread_join(t, NULL), 0);
	rm_dir();
	if (stale_result == 100)
		T_SKIP("no table of its own for the thread here (Linux 5.9, no seccomp filter)");
	T_EQ(stale_result, 0);
}

TEST(stale_take_closes_in_its_own_table)
{
	stale("private");
}

TEST(stale_take_leaves_the_shared_table)
{
	stale("shared");
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
