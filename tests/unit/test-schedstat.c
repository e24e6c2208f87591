/* test-schedstat.c: the parse of /proc/thread-self/schedstat's content (agent/schedstat.h). An
 * Unpark's CPU time and run delay come from it, so anything but exactly three decimal numbers,
 * one space apart, and a newline is refused (the agent then reads the file again or gives up on
 * the readings): a number past 2^64 - 1, a sign, a missing or extra field, bytes after the
 * newline. The thread's own file is read and parsed too. */
#include "../../agent/schedstat.h"
#include "t.h"

#include <fcntl.h>
#include <stdint.h>

static int parse(const char *s, uint64_t *cpu, uint64_t *delay)
{
	return d9__sched_parse(s, (ssize_t)strlen(s), cpu, delay);
}

TEST(schedstat_parse_good)
{
	uint64_t c = 1, d = 1;

	T_EQ(parse("0 0 0\n", &c, &d), 0);
	T_EQ(c, 0);
	T_EQ(d, 0);
	T_EQ(parse("123456789012 42 7\n", &c, &d), 0);
	T_ASSERT(c == 123456789012ull && d == 42);
	T_EQ(parse("18446744073709551615 18446744073709551614 1\n", &c, &d), 0);
	T_ASSERT(c == UINT64_MAX && d == UINT64_MAX - 1);
}

TEST(schedstat_parse_refused)
{
	static const char *bad[] = {
		"", "\n", "1 2\n", "1 2 3", "1 2 3 4\n", "1 2 3\n\n", "1 2 3\nx", " 1 2 3\n",
		"1  2 3\n", "1 2  3\n", "+1 2 3\n", "-1 2 3\n", "1 -2 3\n", "1\t2 3\n", "1 2 3 \n",
		"a 2 3\n", "1 2 3x\n", "18446744073709551616 1 1\n", "1 99999999999999999999 1\n",
	};
	uint64_t c = 5, d = 6;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &c, &d) != -1)
			T_FAIL("accepted \"%s\"", bad[i]);
	T_ASSERT(c == 5 && d == 6); /* nothing written on refusal */
	/* the length given is the content: a NUL inside it, or a number cut by it, is refused */
	T_EQ(d9__sched_parse("1 2 3\n", 5, &c, &d), -1);
	T_EQ(d9__sched_parse("1 2 3\n\0", 7, &c, &d), -1);
}

TEST(schedstat_parse_own_file)
{
	char buf[128];
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		T_SKIP("no /proc/thread-self/schedstat on this kernel");
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	T_ASSERT(n > 0);
	uint64_t c, d;
	T_EQ(d9__sched_parse(buf, n, &c, &d), 0); /* (a child just forked may read 0 ns: the
						   * kernel adds its run time at ticks and switches) */
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
