/* test-pmap.c: the runtime adapters' pointer map (preload/pmap.c): lookups, replacement and
 * deletion against a plain array through several growths, and the sweep of their wait-queue FIFOs
 * (preload/waitq.h) that drops the empty ones: what it keeps is still found, what it drops is
 * gone and freed (agent/mem.c's count of live blocks ends where it began), and the size of the
 * next sweep is 1,024 or twice what is left; waitq_make sweeps when the map reaches it. */
#include "../../agent/mem.c"
#include "../../preload/pmap.c"
#include "../../preload/waitq.h"
#include "t.h"

__thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
int d9__no_calls; /* the agent's (record.c), never set here */

#define N 5000

static void *key(int i)
{
	return (void *)(uintptr_t)(0x7f0000001000ull + (uint64_t)i * 64); /* aligned like objects */
}

TEST(pmap_put_get_del)
{
	struct pmap m = { 0 };
	static void *ref[N];
	size_t before = live;

	T_ASSERT(pm_get(&m, key(1)) == NULL);
	srand(7);
	for (int round = 0; round < 4 * N; round++) {
		int i = rand() % N;
		if (rand() % 3) {
			void *v = (void *)(uintptr_t)(round + 1);
			T_EQ(pm_put(&m, key(i), v), 0);
			ref[i] = v;
		} else {
			pm_del(&m, key(i));
			ref[i] = NULL;
		}
	}
	size_t n = 0;
	for (int i = 0; i < N; i++) {
		T_ASSERT(pm_get(&m, key(i)) == ref[i]);
		n += ref[i] != NULL;
	}
	T_EQ(m.n, n);
	T_ASSERT(m.n * 4 <= m.cap * 3);
	d9__mem_free(m.keys);
	d9__mem_free(m.vals);
	T_EQ(live, before);
}

TEST(pmap_sweep)
{
	struct pmap m = { 0 };
	size_t at = 0;
	static struct waitq *qs[N];
	struct co *waiter = (struct co *)&m; /* any pointer: only its presence is looked at */
	size_t before = live;

	pm_sweep(&m, &at, waitq_kept); /* nothing yet */
	T_EQ(at, 1024);
	at = N + 1; /* no sweep while the FIFOs are made */
	for (int i = 0; i < N; i++) {
		qs[i] = waitq_make(&m, &at, key(i));
		T_ASSERT(qs[i] != NULL);
		T_ASSERT(waitq_make(&m, &at, key(i)) == qs[i]);
		if (i % 5 == 0)
			qs[i]->head = qs[i]->tail = waiter;
	}
	size_t cap = m.cap;
	pm_sweep(&m, &at, waitq_kept);
	T_EQ(m.n, N / 5);
	T_EQ(m.cap, cap);
	T_EQ(at, 2 * (N / 5) > 1024 ? 2 * (N / 5) : 1024);
	for (int i = 0; i < N; i++)
		T_ASSERT(pm_get(&m, key(i)) == (i % 5 == 0 ? qs[i] : NULL));
	/* the next new FIFO past `at` sweeps again: the kept ones emptied now go */
	for (int i = 0; i < N; i += 5)
		qs[i]->head = qs[i]->tail = NULL;
	at = m.n;
	struct waitq *q = waitq_make(&m, &at, key(N));
	T_ASSERT(q != NULL);
	T_EQ(m.n, 1);
	T_ASSERT(pm_get(&m, key(N)) == q);
	T_EQ(at, 1024);
	d9__mem_free(q);
	d9__mem_free(m.keys);
	d9__mem_free(m.vals);
	T_EQ(live, before); /* every FIFO the sweeps dropped was freed */
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
