/* heap-who.c: a preload library for test-agent-heap.sh, loaded before libd9agent.so
 * (LD_PRELOAD="heap-who.so libd9agent.so"), so that the agent's calls of malloc, calloc and
 * realloc reach it first. It counts those made from libd9agent.so's own code on the program's
 * threads (every thread not named d9-*) after the constructors, and writes the count and the
 * callers' offsets in the agent to $HEAP_WHO_OUT at exit. The C library's allocator does the
 * rest. No test hook in the agent: what the program's heap would get is what is counted. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

void __libc_free(void *p);

static void *(*r_malloc)(size_t), *(*r_calloc)(size_t, size_t), *(*r_realloc)(void *, size_t);
static unsigned long lo, hi;  /* libd9agent.so's mapped segments */
static unsigned long seen[64]; /* callers, as offsets in the agent */
static int nseen;
static __thread int inside;
/* dlsym's own allocations before the real functions are known */
static char boot[16384];
static size_t boot_at;

static void *from_boot(size_t n)
{
	void *p = boot + boot_at;

	boot_at += (n + 15) & ~(size_t)15;
	return boot_at <= sizeof(boot) ? p : NULL;
}

static int ready(void)
{
	if (r_malloc && r_calloc && r_realloc)
		return 1;
	if (inside)
		return 0;
	inside = 1;
	r_malloc = dlsym(RTLD_NEXT, "malloc");
	r_calloc = dlsym(RTLD_NEXT, "calloc");
	r_realloc = dlsym(RTLD_NEXT, "realloc");
	inside = 0;
	return r_malloc && r_calloc && r_realloc;
}

static void note(void *ra)
{
	char name[17] = "";

	if (inside || !lo || (unsigned long)ra < lo || (unsigned long)ra >= hi)
		return;
	inside = 1; /* prctl is the agent's too */
	prctl(PR_GET_NAME, name, 0, 0, 0);
	if (strncmp(name, "d9-", 3)) {
		int i = __atomic_fetch_add(&nseen, 1, __ATOMIC_RELAXED);
		if (i < 64)
			seen[i] = (unsigned long)ra - lo;
	}
	inside = 0;
}

__attribute__((visibility("default"))) void *malloc(size_t n)
{
	if (!ready())
		return from_boot(n);
	note(__builtin_return_address(0));
	return r_malloc(n);
}

__attribute__((visibility("default"))) void *calloc(size_t k, size_t n)
{
	if (!ready())
		return from_boot(k * n); /* static: zeroed */
	note(__builtin_return_address(0));
	return r_calloc(k, n);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
	if (!ready())
		return NULL;
	note(__builtin_return_address(0));
	return r_realloc(p, n);
}

__attribute__((visibility("default"))) void free(void *p)
{
	if ((char *)p >= boot && (char *)p < boot + sizeof(boot))
		return;
	__libc_free(p);
}

static int find_agent(struct dl_phdr_info *i, size_t size, void *arg)
{
	(void)size, (void)arg;
	if (!strstr(i->dlpi_name, "libd9agent.so"))
		return 0;
	for (int k = 0; k < i->dlpi_phnum; k++)
		if (i->dlpi_phdr[k].p_type == PT_LOAD) {
			unsigned long b = i->dlpi_addr + i->dlpi_phdr[k].p_vaddr;
			unsigned long e = b + i->dlpi_phdr[k].p_memsz;
			if (!lo || b < lo)
				lo = b;
			if (e > hi)
				hi = e;
		}
	return 1;
}

__attribute__((constructor)) static void start(void)
{
	dl_iterate_phdr(find_agent, NULL);
}

__attribute__((destructor)) static void report(void)
{
	const char *out = getenv("HEAP_WHO_OUT");
	FILE *f = out ? fopen(out, "w") : NULL;

	if (!f)
		return;
	if (!lo) /* the agent not found: no count, so the test cannot pass by counting nothing */
		fprintf(f, "no-agent");
	else
		fprintf(f, "%d", nseen);
	for (int i = 0; i < nseen && i < 64; i++)
		fprintf(f, " %#lx", seen[i]);
	fprintf(f, "\n");
	fclose(f);
}
