/* patch-preload.c: a preload library for test-preload-patch.sh only (never part of the agent): it
 * links the agent's preload/patch.o and, in its constructor (before main, one thread), looks up
 * patch-target.c's functions with d9__exe_symbol and patches them with d9__patch to hooks that
 * add 1000000 to what the original (*orig) returns. It reports on stderr, one line each:
 *   "patch-test: sym NAME 0xOFFSET" (address minus the load bias, as nm shows it) or "... none",
 *   "patch-test: patch NAME rc=R" and, for a refusal, "patch-test: untouched NAME yes|no" (the
 *   first 64 bytes compared with a copy taken before the call),
 *   "patch-test: thread rc=R": a patch tried while a second thread exists (must be refused),
 *   "patch-test: again rc=R": fp_func patched a second time (must be refused),
 *   "patch-test: running rc=R": cb_func patched from a callback it is running (must be refused),
 *   "patch-test: libdw loaded|absent": whether the lookups loaded libdw (only a stripped program
 *   with DWARF or a debug file is worth it).
 * PATCH_TEST_FAR=1 first fills every free gap within 2 GiB of the program with PROT_NONE
 * reservations (released after the patches), so d9__patch must use its 14-byte absolute jump.
 * PATCH_TEST_ALL="name ..." (at most 30) patches those functions instead (PATCH_TEST_FAR too: the
 * reservations around the first one found), each to a stub of its
 * own that counts the call and jumps on to *orig with every register as it was (any signature):
 * "patch-test: all N patched, M refused, K not found" and, at exit, "patch-test: hits NAME N". */
#include "internal.h"
#include "patch.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* patch.c logs through the agent's d9__log (config.c); this library has its own, same format */
int d9__log_level = D9_LOG_INFO;

void d9__log(int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (level > d9__log_level)
		return;
	int n = snprintf(line, sizeof(line), "d9[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}

/* patch.c goes through the agent's loader gate (lifecycle.c); here there is no fork to wait */
void *d9__dlopen(const char *path, int flags)
{
	return dlopen(path, flags);
}

int d9__dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	return dl_iterate_phdr(cb, arg);
}

#define HOOK(fn)                                                                 \
	static long (*orig_##fn)(long);                                          \
	static long hook_##fn(long x) { return orig_##fn(x) + 1000000; }

HOOK(fp_func)
HOOK(rip_func)
HOOK(rip_long_func)
HOOK(jcc_func)
HOOK(call_func)
HOOK(tail_func)
HOOK(short_func)
HOOK(loop_func)
HOOK(cold_func)
HOOK(expect_func)
HOOK(c_static)
HOOK(jt_func)
HOOK(c_switch)
HOOK(pc_func)
HOOK(bp_func)
HOOK(nosize_func)
HOOK(jcc_long_func)
HOOK(tail_long_func)

static const unsigned char fp_expect[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 }; /* endbr64; push rbp */
static const unsigned char wrong_expect[] = { 0xf3, 0x0f, 0x1e, 0xfa }; /* expect_func has none */

static const struct {
	const char *name;
	void *hook;
	long (**orig)(long);
	const unsigned char *expect;
	size_t expect_len;
} plan[] = {
#define P(fn, e, n) { #fn, (void *)hook_##fn, &orig_##fn, e, n }
	P(fp_func, fp_expect, sizeof(fp_expect)),
	P(rip_func, NULL, 0),
	P(rip_long_func, NULL, 0),
	P(jcc_func, NULL, 0),
	P(call_func, NULL, 0),
	P(tail_func, NULL, 0),
	P(short_func, NULL, 0),
	P(loop_func, NULL, 0),
	P(cold_func, NULL, 0),
	P(expect_func, wrong_expect, sizeof(wrong_expect)),
	P(c_static, NULL, 0),
	P(jt_func, NULL, 0),
	P(c_switch, NULL, 0),
	P(pc_func, NULL, 0),
	P(bp_func, NULL, 0),
	P(nosize_func, NULL, 0),
	P(jcc_long_func, NULL, 0),
	P(tail_long_func, NULL, 0),
#undef P
};

static uintptr_t load_bias;

static int bias_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size, (void)arg;
	load_bias = info->dlpi_addr;
	return 1;
}

/* PATCH_TEST_FAR: PROT_NONE reservations over every gap within 2 GiB of a */
static struct { void *p; size_t n; } resv[256];
static int nresv;

static void reserve_near(uintptr_t a)
{
	char line[512];
	uintptr_t prev = 0x10000, w0 = a > (2ul << 30) ? a - (2ul << 30) : 0, w1 = a + (2ul << 30);
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && nresv < 256) {
		uintptr_t lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		uintptr_t g0 = prev > w0 ? prev : w0, g1 = lo < w1 ? lo : w1;
		if (hi > prev)
			prev = hi;
		g0 = (g0 + 4095) & ~4095ul;
		g1 &= ~4095ul;
		if (g1 <= g0)
			continue;
		void *p = mmap((void *)g0, g1 - g0, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != MAP_FAILED) {
			resv[nresv].p = p;
			resv[nresv++].n = g1 - g0;
		}
	}
	fclose(f);
}

