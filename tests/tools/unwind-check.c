/* unwind-check.c: checks agent/unwind.c on real perf_event samples of this process. The main
 * thread runs main -> unwind_outer -> unwind_middle -> unwind_burn, built without frame pointers
 * (Makefile rule), burning CPU in its own loop, in the vDSO, in libc (memset, strlen), in a qsort
 * callback and in a frame whose CFA is rbp-based, then 400 calls deep (more than the stack copy
 * holds), while a cpu-clock event (999 Hz, user registers + 8 KiB of user stack) samples it;
 * the ring is drained between slices of the burn. Every sample is then unwound with d9__unwind and the frames
 * are named with dladdr (the program is linked -rdynamic). Also: hostile input (random registers
 * and stacks between guard pages), the frame bound, libraries loaded after the unwinder started,
 * descriptors and debug files left behind. Prints PASS/FAIL/SKIP lines (tests/run.sh); run by
 * tests/integration/test-agent-unwind.sh. */
#include "internal.h" /* d9__log_level */
#include "unwind.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int complete_; /* d9__unwind's completeness: not checked here */

#define STACK_DUMP 8192
#define RING_PAGES 256 /* 1 MiB: ~120 samples of 8 KiB */
/* The burns run in slices of this much CPU time, the ring drained between them with the event off
 * (prof_take): 50 samples a slice at 999 Hz, well within the ring, so none is lost however long
 * the machine leaves the thread waiting. (A reader thread that drained every millisecond fell
 * behind on a loaded machine: the ring overflowed and the deep recursion's samples were lost.) */
#define SLICE_NS 50000000ull
#define MAX_FRAMES 128

/* The call chain under test: exported (-rdynamic) so dladdr names them, never inlined, cloned
 * or turned into tail calls. */
int unwind_cmp(const void *a, const void *b);
void unwind_burn(uint64_t until_cpu_ns);
void unwind_middle(uint64_t until_cpu_ns);
void unwind_outer(uint64_t until_cpu_ns);
void unwind_leaf(void);
extern const char unwind_rcx_ra[]; /* a return address in a frame whose CFA is rcx + 8 */
int unwind_deep(int depth, uint64_t until_cpu_ns);
uint64_t unwind_vla(int n);

static volatile uint64_t sink;
static char text[1 << 16];
static int nums[1000];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether the calling thread has used up its CPU budget (until_cpu_ns, its CPU clock), or a wall
 * time limit far beyond it has passed: the number of samples must not depend on how busy the
 * machine is, nor the run time on a machine with no CPU to give. */
static int spent(uint64_t until_cpu_ns, uint64_t wall_limit_ns)
{
	return cpu_ns() >= until_cpu_ns || now_ns() >= wall_limit_ns;
}

__attribute__((noipa)) void unwind_leaf(void)
{
	__asm__ volatile("");
}

/* Hand-written: from the label on, the CFA is rcx + 8, a register that x86-64's rows leave
 * undefined in a caller, so a frame returning here has no CFA (check_bad_input). Never called. */
__asm__(".text\n"
	".globl unwind_rcx_frame\n"
	".type unwind_rcx_frame, @function\n"
	"unwind_rcx_frame:\n"
	".cfi_startproc\n"
	"\tmov %rsp, %rcx\n"
	".cfi_def_cfa_register %rcx\n"
	"\tnop\n"
	".globl unwind_rcx_ra\n"
	"unwind_rcx_ra:\n"
	"\tnop\n"
	"\tret\n"
	".cfi_endproc\n"
	".size unwind_rcx_frame, .-unwind_rcx_frame\n");

__attribute__((noipa)) int unwind_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* A variable-length array makes gcc keep a frame pointer even here: the CFA is rbp+16, so this
 * frame needs the sampled rbp (its PERF_REG -> DWARF mapping) to unwind. */
__attribute__((noipa)) uint64_t unwind_vla(int n)
{
	volatile unsigned char buf[n];
	uint64_t h = 0;

	for (int k = 0; k < 40; k++)
		for (int i = 0; i < n; i++) {
			buf[i] = (unsigned char)(i + k);
			h = h * 31 + buf[i];
		}
	return h;
}

/* Its own loop, the vDSO (clock_gettime), libc leaves (memset, strlen), qsort calling back, a
 * frame with an rbp-based CFA. */
__attribute__((noipa)) void unwind_burn(uint64_t until_cpu_ns)
{
	uint64_t h = 1469598103934665603ull, limit = now_ns() + 20000000000ull;
	unsigned seed = 1;

	while (!spent(until_cpu_ns, limit)) {
		for (int i = 0; i < 60000; i++)
			h = (h ^ (uint64_t)i) * 1099511628211ull;
		for (int i = 0; i < 1000; i++)
			h += now_ns(); /* the vDSO: a module libdw reads from memory */
		h += unwind_vla(512 + (int)(h & 255));
		for (int i = 0; i < 8; i++) {
			memset(text, 'a' + (int)(h & 7), sizeof(text) - 1);
			h += strlen(text);
		}
		for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
			nums[i] = (int)(rand_r(&seed) & 0xffff);
		qsort(nums, sizeof(nums) / sizeof(nums[0]), sizeof(nums[0]), unwind_cmp);
		h += (uint64_t)nums[0];
	}
	sink = h;
}

__attribute__((noipa)) void unwind_middle(uint64_t until_cpu_ns)
{
	unwind_burn(until_cpu_ns);
	sink++;
}

__attribute__((noipa)) void unwind_outer(uint64_t until_cpu_ns)
{
	unwind_middle(until_cpu_ns);
	sink++;
}

/* Recursion deeper than the 8 KiB stack copy holds (~80 bytes a frame): burns at the bottom. */
__attribute__((noipa)) int unwind_deep(int depth, uint64_t until_cpu_ns)
{
	volatile int pad[4];

	pad[0] = depth;
	if (depth > 0)
		return unwind_deep(depth - 1, until_cpu_ns) + pad[0]; /* no tail call */
	uint64_t h = 1, limit = now_ns() + 20000000000ull;
	while (!spent(until_cpu_ns, limit))
		for (int i = 0; i < 20000; i++)
			h = (h ^ (uint64_t)i) * 1099511628211ull;
	return (int)h;
}

