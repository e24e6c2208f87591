/* t.h: the unit-test harness. Tests register themselves (TEST(name) { ... }) and each runs in a
 * forked child, so a crash or sanitizer report fails that test alone (uftrace's habit).
 * Output protocol shared with every test program (tests/run.sh counts these lines):
 *   PASS <name> | FAIL <name>: <why> | SKIP <name>: <why>
 * Usage: t_main(argc, argv) from main(); an argument filters tests by substring. */
#ifndef D9_T_H
#define D9_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void t_fn(void);
struct t_case { const char *name; t_fn *fn; };

#define T_MAX 256
static struct t_case t_cases[T_MAX];
static int t_ncases;

#define TEST(name)                                                              \
	static void test_##name(void);                                          \
	__attribute__((constructor)) static void t_reg_##name(void)             \
	{                                                                       \
		if (t_ncases < T_MAX)                                           \
			t_cases[t_ncases++] = (struct t_case){ #name, test_##name }; \
	}                                                                       \
	static void test_##name(void)

/* Fails the running test with a message; the child exits T_FAILED, so any other status (a crash,
 * a sanitizer report) is reported by the parent instead. */
#define T_FAILED 99
#define T_FAIL(...)                                                             \
	do {                                                                    \
		fprintf(stdout, "FAIL %s: %s:%d: ", t_current, __FILE__, __LINE__); \
		fprintf(stdout, __VA_ARGS__);                                   \
		fputc('\n', stdout);                                            \
		fflush(stdout);                                                 \
		_exit(T_FAILED);                                                \
	} while (0)

#define T_ASSERT(cond)                                                          \
	do {                                                                    \
		if (!(cond))                                                    \
			T_FAIL("assertion failed: %s", #cond);                  \
	} while (0)

#define T_EQ(a, b)                                                              \
	do {                                                                    \
		long long t_a = (long long)(a), t_b = (long long)(b);          \
		if (t_a != t_b)                                                 \
			T_FAIL("%s == %lld, expected %s == %lld", #a, t_a, #b, t_b); \
	} while (0)

/* Marks the running test skipped (with a reason) and ends it. */
#define T_SKIP(...)                                                             \
	do {                                                                    \
		fprintf(stdout, "SKIP %s: ", t_current);                        \
		fprintf(stdout, __VA_ARGS__);                                   \
		fputc('\n', stdout);                                            \
		fflush(stdout);                                                 \
		_exit(77);                                                      \
	} while (0)

static const char *t_current = "";

static int t_main(int argc, char **argv)
{
	int failed = 0;

	for (int i = 0; i < t_ncases; i++) {
		if (argc > 1 && !strstr(t_cases[i].name, argv[1]))
			continue;
		t_current = t_cases[i].name;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			t_cases[i].fn();
			fflush(stdout);
			_exit(0);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("PASS %s\n", t_current);
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
			/* reported by T_SKIP */
		} else {
			failed++;
			if (WIFSIGNALED(status))
				printf("FAIL %s: killed by signal %d\n", t_current, WTERMSIG(status));
			else if (WEXITSTATUS(status) != T_FAILED)
				printf("FAIL %s: exit status %d (crash or sanitizer report?)\n", t_current,
					WEXITSTATUS(status));
		}
		fflush(stdout);
	}
	return failed ? 1 : 0;
}

#endif