/* called by cb_func: patching cb_func now would put the jump under its return address */
static void *running_fn;

static long patch_running(void)
{
	void *o = NULL;

	return d9__patch(running_fn, (void *)hook_fp_func, &o, NULL, 0);
}

static void *idle_thread(void *arg)
{
	int *fd = arg;
	char c;

	return (void *)(intptr_t)read(fd[0], &c, 1); /* until the constructor writes */
}

/* PATCH_TEST_ALL: stub i is "lock incq all_hits[i]; jmp *all_orig[i]" */
#define ALL_MAX 30
__attribute__((visibility("hidden"))) void *all_orig[ALL_MAX];
__attribute__((visibility("hidden"))) long all_hits[ALL_MAX];
static char all_names[ALL_MAX][128];
static int nall;

#define STUB_(i) "all_stub" #i ": lock incq all_hits+8*" #i "(%rip); jmp *all_orig+8*" #i "(%rip)\n"
#define STUBS5_(a, b, c, d, e) STUB_(a) STUB_(b) STUB_(c) STUB_(d) STUB_(e)
__asm__(".text\n" STUBS5_(0, 1, 2, 3, 4) STUBS5_(5, 6, 7, 8, 9) STUBS5_(10, 11, 12, 13, 14)
	STUBS5_(15, 16, 17, 18, 19) STUBS5_(20, 21, 22, 23, 24) STUBS5_(25, 26, 27, 28, 29));
#define SD_(a, b, c, d, e) all_stub##a, all_stub##b, all_stub##c, all_stub##d, all_stub##e
extern char SD_(0, 1, 2, 3, 4), SD_(5, 6, 7, 8, 9), SD_(10, 11, 12, 13, 14),
	SD_(15, 16, 17, 18, 19), SD_(20, 21, 22, 23, 24), SD_(25, 26, 27, 28, 29);
#define SA_(a, b, c, d, e) &all_stub##a, &all_stub##b, &all_stub##c, &all_stub##d, &all_stub##e
static void *const all_stub[ALL_MAX] = { SA_(0, 1, 2, 3, 4), SA_(5, 6, 7, 8, 9),
	SA_(10, 11, 12, 13, 14), SA_(15, 16, 17, 18, 19), SA_(20, 21, 22, 23, 24),
	SA_(25, 26, 27, 28, 29) };


static void patch_all(const char *list, int far)
{
	int ok = 0, refused = 0, nosym = 0;
	const char *p = list;

	while (*p && nall < ALL_MAX) {
		size_t n = strcspn(p, " \n");
		if (n && n < sizeof(all_names[0])) {
			char *name = all_names[nall];
			memcpy(name, p, n);
			name[n] = 0;
			void *fn = d9__exe_symbol(name);
			if (fn && far && !nresv)
				reserve_near((uintptr_t)fn); /* the runtime's code is within 2 GiB of it */
			if (!fn)
				nosym++;
			else if (d9__patch(fn, all_stub[nall], &all_orig[nall], NULL, 0) == 0)
				ok++, nall++;
			else
				refused++;
		}
		p += n;
		p += strspn(p, " \n");
	}
	for (int i = 0; i < nresv; i++)
		munmap(resv[i].p, resv[i].n);
	fprintf(stderr, "patch-test: all %d patched, %d refused, %d not found\n", ok, refused, nosym);
}