/* ---- results ------------------------------------------------------------------------------------ */
static int failures;

static void pass(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void pass(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("PASS %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void fail(const char *name, const char *fmt, ...)
{
	va_list ap;

	failures++;
	printf("FAIL %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

/* ---- the cache of rows against libdw alone ------------------------------------------------------ */
static size_t same_n, same_bad;
static char same_why[300];

/* d9__unwind as the agent calls it (the cache of rows first), then again with libdw alone
 * (d9__unwind_set_fast 0): the frames and the completeness must be the same. Returns the first. */
static int unwind_both(struct d9__unwinder *u, const uint64_t *regs, uint64_t mask,
	const uint8_t *stack, size_t len, uint64_t *ips, int max, int *complete)
{
	uint64_t slow[MAX_FRAMES];
	int slow_complete = 0;
	int n = d9__unwind(u, regs, mask, stack, len, ips, max, complete);
	d9__unwind_set_fast(u, 0);
	int m = d9__unwind(u, regs, mask, stack, len, slow, max, &slow_complete);
	d9__unwind_set_fast(u, 1);
	same_n++;
	if (n == m && *complete == slow_complete && (n < 1 || !memcmp(ips, slow, (size_t)n * 8)))
		return n;
	if (!same_bad++) {
		int k = 0;
		while (k < n && k < m && ips[k] == slow[k])
			k++;
		snprintf(same_why, sizeof(same_why), "ip %#" PRIx64 ", copy %zu bytes, max %d: cache "
			"%d frames (complete %d), libdw %d (complete %d), first difference at frame %d "
			"(%#" PRIx64 " against %#" PRIx64 ")", regs[8], len, max, n, *complete, m,
			slow_complete, k, k < n ? ips[k] : 0, k < m ? slow[k] : 0);
	}
	return n;
}

/* ---- sampling: a cpu-clock event on the main thread, drained between slices of the burn -------- */
struct sample {
	uint64_t ip;
	uint64_t abi;
	uint64_t regs[24];
	uint32_t nregs;
	size_t dyn_size;
	uint8_t *stack; /* dyn_size bytes */
};

struct prof {
	int fd;
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	size_t data_size;
	struct sample *s;
	size_t n, cap;
	uint64_t lost, bad;
	uint8_t rec[STACK_DUMP + 4096]; /* one record, unwrapped from the ring */
};

static void parse_sample(struct prof *p, const uint8_t *r, size_t size)
{
	const uint8_t *q = r + sizeof(struct perf_event_header), *end = r + size;
	int nregs = __builtin_popcountll(D9__UNWIND_REGS_MASK);
	struct sample s = { 0 };
	uint64_t v;

#define TAKE(dst, bytes)                            \
	do {                                        \
		if ((size_t)(end - q) < (bytes)) {  \
			p->bad++;                   \
			return;                     \
		}                                   \
		memcpy((dst), q, (bytes));          \
		q += (bytes);                       \
	} while (0)
	TAKE(&s.ip, 8);
	TAKE(&v, 8); /* pid, tid */
	TAKE(&v, 8); /* time */
	TAKE(&s.abi, 8);
	if (s.abi != PERF_SAMPLE_REGS_ABI_NONE) {
		TAKE(s.regs, (size_t)nregs * 8);
		s.nregs = (uint32_t)nregs;
	}
	uint64_t ssize;
	TAKE(&ssize, 8);
	if (ssize > (size_t)(end - q) || ssize > STACK_DUMP) {
		p->bad++;
		return;
	}
	const uint8_t *stack = q;
	q += ssize;
	uint64_t dyn = 0;
	if (ssize)
		TAKE(&dyn, 8);
#undef TAKE
	if (dyn > ssize)
		dyn = ssize;
	s.dyn_size = dyn;
	s.stack = malloc(dyn ? dyn : 1);
	if (!s.stack)
		return;
	memcpy(s.stack, stack, dyn);
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 1024;
		struct sample *ns = realloc(p->s, cap * sizeof(*ns));
		if (!ns) {
			free(s.stack);
			return;
		}
		p->s = ns;
		p->cap = cap;
	}
	p->s[p->n++] = s;
}

static void drain(struct prof *p)
{
	uint64_t head = __atomic_load_n(&p->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = p->meta->data_tail;

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		for (size_t i = 0; i < sizeof(h); i++)
			((uint8_t *)&h)[i] = p->data[(tail + i) % p->data_size];
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		if (h.type == PERF_RECORD_SAMPLE && h.size <= sizeof(p->rec)) {
			for (size_t i = 0; i < h.size; i++)
				p->rec[i] = p->data[(tail + i) % p->data_size];
			parse_sample(p, p->rec, h.size);
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t lost[2];
			for (size_t i = 0; i < sizeof(lost); i++)
				((uint8_t *)lost)[i] = p->data[(tail + sizeof(h) + i) % p->data_size];
			p->lost += lost[1];
		}
		tail += h.size;
	}
	__atomic_store_n(&p->meta->data_tail, tail, __ATOMIC_RELEASE);
}

/* Takes the samples in the ring, the event off meanwhile: the drain's own code is not sampled. */
static void prof_take(struct prof *p)
{
	ioctl(p->fd, PERF_EVENT_IOC_DISABLE, 0);
	drain(p);
	ioctl(p->fd, PERF_EVENT_IOC_ENABLE, 0);
}

/* Opens the event on the calling thread (not inherited). Returns 0 or -errno. */
static int prof_start(struct prof *p)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.freq = 1;
	a.sample_freq = 999;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
		PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = D9__UNWIND_REGS_MASK;
	a.sample_stack_user = STACK_DUMP;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.disabled = 1;
	p->fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (p->fd < 0)
		return -errno;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	p->data_size = RING_PAGES * page;
	void *m = mmap(NULL, page + p->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (m == MAP_FAILED) {
		int e = -errno;
		close(p->fd);
		return e;
	}
	p->meta = m;
	p->data = (uint8_t *)m + page;
	ioctl(p->fd, PERF_EVENT_IOC_ENABLE, 0);
	return 0;
}

static void prof_stop(struct prof *p)
{
	ioctl(p->fd, PERF_EVENT_IOC_DISABLE, 0);
	drain(p);
	munmap(p->meta, (size_t)sysconf(_SC_PAGESIZE) + p->data_size);
	close(p->fd);
}

/* ---- naming frames ------------------------------------------------------------------------------ */
enum { F_OTHER, F_LIBC, F_BURN, F_MIDDLE, F_OUTER, F_MAIN, F_CMP, F_DEEP, F_VDSO, F_VLA };

/* What code address a (a return address when ret) belongs to. */
static int classify(uint64_t a, int ret)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	uintptr_t x = (uintptr_t)(ret ? a - 1 : a);

	if (!dladdr1((void *)x, &info, (void **)&sym, RTLD_DL_SYMENT))
		return F_OTHER;
	if (info.dli_sname && sym && info.dli_saddr && x >= (uintptr_t)info.dli_saddr &&
		x < (uintptr_t)info.dli_saddr + sym->st_size) {
		static const struct { const char *name; int kind; } own[] = {
			{ "unwind_burn", F_BURN }, { "unwind_middle", F_MIDDLE },
			{ "unwind_outer", F_OUTER }, { "main", F_MAIN }, { "unwind_cmp", F_CMP },
			{ "unwind_deep", F_DEEP }, { "unwind_vla", F_VLA },
		};
		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			if (!strcmp(info.dli_sname, own[i].name))
				return own[i].kind;
	}
	if (info.dli_fname && strstr(info.dli_fname, "/libc.so"))
		return F_LIBC;
	if (info.dli_fname && strstr(info.dli_fname, "vdso"))
		return F_VDSO;
	return F_OTHER;
}

/* 1 when kinds[i..] reads burn, middle, outer, main. */
static int chain_at(const int *kinds, int n, int i)
{
	static const int want[] = { F_BURN, F_MIDDLE, F_OUTER, F_MAIN };

	if (i + 4 > n)
		return 0;
	for (int k = 0; k < 4; k++)
		if (kinds[i + k] != want[k])
			return 0;
	return 1;
}

/* Walks the sample's rbp chain the way a frame-pointer unwinder would: 1 when it finds main. */
static int fp_reaches_main(const struct sample *s)
{
	/* PERF_REG_X86 order within D9__UNWIND_REGS_MASK: AX BX CX DX SI DI BP SP IP R8..R15 */
	uint64_t bp = s->regs[6], sp = s->regs[7];

	for (int depth = 0; depth < 64; depth++) {
		if (bp < sp || bp - sp + 16 > s->dyn_size)
			return 0;
		uint64_t next, ret;
		memcpy(&next, s->stack + (bp - sp), 8);
		memcpy(&ret, s->stack + (bp - sp) + 8, 8);
		if (classify(ret, 1) == F_MAIN)
			return 1;
		if (next <= bp)
			return 0;
		bp = next;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ---- descriptors: libdw keeps module files open unless unwind.c takes care ------------------ */
#define MAX_FDS 1024

/* Marks the open descriptors in open_fds; returns how many. */
static int fds_snapshot(unsigned char *open_fds)
{
	int n = 0;

	memset(open_fds, 0, MAX_FDS);
	for (int fd = 0; fd < MAX_FDS; fd++)
		if (fcntl(fd, F_GETFD) >= 0) {
			open_fds[fd] = 1;
			n++;
		}
	return n;
}

/* Descriptors open now that were not in before: how many, how many lack FD_CLOEXEC, the first
 * one's target in first. */
static int fds_new(const unsigned char *before, int *no_cloexec, char *first, size_t cap)
{
	int n = 0;

	*no_cloexec = 0;
	first[0] = 0;
	for (int fd = 0; fd < MAX_FDS; fd++) {
		int fl = fcntl(fd, F_GETFD);
		if (fl < 0 || before[fd])
			continue;
		n++;
		if (!(fl & FD_CLOEXEC))
			(*no_cloexec)++;
		if (!first[0]) {
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			ssize_t k = readlink(link, first, cap - 1);
			first[k > 0 ? k : 0] = 0;
		}
	}
	return n;
}

static long rss_kib(void)
{
	long pages_total = 0, pages_rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2)
		pages_rss = 0;
	fclose(f);
	return pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ---- the checks --------------------------------------------------------------------------------- */
static void check_samples(struct d9__unwinder *u, struct prof *p, double new_us)
{
	uint64_t ips[MAX_FRAMES];
	int kinds[MAX_FRAMES];
	size_t own = 0, own_ok = 0, libc = 0, libc_ok = 0, cb = 0, cb_ok = 0, fp_ok = 0;
	size_t vdso = 0, vdso_ok = 0, vla = 0, vla_ok = 0;
	size_t depth_sum = 0, depth_n = 0, no_regs = 0, deep = 0, deep_ok = 0, deep_full = 0;
	int depth_max = 0;
	char why[5][256] = { "", "", "", "", "" };
	double first_us = -1;
	size_t real_n = 0, real_fast = 0;

	for (size_t i = 0; i < p->n; i++) {
		struct sample *s = &p->s[i];
		if (!s->nregs) {
			no_regs++;
			continue;
		}
		uint64_t t0 = now_ns();
		int n = d9__unwind(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, ips,
			MAX_FRAMES, &complete_);
		if (first_us < 0)
			first_us = (double)(now_ns() - t0) / 1e3;
		/* the cache of rows against libdw: this copy, shorter ones (return addresses above
		 * the copy, refused reads), and fewer frames allowed */
		uint64_t f0, s0, f1, s1, cmp[MAX_FRAMES];
		d9__unwind_counts(u, &f0, &s0);
		unwind_both(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, cmp,
			MAX_FRAMES, &complete_);
		d9__unwind_counts(u, &f1, &s1);
		real_fast += f1 - f0;
		real_n++;
		for (size_t cut = 64; cut < s->dyn_size; cut *= 4)
			unwind_both(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, cut, cmp, MAX_FRAMES,
				&complete_);
		unwind_both(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, cmp, 3,
			&complete_);
		if (classify(s->ip, 0) == F_VLA) {
			/* made up from this IP, where CFA = rbp + 16: a second frame in the same code
			 * whose saved rbp points below its own SP, so the third frame's SP goes down,
			 * where both must stop; and a first frame whose CFA lies below its SP */
			uint64_t bent[17] = { 0 }, fake[64] = { 0 }, base = 0x7ffd00000000ull;
			bent[7] = base;
			bent[8] = s->ip;
			bent[6] = base + 256; /* frame 1: CFA base + 272, its caller's SP */
			fake[264 / 8] = s->ip + 1; /* a return address into the same rows */
			fake[256 / 8] = base + 128; /* frame 2's rbp: CFA base + 144, below base + 272 */
			fake[136 / 8] = s->ip + 1;
			fake[128 / 8] = base + 64;
			unwind_both(u, bent, D9__UNWIND_REGS_MASK, (const uint8_t *)fake, sizeof(fake),
				cmp, MAX_FRAMES, &complete_);
			bent[6] = base - 64;
			unwind_both(u, bent, D9__UNWIND_REGS_MASK, (const uint8_t *)fake, sizeof(fake),
				cmp, MAX_FRAMES, &complete_);
		}
		if (n < 1 || ips[0] != s->ip) {
			fail("unwind-ip", "sample %zu: n %d, ips[0] %#" PRIx64 ", sample ip %#" PRIx64,
				i, n, n > 0 ? ips[0] : 0, s->ip);
			return;
		}
		for (int k = 0; k < n; k++)
			kinds[k] = classify(ips[k], k > 0);
		int ok = 0, slot = -1;
		if (kinds[0] == F_DEEP) {
			/* truncated stacks: as many frames as the copy holds (~100 of 80 bytes),
			 * every one unwind_deep, nothing after them; and exactly max when fewer */
			int all = 1, few;
			uint64_t few_ips[32];
			for (int k = 0; k < n; k++)
				all &= kinds[k] == F_DEEP;
			few = d9__unwind(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size,
				few_ips, 32, &complete_);
			deep++;
			if (all && n >= 50 && n < MAX_FRAMES && few == 32) {
				deep_ok++;
				deep_full += (size_t)n;
			}
			continue;
		}
		if (kinds[0] == F_BURN) {
			own++;
			slot = 0;
			ok = chain_at(kinds, n, 0);
			if (ok)
				fp_ok += fp_reaches_main(s);
		} else if (kinds[0] == F_LIBC) {
			libc++;
			slot = 1;
			int k = 1;
			while (k < n && kinds[k] == F_LIBC)
				k++;
			ok = chain_at(kinds, n, k);
		} else if (kinds[0] == F_CMP) {
			cb++;
			slot = 2;
			int k = 1;
			while (k < n && kinds[k] == F_LIBC)
				k++;
			ok = k > 1 && chain_at(kinds, n, k);
		} else if (kinds[0] == F_VLA) {
			vla++;
			slot = 4;
			ok = chain_at(kinds, n, 1);
		} else if (kinds[0] == F_VDSO) {
			int k = 1;
			while (k < n && (kinds[k] == F_VDSO || kinds[k] == F_LIBC))
				k++;
			if (k < n && kinds[k] == F_DEEP)
				continue; /* unwind_deep's own clock reads */
			vdso++;
			slot = 3;
			ok = chain_at(kinds, n, k);
		}
		if (slot < 0)
			continue;
		if (ok) {
			size_t *okp = slot == 0 ? &own_ok : slot == 1 ? &libc_ok : slot == 2 ? &cb_ok :
				slot == 3 ? &vdso_ok : &vla_ok;
			(*okp)++;
			depth_sum += (size_t)n;
			depth_n++;
			if (n > depth_max)
				depth_max = n;
		} else if (!why[slot][0]) {
			int len = snprintf(why[slot], sizeof(why[slot]), "e.g. %d frames:", n);
			for (int k = 0; k < n && k < 8 && len < (int)sizeof(why[slot]) - 24; k++) {
				Dl_info info;
				const char *name = dladdr((void *)(uintptr_t)(k ? ips[k] - 1 : ips[k]),
					&info) && info.dli_sname ? info.dli_sname : "?";
				len += snprintf(why[slot] + len, sizeof(why[slot]) - (size_t)len,
					" %.20s", name);
			}
		}
	}

	printf("# %zu samples (%zu without registers, %" PRIu64 " lost, %" PRIu64 " malformed): "
		"%zu in unwind_burn, %zu in libc, %zu in unwind_cmp, %zu in the vDSO, %zu in unwind_vla, "
		"%zu in unwind_deep\n", p->n, no_regs, p->lost, p->bad, own, libc, cb, vdso, vla, deep);
	if (p->n < 400) {
		fail("unwind-sampling", "%zu samples in 800 ms of CPU at 999 Hz, want >= 400", p->n);
		return;
	}
	pass("unwind-sampling", "%zu samples, %" PRIu64 " lost", p->n, p->lost);

	/* "most": the only samples allowed to fail are the odd one the kernel took mid-prologue in
	 * a function whose CFI libdw cannot use; with correct CFI it is all of them */
	struct { const char *name, *what; size_t n, ok, min; } cases[] = {
		{ "unwind-own-code", "in unwind_burn: middle, outer, main right above", own, own_ok, 20 },
		{ "unwind-libc-leaf", "in libc: then burn, middle, outer, main", libc, libc_ok, 20 },
		{ "unwind-libc-callback", "in the qsort callback: libc frames, then burn, middle, "
			"outer, main", cb, cb_ok, 5 },
		{ "unwind-vdso", "in the vDSO: then burn, middle, outer, main", vdso, vdso_ok, 5 },
		{ "unwind-rbp-frame", "in unwind_vla (CFA = rbp+16): then burn, middle, outer, main",
			vla, vla_ok, 5 },
	};
	for (int c = 0; c < 5; c++) {
		if (cases[c].n < cases[c].min)
			fail(cases[c].name, "%zu samples %s, want >= %zu", cases[c].n, cases[c].what,
				cases[c].min);
		else if (cases[c].ok * 10 < cases[c].n * 9)
			fail(cases[c].name, "%zu of %zu samples %s (want >= 90%%); %s", cases[c].ok,
				cases[c].n, cases[c].what, why[c]);
		else
			pass(cases[c].name, "%zu of %zu samples %s", cases[c].ok, cases[c].n,
				cases[c].what);
	}
	if (deep < 20)
		fail("unwind-truncated", "%zu samples in the 400-deep recursion, want >= 20", deep);
	else if (deep_ok * 10 < deep * 9)
		fail("unwind-truncated", "only %zu of %zu samples in the 400-deep recursion give >= 50 "
			"frames (of max %d), all unwind_deep, and exactly 32 of max 32", deep_ok, deep,
			MAX_FRAMES);
	else
		pass("unwind-truncated", "%zu of %zu samples 400 calls deep: %.1f frames on average, "
			"all the 8 KiB copy holds and all unwind_deep; 32 of max 32", deep_ok, deep,
			(double)deep_full / (double)deep_ok);
	/* The test proves nothing if a frame-pointer walk could do the same. */
	if (own_ok && fp_ok * 10 >= own_ok)
		fail("unwind-no-frame-pointers", "a frame-pointer walk reaches main in %zu of %zu "
			"samples: the chain was built with frame pointers", fp_ok, own_ok);
	else
		pass("unwind-no-frame-pointers", "a frame-pointer walk reaches main in %zu of %zu "
			"samples that DWARF unwinds", fp_ok, own_ok);

	/* the cache must serve most real samples, or it saves nothing */
	if (real_n < 100 || real_fast * 10 < real_n * 9)
		fail("unwind-fast-path", "the cache of rows unwound %zu of %zu samples (want >= 90%%)",
			real_fast, real_n);
	else
		pass("unwind-fast-path", "the cache of rows unwound %zu of %zu samples; libdw the "
			"others", real_fast, real_n);

	/* Cost: every sample again, warm (modules and CFI already loaded), 5 rounds; the stacks
	 * 100 frames deep (unwind_deep) apart from the others. Wall time per call for the
	 * percentiles; the means are this thread's CPU time, which a busy machine's preemptions do
	 * not inflate. */
	double *us = malloc(p->n * 5 * sizeof(*us));
	unsigned char *is_deep = malloc(p->n ? p->n : 1);
	size_t m = 0, calls[2] = { 0, 0 };
	for (size_t i = 0; i < p->n && is_deep; i++)
		is_deep[i] = classify(p->s[i].ip, 0) == F_DEEP; /* dladdr is slow: not in the timing */
	uint64_t frames[2] = { 0, 0 }, cpu[2] = { 0, 0 };
	for (int deep_pass = 0; deep_pass < 2 && us && is_deep; deep_pass++) {
		uint64_t c0 = cpu_ns();
		for (int round = 0; round < 5; round++)
			for (size_t i = 0; i < p->n; i++) {
				struct sample *s = &p->s[i];
				if (!s->nregs || is_deep[i] != deep_pass)
					continue;
				uint64_t t0 = now_ns();
				frames[deep_pass] += (uint64_t)d9__unwind(u, s->regs,
					D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, ips, MAX_FRAMES,
					&complete_);
				us[m++] = (double)(now_ns() - t0) / 1e3;
				calls[deep_pass]++;
			}
		cpu[deep_pass] = cpu_ns() - c0;
	}
	/* libdw alone, for the record (agent/COST.md): one round of the same samples */
	uint64_t c_slow = cpu_ns(), n_slow = 0;
	d9__unwind_set_fast(u, 0);
	for (size_t i = 0; i < p->n && is_deep; i++)
		if (p->s[i].nregs && !is_deep[i]) {
			d9__unwind(u, p->s[i].regs, D9__UNWIND_REGS_MASK, p->s[i].stack,
				p->s[i].dyn_size, ips, MAX_FRAMES, &complete_);
			n_slow++;
		}
	d9__unwind_set_fast(u, 1);
	c_slow = cpu_ns() - c_slow;
	free(is_deep);
	if (!calls[0] || !calls[1]) {
		fail("unwind-cost", "no sample to time");
		free(us);
		return;
	}
	qsort(us, m, sizeof(*us), cmp_double);
	double mean = (double)cpu[0] / 1e3 / (double)calls[0];
	double mean_deep = (double)cpu[1] / 1e3 / (double)calls[1];
	double fr = (double)frames[0] / (double)calls[0], fr_deep = (double)frames[1] / (double)calls[1];
	printf("# cost: d9__unwind_new %.0f us, first unwind %.0f us; warm, CPU per unwind: %.1f us "
		"for %.1f frames, %.1f us for %.1f frames (%.2f us a frame); wall: median %.1f us, "
		"p99 %.1f us, max %.1f us\n", new_us, first_us, mean, fr, mean_deep, fr_deep,
		(double)(cpu[0] + cpu[1]) / 1e3 / (double)(frames[0] + frames[1]), us[m / 2],
		us[m * 99 / 100], us[m - 1]);
	printf("# libdw alone (no cache of rows): %.1f us per unwind of the same stacks\n",
		n_slow ? (double)c_slow / 1e3 / (double)n_slow : 0.0);
	printf("# depth of the checked stacks: mean %.1f, max %d frames\n",
		depth_n ? (double)depth_sum / (double)depth_n : 0.0, depth_max);
	/* a generous bound, not a benchmark: a few thousand unwinds per second must stay cheap */
	if (mean > 500 || mean_deep > 2000)
		fail("unwind-cost", "%.1f us per unwind of %.1f frames (want < 500), %.1f us of %.1f "
			"frames (want < 2000)", mean, fr, mean_deep, fr_deep);
	else
		pass("unwind-cost", "CPU per warm unwind %.1f us for %.1f frames, %.1f us for %.1f "
			"frames; first unwind %.0f us", mean, fr, mean_deep, fr_deep, first_us);
	free(us);
}

/* The memo (unwind.c): a sample unwound again takes the kept walk; one that differs from it in
 * a word the walk read (a return address, a saved register) or in a register it used must not,
 * and one that differs anywhere else may, but every answer must be libdw's for that sample
 * (unwind_both; unwind-fast-same counts the differences). */
static void check_memo(struct d9__unwinder *u, struct prof *p)
{
	uint64_t ips[MAX_FRAMES], cmp[MAX_FRAMES], regs[24];
	uint8_t *copy = malloc(STACK_DUMP);
	size_t bad0 = same_bad, again = 0, again_hit = 0, changed = 0, changed_hit = 0;
	size_t ra = 0, ra_hit = 0;
	unsigned seed = 7;

	for (size_t i = 0; i < p->n && i < 400 && copy; i++) {
		struct sample *s = &p->s[i];
		if (!s->nregs || s->dyn_size > STACK_DUMP)
			continue;
		int n = d9__unwind(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, ips,
			MAX_FRAMES, &complete_);
		if (n < 1 || n > 32)
			continue; /* longer walks are not kept */
		uint64_t h = d9__unwind_memo_hits(u);
		unwind_both(u, s->regs, D9__UNWIND_REGS_MASK, s->stack, s->dyn_size, cmp, MAX_FRAMES,
			&complete_);
		again++;
		again_hit += d9__unwind_memo_hits(u) > h;
		memcpy(copy, s->stack, s->dyn_size);
		memcpy(regs, s->regs, sizeof(regs));
		/* each return address the copy holds, changed: a word the walk read */
		for (size_t w = 0; w + 8 <= s->dyn_size; w += 8) {
			uint64_t v;
			memcpy(&v, copy + w, 8);
			int is_ra = 0;
			for (int k = 1; k < n; k++)
				is_ra |= v == ips[k];
			if (!is_ra)
				continue;
			uint64_t bent = v + 16;
			memcpy(copy + w, &bent, 8);
			h = d9__unwind_memo_hits(u);
			unwind_both(u, regs, D9__UNWIND_REGS_MASK, copy, s->dyn_size, cmp, MAX_FRAMES,
				&complete_);
			ra++;
			ra_hit += d9__unwind_memo_hits(u) > h;
			memcpy(copy + w, &v, 8);
			/* the sample itself again, so that the next change meets the kept walk */
			d9__unwind(u, regs, D9__UNWIND_REGS_MASK, copy, s->dyn_size, cmp, MAX_FRAMES,
				&complete_);
		}
		/* random words and registers (IP and SP excepted: they choose the slot) */
		for (int t = 0; t < 8; t++) {
			size_t w = (size_t)rand_r(&seed) % (s->dyn_size / 8) * 8;
			int r = rand_r(&seed) % 17;
			uint64_t v, bent;
			memcpy(&v, copy + w, 8);
			bent = v ^ ((uint64_t)rand_r(&seed) << 3 | 8);
			if (t & 1)
				memcpy(copy + w, &bent, 8);
			else if (r != 7 && r != 8)
				regs[r] ^= (uint64_t)rand_r(&seed) << 3 | 8;
			h = d9__unwind_memo_hits(u);
			unwind_both(u, regs, D9__UNWIND_REGS_MASK, copy, s->dyn_size, cmp, MAX_FRAMES,
				&complete_);
			changed++;
			changed_hit += d9__unwind_memo_hits(u) > h;
			memcpy(copy, s->stack, s->dyn_size);
			memcpy(regs, s->regs, sizeof(regs));
			d9__unwind(u, regs, D9__UNWIND_REGS_MASK, copy, s->dyn_size, cmp, MAX_FRAMES,
				&complete_);
		}
	}
	free(copy);
	if (again < 100 || again_hit * 10 < again * 9 || ra_hit * 10 > ra || ra < again ||
		same_bad != bad0 || !changed_hit || changed_hit == changed)
		fail("unwind-memo", "%zu of %zu samples unwound again came from the memo (want >= "
			"90%% of >= 100); %zu of %zu with a return address changed did (want under 10%%, and >= "
			"one per sample); %zu of %zu with a random word or register changed (want some, "
			"not all); %zu differ from libdw (want 0)", again_hit, again, ra_hit, ra,
			changed_hit, changed, same_bad - bad0);
	else
		pass("unwind-memo", "%zu of %zu samples unwound again came from the memo; none of %zu "
			"with a return address changed; %zu of %zu with a random word or register "
			"changed; all of them libdw's frames", again_hit, again, ra, changed_hit,
			changed);
}

/* A sample made up by hand: only IP and SP are set (the rest 0), in D9__UNWIND_REGS_MASK order. */
static int fake_unwind(struct d9__unwinder *u, uint64_t ip, const uint8_t *stack, size_t len,
	uint64_t *ips, int max)
{
	uint64_t regs[17] = { 0 };

	regs[7] = 0x7ffd00000000ull; /* SP: any value, only the copy is read */
	regs[8] = ip;
	return d9__unwind(u, regs, D9__UNWIND_REGS_MASK, stack, len, ips, max, &complete_);
}

/* Hostile input: random registers and stacks, the copy placed between PROT_NONE pages so any
 * read outside it crashes the test. Also the frame bound and the trivial cases. */
static void check_bad_input(struct d9__unwinder *u)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), span = 2 * page + STACK_DUMP;
	uint8_t *m = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		-1, 0);
	uint64_t ips[MAX_FRAMES], regs[17];

	if (m == MAP_FAILED) {
		fail("unwind-bad-input", "mmap: %s", strerror(errno));
		return;
	}
	mprotect(m, page, PROT_NONE);
	mprotect(m + page + STACK_DUMP, page, PROT_NONE);
	uint8_t *stack = m + page; /* STACK_DUMP bytes between two guard pages */
	uint64_t code[] = { (uint64_t)(uintptr_t)strlen, (uint64_t)(uintptr_t)qsort,
		(uint64_t)(uintptr_t)unwind_burn, (uint64_t)(uintptr_t)unwind_middle,
		(uint64_t)(uintptr_t)printf, (uint64_t)(uintptr_t)d9__unwind,
		(uint64_t)(uintptr_t)unwind_vla }; /* CFA = rbp + 16: an SP that can go down */
	const int ncode = (int)(sizeof(code) / sizeof(code[0]));
	unsigned seed = 12345;
	int worst = 0, bad = 0;
	char why[200] = "";

	for (int it = 0; it < 20000; it++) {
		for (int r = 0; r < 17; r++)
			regs[r] = ((uint64_t)rand_r(&seed) << 33) ^ ((uint64_t)rand_r(&seed) << 2);
		uint64_t *w = (uint64_t *)stack;
		for (size_t k = 0; k < STACK_DUMP / 8; k++) {
			int c = rand_r(&seed) % 4;
			w[k] = c == 0 ? code[rand_r(&seed) % ncode] + (uint64_t)(rand_r(&seed) % 512) :
				c == 1 ? regs[7] + (uint64_t)(rand_r(&seed) % STACK_DUMP) :
				((uint64_t)rand_r(&seed) << 31) ^ (uint64_t)rand_r(&seed);
		}
		regs[8] = code[it % ncode] + (uint64_t)(rand_r(&seed) % 2048);
		if (it % 7 == 0)
			regs[6] = regs[7] + (uint64_t)(rand_r(&seed) % STACK_DUMP); /* rbp in the copy */
		size_t len = (size_t)(rand_r(&seed) % (STACK_DUMP + 1));
		int max = 1 + rand_r(&seed) % MAX_FRAMES;
		/* a short copy ends at the upper guard page too */
		int n = unwind_both(u, regs, D9__UNWIND_REGS_MASK, stack + STACK_DUMP - len, len,
			ips, max, &complete_);
		if (n < 1 || n > max || ips[0] != regs[8]) {
			if (!bad++)
				snprintf(why, sizeof(why), "iteration %d: n %d of max %d, ips[0] %#" PRIx64
					" for ip %#" PRIx64, it, n, max, ips[0], regs[8]);
		}
		if (n > worst)
			worst = n;
	}
	if (bad)
		fail("unwind-bad-input", "%d bad results, %s", bad, why);
	else
		pass("unwind-bad-input", "20000 random register sets and stacks: no crash, no read "
			"outside the copy, 1 <= n <= max (deepest %d)", worst);

	/* Made up, against libdw alone: the entry of unwind_leaf (CFA = rsp + 8) returning to 1
	 * (a row looked up at 0, the empty slot's key), and returning into a frame whose CFA
	 * register is undefined (no return address, and no read refused) */
	memset(regs, 0, sizeof(regs));
	regs[7] = 0x7ffd00000000ull;
	regs[8] = (uint64_t)(uintptr_t)unwind_leaf;
	uint64_t made[8] = { 1, 0, 0, 0, 0, 0, 0, 0 };
	unwind_both(u, regs, D9__UNWIND_REGS_MASK, (const uint8_t *)made, sizeof(made), ips, 8,
		&complete_);
	made[0] = (uint64_t)(uintptr_t)unwind_rcx_ra;
	unwind_both(u, regs, D9__UNWIND_REGS_MASK, (const uint8_t *)made, sizeof(made), ips, 8,
		&complete_);

	/* Trivial cases */
	memset(regs, 0, sizeof(regs));
	regs[7] = 0x7ffd00000000ull;
	regs[8] = (uint64_t)(uintptr_t)unwind_leaf;
	int n1 = d9__unwind(u, regs, D9__UNWIND_REGS_MASK & ~(1ull << 8), stack, 64, ips, 8, &complete_);
	int n2 = d9__unwind(u, regs, D9__UNWIND_REGS_MASK, stack, 64, ips, 0, &complete_);
	int n3 = d9__unwind(u, &regs[8], 1ull << 8, stack, 64, ips, 8, &complete_); /* IP only */
	int n4 = d9__unwind(NULL, regs, D9__UNWIND_REGS_MASK, stack, 64, ips, 8, &complete_);
	memset(stack, 0, STACK_DUMP);
	int n5 = fake_unwind(u, (uint64_t)(uintptr_t)unwind_leaf, stack, STACK_DUMP, ips, 8);
	if (n1 != 0 || n2 != 0 || n3 != 1 || n4 != 1 || n5 != 1)
		fail("unwind-trivial", "no IP %d (want 0), max 0 %d (want 0), only IP %d (want 1), "
			"no unwinder %d (want 1), zero return address %d (want 1)", n1, n2, n3, n4, n5);
	else
		pass("unwind-trivial", "no IP: 0 frames; max 0: 0; IP only: 1; no unwinder: 1; zero "
			"return address: 1");

	/* The frame bound: a stack of return addresses to unwind_leaf's entry, whose CFA is SP+8, so
	 * every 8 bytes are one more frame: 1024 frames' worth in the copy. */
	uint64_t *w = (uint64_t *)stack;
	for (size_t k = 0; k < STACK_DUMP / 8; k++)
		w[k] = (uint64_t)(uintptr_t)unwind_leaf + 1; /* "returns" just after its entry */
	int n6 = fake_unwind(u, (uint64_t)(uintptr_t)unwind_leaf, stack, STACK_DUMP, ips, 64);
	int n7 = fake_unwind(u, (uint64_t)(uintptr_t)unwind_leaf, stack, 80, ips, 64);
	if (n6 != 64 || n7 < 2 || n7 > 11)
		fail("unwind-bound", "1024 frames in the copy gave %d of max 64 (want 64); an 80-byte "
			"copy gave %d (want 2..11)", n6, n7);
	else
		pass("unwind-bound", "max 64 of 1024 possible frames: %d; an 80-byte copy: %d", n6, n7);
	munmap(m, span + page);

	/* Garbage return addresses must not make libdw load DWARF (.debug_frame): that maps the
	 * module's separate debug file, if one is installed (libc6-dbg), and inflates all of it. */
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096], mapped[256] = "";
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "/usr/lib/debug/") && !mapped[0])
			snprintf(mapped, sizeof(mapped), "%s", strchr(line, '/'));
	if (f)
		fclose(f);
	if (mapped[0])
		fail("unwind-no-debuginfo", "a debug file is mapped after the garbage stacks: %s",
			mapped);
	else
		pass("unwind-no-debuginfo", "no separate debug file mapped after the garbage stacks "
			"(libc's is %sinstalled)", access("/usr/lib/debug/.build-id", F_OK) ? "not " : "");
}

