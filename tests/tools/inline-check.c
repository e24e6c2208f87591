/* inline-check.c: agent/dwsym.c names every level of nested inlining. Three functions inlined
 * into each other and into outer() call a probe that keeps its return address; the resolver must
 * give, innermost first, inl_c, inl_b, inl_a (inlined) and outer (the real function), each at
 * its own source line, as `eu-addr2line -i` does. Prints PASS/FAIL lines. */
#include "dwsym.h"

#include <link.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

static volatile uintptr_t probe_ret;
static volatile int sink;

__attribute__((noinline)) static void probe(void)
{
	probe_ret = (uintptr_t)__builtin_return_address(0);
	sink++;
}

static inline __attribute__((always_inline)) void inl_c(int x)
{
	sink += x;
	probe(); /* LINE_C */
}

static inline __attribute__((always_inline)) void inl_b(int x)
{
	inl_c(x + 1); /* LINE_B */
	sink -= x;
}

static inline __attribute__((always_inline)) void inl_a(int x)
{
	inl_b(x * 2); /* LINE_A */
	sink ^= x;
}

__attribute__((noinline)) void outer(int x);
__attribute__((noinline)) void outer(int x)
{
	inl_a(x); /* LINE_OUTER */
	sink++;
}

struct exe { uint64_t start, offset; int found; };

static int find_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct exe *e = arg;

	(void)size;
	if (info->dlpi_name && *info->dlpi_name)
		return 0; /* not the main program */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			e->start = info->dlpi_addr + ph->p_vaddr;
			e->offset = ph->p_offset;
			e->found = 1;
			return 1;
		}
	}
	return 0;
}

int main(void)
{
	static const char *const want[] = { "inl_c", "inl_b", "inl_a", "outer" };
	char exe_path[4096];
	struct exe e = { 0, 0, 0 };
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);

	outer(3);
	dl_iterate_phdr(find_exe, &e);
	if (n <= 0 || !e.found || !d9__dwsym_load(NULL)) {
		printf("SKIP inline-chain: libdw or the program's own mapping is not available\n");
		return 0;
	}
	exe_path[n] = 0;
	Dwfl *dwfl = d9__dwsym_begin(D9__DWSYM_STANDARD);
	if (!dwfl) {
		printf("FAIL inline-chain: no libdw session\n");
		return 0;
	}
	d9__dw.report_begin(dwfl);
	Dwfl_Module *m = d9__dwsym_report(dwfl, exe_path, e.start, e.offset, NULL, 0);
	d9__dw.report_end(dwfl, NULL, NULL);
	struct d9__dwsym_frame f[16];
	int k = m ? d9__dwsym_resolve(m, probe_ret - 1, f, 16, 0) : 0;
	char got[512] = "";
	size_t used = 0;
	for (int i = 0; i < k; i++)
		used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%s:%d", i ? " < " : "", f[i].fn,
			f[i].line);
	int ok = k == 4;
	for (int i = 0; ok && i < 4; i++)
		ok = !strcmp(f[i].fn, want[i]) && f[i].line > 0;
	/* each level stops at a different line: the call of the next inner level */
	for (int i = 1; ok && i < 4; i++)
		ok = f[i].line != f[i - 1].line;
	printf("%s inline-chain: %s\n", ok ? "PASS" : "FAIL", got);
	d9__dw.end(dwfl);
	return 0;
}
