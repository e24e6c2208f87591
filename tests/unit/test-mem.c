/* test-mem.c: the agent's mapped memory for what it keeps on the program's threads (agent/mem.c):
 * every size class and a mapping of its own give zeroed, aligned blocks that do not overlap; a
 * freed block comes back zeroed to the next request of its class; realloc keeps the contents
 * from a class to a larger one, to a mapping and through mremap; a small block freed twice or a
 * pointer that is not the agent's is left alone; an absurd size is refused; errno is kept; two threads allocating and freeing at once
 * never get the same block; and in a forked child whose parent had a thread inside, the free
 * lists are given up, not trusted. */
#include "../../agent/mem.c"
#include "t.h"

#include <pthread.h>
#include <stdlib.h>

__thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
int d9__no_calls; /* the agent's (record.c), never set here */

static const size_t sizes[] = { 1, 15, 16, 17, 48, 100, 240, 1000, 2032, 2033, 4080, 4081,
	10000, 100000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int all_bytes(const void *p, size_t n, uint8_t v)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i] != v)
			return 0;
	return 1;
}

TEST(mem_sizes)
{
	void *p[NSIZES];
	size_t before = live;

	for (size_t i = 0; i < NSIZES; i++) {
		p[i] = d9__mem_alloc(sizes[i]);
		T_ASSERT(p[i] != NULL);
		T_EQ((uintptr_t)p[i] % 16, 0);
		T_ASSERT(all_bytes(p[i], sizes[i], 0));
		memset(p[i], (int)(i + 1), sizes[i]);
	}
	T_EQ(live, before + NSIZES);
	for (size_t i = 0; i < NSIZES; i++) /* none overwrote another */
		T_ASSERT(all_bytes(p[i], sizes[i], (uint8_t)(i + 1)));
	for (size_t i = 0; i < NSIZES; i++)
		d9__mem_free(p[i]);
	T_EQ(live, before);
	d9__mem_free(NULL);
}

TEST(mem_reuse_zeroed)
{
	uint8_t *p = d9__mem_alloc(100);
	T_ASSERT(p != NULL);
	memset(p, 0xff, 100);
	d9__mem_free(p);
	uint8_t *q = d9__mem_alloc(90); /* the same class */
	T_ASSERT(q == p);
	T_ASSERT(all_bytes(q, 90, 0));
	d9__mem_free(q);
}

TEST(mem_realloc)
{
	uint8_t *p = d9__mem_realloc(NULL, 40);
	T_ASSERT(p != NULL);
	for (int i = 0; i < 40; i++)
		p[i] = (uint8_t)i;
	T_ASSERT(d9__mem_realloc(p, 10) == p); /* smaller: in place */
	uint8_t *q = d9__mem_realloc(p, 1000); /* a larger class */
	T_ASSERT(q != NULL);
	for (int i = 0; i < 40; i++)
		T_EQ(q[i], i);
	memset(q + 40, 7, 960);
	uint8_t *r = d9__mem_realloc(q, 20000); /* a mapping of its own */
	T_ASSERT(r != NULL);
	for (int i = 0; i < 40; i++)
		T_EQ(r[i], i);
	T_ASSERT(all_bytes(r + 40, 960, 7));
	memset(r + 1000, 9, 19000);
	uint8_t *s = d9__mem_realloc(r, 1u << 20); /* mremap */
	T_ASSERT(s != NULL);
	for (int i = 0; i < 40; i++)
		T_EQ(s[i], i);
	T_ASSERT(all_bytes(s + 1000, 19000, 9));
	T_ASSERT(all_bytes(s + 20000, (1u << 20) - 20000, 0)); /* mapped fresh: zero */
	d9__mem_free(s);
}

TEST(mem_bad_frees)
{
	size_t before = live;
	void *p = d9__mem_alloc(64);
	d9__mem_free(p);
	d9__mem_free(p); /* twice: the second is ignored */
	void *a = d9__mem_alloc(64), *b = d9__mem_alloc(64);
	T_ASSERT(a != b);
	T_EQ(live, before + 2);
	d9__mem_free(a);
	d9__mem_free(b);
	/* a pointer that is not the agent's is left alone (a mapping of its own freed twice is
	 * not caught: its header is unmapped by the first) */
	static uint64_t foreign[8];
	d9__mem_free(&foreign[2]);
	T_ASSERT(d9__mem_realloc(&foreign[2], 200) == NULL);
	T_EQ(live, before);
}

TEST(mem_errno)
{
	errno = 1234;
	T_ASSERT(d9__mem_alloc(SIZE_MAX - 8) == NULL);
	T_EQ(errno, 1234);
	T_ASSERT(d9__mem_alloc(SIZE_MAX / 2 + 1) == NULL);
	T_ASSERT(d9__mem_realloc(d9__mem_alloc(8), SIZE_MAX - 8) == NULL);
	T_EQ(errno, 1234);
	void *p = d9__mem_alloc(30000);
	T_EQ(errno, 1234);
	d9__mem_free(p);
	T_EQ(errno, 1234);
}

#define ROUNDS 100000
#define SLOTS 64

static void *churn(void *arg)
{
	uint8_t tag = (uint8_t)(uintptr_t)arg;
	uint8_t *slot[SLOTS] = { 0 };
	size_t len[SLOTS] = { 0 };
	unsigned seed = tag;
	long bad = 0;

	for (int i = 0; i < ROUNDS; i++) {
		int k = rand_r(&seed) % SLOTS;
		if (slot[k]) {
			bad += !all_bytes(slot[k], len[k], tag);
			d9__mem_free(slot[k]);
			slot[k] = NULL;
		} else {
			len[k] = 1 + (size_t)(rand_r(&seed) % 3000);
			slot[k] = d9__mem_alloc(len[k]);
			if (!slot[k] || !all_bytes(slot[k], len[k], 0))
				return (void *)1;
			memset(slot[k], tag, len[k]);
		}
	}
	for (int k = 0; k < SLOTS; k++)
		if (slot[k]) {
			bad += !all_bytes(slot[k], len[k], tag);
			d9__mem_free(slot[k]);
		}
	return (void *)(uintptr_t)(bad != 0);
}

TEST(mem_threads)
{
	pthread_t t[2];
	void *r[2];
	size_t before = live;

	for (int i = 0; i < 2; i++)
		T_EQ(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(0x41 + i)), 0);
	for (int i = 0; i < 2; i++) {
		T_EQ(pthread_join(t[i], &r[i]), 0);
		T_ASSERT(r[i] == NULL);
	}
	T_EQ(live, before);
}

static void *hold(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu); /* and ends holding it, as a thread the fork left behind would */
	return NULL;
}

TEST(mem_child)
{
	void *p = d9__mem_alloc(200);
	d9__mem_free(p); /* on its class's list */
	pthread_t t;
	T_EQ(pthread_create(&t, NULL, hold, NULL), 0);
	T_EQ(pthread_join(t, NULL), 0);
	d9__mem_child(); /* as fork_child would, with mu held by a thread that is gone */
	void *q = d9__mem_alloc(200);
	T_ASSERT(q != NULL);
	T_ASSERT(q != p); /* the list was given up */
	d9__mem_free(q);
	d9__mem_child(); /* mu free: the lists stay */
	T_ASSERT(d9__mem_alloc(200) == q);
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