/* Libraries loaded after the unwinder read the module map: a fake sample at a function's entry
 * (CFA = SP+8, return address on top) needs that module's CFI to find the return address. */
static void check_dlopen(struct d9__unwinder *u)
{
	static const struct { const char *lib, *fn; } libs[] = {
		{ "libuuid.so.1", "uuid_generate" },
		{ "libcrypt.so.1", "crypt" },
		{ "libacl.so.1", "acl_init" },
	};
	uint64_t stack[2], ips[8];
	void *fn[3];
	int n[3];

	for (int i = 0; i < 3; i++) {
		void *h = dlopen(libs[i].lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		if (h) {
			printf("SKIP unwind-dlopen: %s is already loaded\n", libs[i].lib);
			return;
		}
	}
	stack[0] = (uint64_t)(uintptr_t)unwind_middle + 8;
	stack[1] = 0;
	/* dlopen each library right before its own case: a re-read sees every library loaded */
	for (int i = 0; i < 3; i++)
		fn[i] = NULL;
#define LOAD(i)                                                                                   \
	do {                                                                                      \
		void *h_ = dlopen(libs[i].lib, RTLD_NOW | RTLD_LOCAL);                            \
		if (!h_ || !(fn[i] = dlsym(h_, libs[i].fn))) {                                    \
			printf("SKIP unwind-dlopen: cannot load %s from %s\n", libs[i].fn,        \
				libs[i].lib);                                                     \
			return;                                                                   \
		}                                                                                 \
	} while (0)
	/* 0: the unwinder notices an IP in no module and re-reads the map (at most once a second) */
	LOAD(0);
	struct timespec wait = { 1, 100000000 };
	nanosleep(&wait, NULL);
	n[0] = fake_unwind(u, (uint64_t)(uintptr_t)fn[0], (const uint8_t *)stack, sizeof(stack), ips,
		8);
	uint64_t ret0 = ips[1];
	/* 2: right after that re-read, a new module stays unknown (re-reads are bounded) */
	LOAD(2);
	n[2] = fake_unwind(u, (uint64_t)(uintptr_t)fn[2], (const uint8_t *)stack, sizeof(stack), ips,
		8);
	/* 1: d9__unwind_modules_changed makes it re-read at once */
	LOAD(1);
	d9__unwind_modules_changed(u);
	n[1] = fake_unwind(u, (uint64_t)(uintptr_t)fn[1], (const uint8_t *)stack, sizeof(stack), ips,
		8);
	uint64_t ret1 = ips[1];
#undef LOAD
	if (n[0] < 2 || ret0 != stack[0])
		fail("unwind-dlopen-unknown-ip", "%s in %s, loaded after the unwinder started: %d "
			"frames (want >= 2 with the return address)", libs[0].fn, libs[0].lib, n[0]);
	else
		pass("unwind-dlopen-unknown-ip", "%s in %s (loaded later, found after 1.1 s): %d "
			"frames", libs[0].fn, libs[0].lib, n[0]);
	if (n[1] < 2 || ret1 != stack[0])
		fail("unwind-dlopen-modules-changed", "%s in %s after d9__unwind_modules_changed: %d "
			"frames (want >= 2)", libs[1].fn, libs[1].lib, n[1]);
	else
		pass("unwind-dlopen-modules-changed", "%s in %s: %d frames", libs[1].fn, libs[1].lib,
			n[1]);
	if (n[2] != 1)
		fail("unwind-dlopen-bounded", "%s in %s, right after a re-read: %d frames (want 1: the "
			"map is re-read at most once a second)", libs[2].fn, libs[2].lib, n[2]);
	else
		pass("unwind-dlopen-bounded", "an unknown IP right after a re-read does not re-read "
			"the map");
}

int main(void)
{
	static unsigned char fds_before[MAX_FDS];
	struct prof *p = calloc(1, sizeof(*p));

	if (getenv("UNWIND_CHECK_DEBUG"))
		d9__log_level = D9_LOG_DEBUG; /* the unwinder says when it reads the module map */
	int nfds = fds_snapshot(fds_before), no_cloexec;
	long rss0 = rss_kib();
	char first[256];
	uint64_t t0 = now_ns();
	struct d9__unwinder *u = d9__unwind_new();
	double new_us = (double)(now_ns() - t0) / 1e3;

	if (!u) {
		void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("SKIP unwind: libdw.so.1 is not installed\n");
			return 0;
		}
		fail("unwind-new", "d9__unwind_new failed although libdw.so.1 loads");
		return 1;
	}
	pass("unwind-new", "libdw loaded, modules reported in %.0f us", new_us);
	if (!p)
		return 1;
	int rc = prof_start(p);
	if (rc < 0) {
		printf("SKIP unwind-perf: perf_event_open(cpu-clock, regs+stack): %s\n",
			strerror(-rc));
	} else {
		/* CPU time: ~600 samples at 999 Hz however busy the machine is, then ~200 in the
		 * deep recursion, in slices the ring holds */
		for (int i = 0; i < 12; i++) {
			unwind_outer(cpu_ns() + SLICE_NS);
			prof_take(p);
		}
		for (int i = 0; i < 4; i++) {
			sink += (uint64_t)unwind_deep(400, cpu_ns() + SLICE_NS);
			prof_take(p);
		}
		prof_stop(p);
		check_samples(u, p, new_us);
		check_memo(u, p);
	}
	check_bad_input(u);
	check_dlopen(u);
	if (same_bad || same_n < 20000)
		fail("unwind-fast-same", "%zu of %zu unwinds differ between the cache of rows and "
			"libdw alone (want 0 of >= 20000); first: %s", same_bad, same_n, same_why);
	else
		pass("unwind-fast-same", "%zu unwinds (real samples, shorter copies, fewer frames, "
			"random input): the cache of rows gives libdw's frames and completeness", same_n);
	int during = fds_new(fds_before, &no_cloexec, first, sizeof(first));
	printf("# resident memory: %ld KiB before d9__unwind_new, %ld KiB after every unwind; %d "
		"descriptors before\n", rss0, rss_kib(), nfds);
	d9__unwind_free(u);
	int no_cloexec_after;
	char first_after[256];
	int after = fds_new(fds_before, &no_cloexec_after, first_after, sizeof(first_after));
	if (no_cloexec || after)
		fail("unwind-fds", "while unwinding, %d new descriptors, %d without FD_CLOEXEC (first: "
			"%s); %d left after d9__unwind_free (first: %s)", during, no_cloexec, first,
			after, first_after);
	else
		pass("unwind-fds", "%d new descriptors while unwinding (all FD_CLOEXEC), none after "
			"d9__unwind_free", during);
	for (size_t i = 0; i < p->n; i++)
		free(p->s[i].stack);
	free(p->s);
	free(p);
	return failures ? 1 : 0;
}
