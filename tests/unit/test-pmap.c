/* test-pmap.c: the runtime adapters' pointer map (preload/pmap.c): lookups, replacement and
 * deletion against a plain array through several growths, and the sweep that drops the values a
 * callback refuses (the adapters' empty FIFOs): what it keeps is still found, what it drops is
 * gone and freed once (the sanitizers would see a leak or a double free), and the size of the
 * next sweep is 1,024 or twice what is left. */
#include "../../preload/pmap.c"
#include "t.h"

#define N 5000

static void *key(int i)
{
	return (void *)(uintptr_t)(0x7f0000001000ull + (uint64_t)i * 64); /* aligned like objects */
}

TEST(pmap_put_get_del)
{
	struct pmap m = { 0 };
	static void *ref[N];

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
	free(m.keys);
	free(m.vals);
}

struct obj { int keep; };

static int kept(void *v)
{
	struct obj *o = v;

	if (o->keep)
		return 1;
	free(o);
	return 0;
}

TEST(pmap_sweep)
{
	struct pmap m = { 0 };
	size_t at = 0;
	static struct obj *objs[N];

	pm_sweep(&m, &at, kept); /* nothing yet */
	T_EQ(at, 1024);
	for (int i = 0; i < N; i++) {
		objs[i] = malloc(sizeof(*objs[i]));
		T_ASSERT(objs[i] != NULL);
		objs[i]->keep = i % 5 == 0;
		T_EQ(pm_put(&m, key(i), objs[i]), 0);
	}
	size_t cap = m.cap;
	pm_sweep(&m, &at, kept);
	T_EQ(m.n, N / 5);
	T_EQ(m.cap, cap);
	T_EQ(at, 2 * (N / 5) > 1024 ? 2 * (N / 5) : 1024);
	for (int i = 0; i < N; i++)
		T_ASSERT(pm_get(&m, key(i)) == (i % 5 == 0 ? objs[i] : NULL));
	/* the table still takes entries and deletions after the sweep */
	for (int i = 0; i < N; i += 5) {
		pm_del(&m, key(i));
		free(objs[i]);
	}
	T_EQ(m.n, 0);
	T_EQ(pm_put(&m, key(3), &m), 0);
	T_ASSERT(pm_get(&m, key(3)) == &m);
	free(m.keys);
	free(m.vals);
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