__attribute__((destructor)) static void all_hits_report(void)
{
	for (int i = 0; i < nall; i++)
		fprintf(stderr, "patch-test: hits %s %ld\n", all_names[i], all_hits[i]);
}

__attribute__((constructor)) static void patch_test(void)
{
	static const char *names[] = { "fp_func", "c_func", "c_static", "cold_func", "rip_func",
		"no_such_function" };
	unsigned char before[64];
	const char *all = getenv("PATCH_TEST_ALL");

	const char *far = getenv("PATCH_TEST_FAR");
	if (all) {
		patch_all(all, far && *far == '1');
		return;
	}
	dl_iterate_phdr(bias_cb, NULL);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *a = d9__exe_symbol(names[i]);
		if (a)
			fprintf(stderr, "patch-test: sym %s 0x%lx\n", names[i],
				(unsigned long)((uintptr_t)a - load_bias));
		else
			fprintf(stderr, "patch-test: sym %s none\n", names[i]);
	}
	void *fp = d9__exe_symbol("fp_func");
	if (far && *far == '1' && fp)
		reserve_near((uintptr_t)fp);
	for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
		void *fn = d9__exe_symbol(plan[i].name);
		if (!fn) {
			fprintf(stderr, "patch-test: patch %s nosym\n", plan[i].name);
			continue;
		}
		memcpy(before, fn, sizeof(before));
		int rc = d9__patch(fn, plan[i].hook, (void **)plan[i].orig, plan[i].expect,
			plan[i].expect_len);
		fprintf(stderr, "patch-test: patch %s rc=%d\n", plan[i].name, rc);
		if (rc)
			fprintf(stderr, "patch-test: untouched %s %s\n", plan[i].name,
				!memcmp(before, fn, sizeof(before)) && !*plan[i].orig ? "yes" : "no");
	}
	for (int i = 0; i < nresv; i++)
		munmap(resv[i].p, resv[i].n);
	if (fp)
		fprintf(stderr, "patch-test: again rc=%d\n",
			d9__patch(fp, (void *)hook_fp_func, (void **)&orig_fp_func, NULL, 0));
	running_fn = d9__exe_symbol("cb_func");
	if (running_fn) {
		unsigned char was[16];
		memcpy(was, running_fn, sizeof(was));
		long rc = ((long (*)(long))running_fn)((long)(intptr_t)patch_running);
		fprintf(stderr, "patch-test: running rc=%ld%s\n", rc,
			memcmp(was, running_fn, sizeof(was)) ? " (changed)" : "");
	}
	void *dw = dlopen("libdw.so.1", RTLD_NOW | RTLD_NOLOAD);
	fprintf(stderr, "patch-test: libdw %s\n", dw ? "loaded" : "absent");
	if (dw)
		dlclose(dw);
	/* a second thread: code may be running, no patch */
	void *helper = d9__exe_symbol("helper_func");
	int fd[2];
	pthread_t th;
	if (helper && pipe(fd) == 0) {
		if (pthread_create(&th, NULL, idle_thread, fd) == 0) {
			long (*o)(long) = NULL;
			int rc = d9__patch(helper, (void *)hook_fp_func, (void **)&o, NULL, 0);
			fprintf(stderr, "patch-test: thread rc=%d\n", rc);
			if (write(fd[1], "x", 1) != 1)
				fprintf(stderr, "patch-test: write: %s\n", strerror(errno));
			pthread_join(th, NULL);
		}
		close(fd[0]);
		close(fd[1]);
	}
}
