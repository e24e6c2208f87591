/* unwind.c: DWARF (CFI) unwinding of perf_event user-stack samples (and of the copies ctimer
 * samples and blocking calls take the same way), in the traced process, with elfutils libdw
 * loaded by dlopen (a host that never profiles and never makes a call past
 * D9_BLOCKING_THRESHOLD never loads it). One Dwfl session
 * describes this process's modules and stays attached across samples, so each module's ELF and
 * .eh_frame index are read once. It must never read memory outside the sample's stack copy, load
 * DWARF (.debug_frame, debug files) or ask debuginfod inside the host, leave descriptors open, or
 * run anywhere but on the writer thread: libdw is neither async-signal-safe nor cheap on first
 * touch. Design: agent/DESIGN.md ("DWARF unwinding"). */
#include "unwind.h"
#include "internal.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Re-reading /proc/self/maps because an address fell in no module: at most this often. */
#define D9__UNWIND_REFRESH_NS 1000000000ull
/* Slots of the cache of code addresses whose .eh_frame entry is known to exist (a power of 2). */
#define D9__UNWIND_KNOWN 4096
/* Slots of the cache of unwind rules by code address (a power of 2): ~100 bytes each. */
#define D9__UNWIND_ROWS 2048
/* Slots of the cache of whole unwinds (a power of 2), and what one holds: a walk with more
 * frames or more reads of the copy is not kept. ~2.6 KiB each. */
#define D9__UNWIND_MEMO 32
#define D9__MEMO_FRAMES 32
#define D9__MEMO_READS 128

/* The libdw (and libelf, its dependency) entry points used here, looked up once. */
static struct {
	int tried, ok;
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	void (*end)(Dwfl *);
	void (*report_begin)(Dwfl *);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *),
		void *);
	int (*linux_proc_report)(Dwfl *, pid_t);
	int (*linux_proc_maps_report)(Dwfl *, FILE *); /* may be NULL */
	Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
	Dwarf_CFI *(*eh_cfi)(Dwfl_Module *, Dwarf_Addr *);
	const char *(*module_info)(Dwfl_Module *, void ***, Dwarf_Addr *, Dwarf_Addr *, Dwarf_Addr *,
		Dwarf_Addr *, const char **, const char **);
	int (*cfi_addrframe)(Dwarf_CFI *, Dwarf_Addr, Dwarf_Frame **);
	/* the rows' rules, for the cache (fast_walk); any NULL: libdw does every frame */
	int (*frame_info)(Dwarf_Frame *, Dwarf_Addr *, Dwarf_Addr *, bool *);
	int (*frame_cfa)(Dwarf_Frame *, Dwarf_Op **, size_t *);
	int (*frame_register)(Dwarf_Frame *, int, Dwarf_Op[3], Dwarf_Op **, size_t *);
	bool (*attach_state)(Dwfl *, Elf *, pid_t, const Dwfl_Thread_Callbacks *, void *);
	int (*getthread_frames)(Dwfl *, pid_t, int (*)(Dwfl_Frame *, void *), void *);
	bool (*frame_pc)(Dwfl_Frame *, Dwarf_Addr *, bool *);
	int (*frame_reg)(Dwfl_Frame *, unsigned, Dwarf_Word *); /* elfutils >= 0.186; may be NULL */
	bool (*state_registers)(Dwfl_Thread *, int, unsigned, const Dwarf_Word *);
	void (*state_register_pc)(Dwfl_Thread *, Dwarf_Word);
	const char *(*errmsg)(int);
	int (*standard_find_debuginfo)(Dwfl_Module *, void **, const char *, Dwarf_Addr,
		const char *, const char *, GElf_Word, char **);
	int (*linux_proc_find_elf)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, Elf **);
	unsigned (*elf_version)(unsigned);
	Elf *(*elf_memory)(char *, size_t);
	Elf *(*elf_begin)(int, Elf_Cmd, Elf *);
	int (*elf_cntl)(Elf *, Elf_Cmd);
	int (*elf_end)(Elf *);
	Dwfl_Callbacks cb;
} dw;

static char *debuginfo_path; /* NULL: libdw's default search path */

/* A module's file, opened the way dwfl_linux_proc_find_elf does it, but leaving no descriptor in
 * the host's table: libdw would keep one per module, open across fork and exec. libelf maps the
 * file (read-only, private), so the descriptor is closed once the Elf is made. Names that are no
 * regular file ("[vdso: pid]", "... (deleted)") go to libdw's own callback, which reads them
 * from /proc/pid/mem. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
	char **file_name, Elf **elfp)
{
	struct stat st;

	if (name[0] != '/' || stat(name, &st) != 0 || !S_ISREG(st.st_mode))
		return dw.linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf *elf = dw.elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	/* FDREAD: a mapped file needs its descriptor no more (an unmappable one is read whole) */
	if (!elf || dw.elf_cntl(elf, ELF_C_FDREAD) != 0)
		goto err_elf;
	close(fd);
	*file_name = strdup(name);
	*elfp = elf;
	return -1; /* libdwfl's convention when *elfp is set */

err_elf:
	if (elf)
		dw.elf_end(elf);
	close(fd);
	return -1;
}

/* A safety net: on_frame stops before libdw would want DWARF (.debug_frame), so this should never
 * run. If it does, debug files come from the local disk only (dwfl_standard_find_debuginfo asks
 * debuginfod servers last when DEBUGINFOD_URLS is set, and a production server must not block
 * its writer on the network), and the descriptor libdw keeps must not survive an exec. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
	Dwarf_Addr base, const char *file_name, const char *debuglink_file,
	GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (urls && *urls)
		return -1;
	int fd = dw.standard_find_debuginfo(mod, userdata, modname, base, file_name,
		debuglink_file, debuglink_crc, debuginfo_file_name);
	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* Counts forks: a child's unwinder reads its own module map (getpid at every sample would cost a
 * system call each). */
static unsigned fork_gen;

static void on_fork_child(void)
{
	fork_gen++;
}

static int dw_load(void)
{
	if (dw.tried)
		return dw.ok;
	dw.tried = 1;
	void *h = d9__dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: cannot load libdw.so.1 (%s)",
			e ? e : "?");
		return 0;
	}
#define SYM(field, name)                                                                   \
	if (!(*(void **)&dw.field = dlsym(h, name))) {                                     \
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: libdw.so.1 has no %s", name); \
		return 0;                                                                  \
	}
	SYM(begin, "dwfl_begin");
	SYM(end, "dwfl_end");
	SYM(report_begin, "dwfl_report_begin");
	SYM(report_end, "dwfl_report_end");
	SYM(linux_proc_report, "dwfl_linux_proc_report");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(eh_cfi, "dwfl_module_eh_cfi");
	SYM(module_info, "dwfl_module_info");
	SYM(cfi_addrframe, "dwarf_cfi_addrframe");
	SYM(attach_state, "dwfl_attach_state");
	SYM(getthread_frames, "dwfl_getthread_frames");
	SYM(frame_pc, "dwfl_frame_pc");
	SYM(state_registers, "dwfl_thread_state_registers");
	SYM(state_register_pc, "dwfl_thread_state_register_pc");
	SYM(errmsg, "dwfl_errmsg");
	SYM(standard_find_debuginfo, "dwfl_standard_find_debuginfo");
	SYM(linux_proc_find_elf, "dwfl_linux_proc_find_elf");
	SYM(elf_version, "elf_version"); /* libelf, a dependency of libdw */
	SYM(elf_memory, "elf_memory");
	SYM(elf_begin, "elf_begin");
	SYM(elf_cntl, "elf_cntl");
	SYM(elf_end, "elf_end");
#undef SYM
	*(void **)&dw.frame_reg = dlsym(h, "dwfl_frame_reg");
	*(void **)&dw.frame_info = dlsym(h, "dwarf_frame_info");
	*(void **)&dw.frame_cfa = dlsym(h, "dwarf_frame_cfa");
	*(void **)&dw.frame_register = dlsym(h, "dwarf_frame_register");
	pthread_atfork(NULL, NULL, on_fork_child);
	*(void **)&dw.linux_proc_maps_report = dlsym(h, "dwfl_linux_proc_maps_report");
	dw.cb.find_elf = find_elf;
	dw.cb.find_debuginfo = find_debuginfo;
	dw.cb.debuginfo_path = &debuginfo_path;
	dw.elf_version(EV_CURRENT);
	dw.ok = 1;
	return 1;
}

/* PERF_REG_X86_* bit -> x86-64 DWARF register number (-1: not part of the DWARF frame).
 * perf: AX BX CX DX SI DI BP SP IP FLAGS CS SS DS ES FS GS R8..R15
 * DWARF: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip */
static const signed char perf_to_dwarf[24] = {
	0, 3, 2, 1, 4, 5, 6, 7, 16, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11, 12, 13, 14, 15,
};
#define DWARF_SP 7
#define DWARF_IP 16
#define DWARF_NREGS 17

/* One row of a module's .eh_frame, as libdw reads it for one code address, in the few forms
 * that fast_walk applies exactly as libdw's unwinder does (frame_unwind.c, handle_cfi): the CFA
 * a register plus an offset, each register undefined, unchanged, saved at CFA + n, equal to
 * CFA + n, or in another register. */
enum { RULE_UNDEF, RULE_SAME, RULE_AT_CFA, RULE_CFA_PLUS, RULE_REG };
enum {
	/* anything else (a signal frame, an expression): libdw unwinds the sample; also an empty
	 * slot, whose key 0 is what a return address of 1 looks up */
	ROW_LIBDW,
	ROW_OK, /* the rules below apply */
	ROW_NO_CFI, /* the module's .eh_frame does not cover the address: the stack ends there */
};
struct row {
	uint64_t at; /* the address looked up (0: an empty slot) */
	int32_t cfa_off;
	int32_t val[DWARF_NREGS]; /* RULE_AT_CFA, RULE_CFA_PLUS: n; RULE_REG: the register */
	uint8_t rule[DWARF_NREGS];
	uint8_t cfa_reg, kind;
};

/* One fast_walk kept with everything it read: the registers its result depends on and each
 * word of the copy it asked for, in order. A sample that gives the same answers to the same
 * questions takes the same walk, so its frames are these (fast_walk's inputs are the sample's
 * registers, read_word's answers and the rows, which are cleared with this cache). */
struct memo {
	uint64_t ip, sp; /* the sample's IP and SP; ip 0: an empty slot */
	uint32_t have, dep; /* the registers the sample had; those whose value the walk used */
	int max, n, complete, refused, nreads;
	uint64_t regs[DWARF_NREGS]; /* the dep registers' values */
	struct {
		uint64_t addr, val; /* val: what read_word gave, when it served the read */
	} reads[D9__MEMO_READS];
	uint8_t ok[D9__MEMO_READS]; /* read_word served reads[k] (0: refused) */
	uint64_t ips[D9__MEMO_FRAMES];
};

struct d9__unwinder {
	Dwfl *dwfl;
	Elf *elf; /* over ehdr: tells libdw the process is x86-64, independent of any module */
	Elf64_Ehdr ehdr;
	pid_t pid; /* the process the modules were reported for (a forked child re-reports) */
	int stale; /* modules changed: report again before the next unwind */
	uint64_t reported_ns; /* CLOCK_MONOTONIC of the last report */
	int unknown; /* the current unwind met a pc in no reported module */
	int refused; /* the current unwind wanted memory outside the stack copy */

	/* the sample being unwound (set by d9__unwind, read by the libdw callbacks) */
	Dwarf_Word regs[DWARF_NREGS];
	uint32_t have; /* bit i: regs[i] came with the sample */
	uint64_t sp; /* address of stack[0] */
	const uint8_t *stack;
	size_t len;
	uint64_t *ips;
	int max, n;
	uint64_t last_sp; /* SP of the last frame taken, when known (0: not known) */
	/* pcs (as looked up: return addresses minus 1) in a module whose .eh_frame covers them,
	 * direct-mapped; 0 is empty. Cleared whenever the module map is read again. */
	uint64_t known[D9__UNWIND_KNOWN];
	/* rows by looked-up address, direct-mapped (fast_walk); NULL: every sample goes to libdw.
	 * Cleared whenever the module map is read again. */
	struct row *rows;
	unsigned gen; /* fork_gen when the modules were reported */
	int fast; /* fast_walk first (d9__unwind_set_fast) */
	uint64_t nfast, nslow; /* samples unwound by fast_walk, and by libdw */
	/* whole walks by IP and SP, direct-mapped (memo_find); NULL: none kept. Cleared with the
	 * rows. rec: the slot the current fast_walk writes its reads to, or NULL. */
	struct memo *memo, *rec;
	uint64_t nmemo; /* of nfast, samples whose walk came from the memo */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Replaces the module list with the current /proc/self/maps. Modules still mapped keep their
 * libdw state (opened ELF, CFI index); libdw drops the others at dwfl_report_end. */
static int report(struct d9__unwinder *u, const char *why)
{
	u->pid = getpid();
	u->gen = fork_gen;
	u->stale = 0;
	u->reported_ns = now_ns();
	memset(u->known, 0, sizeof(u->known));
	if (u->rows)
		memset(u->rows, 0, D9__UNWIND_ROWS * sizeof(*u->rows));
	if (u->memo)
		memset(u->memo, 0, D9__UNWIND_MEMO * sizeof(*u->memo));
	dw.report_begin(u->dwfl);
	int rc = dw.linux_proc_report(u->dwfl, u->pid);
	if ((rc == EACCES || rc == EPERM) && dw.linux_proc_maps_report) {
		/* a process that changed its credentials (a worker that dropped root: nginx, named)
		 * is not dumpable, and the kernel then refuses /proc/PID/auxv even to the process
		 * itself; libdw reads it first (for the vDSO's address) and gives up. Its maps stay
		 * readable: the modules from them, without the vDSO (a sample inside it ends there) */
		FILE *f = d9__file_fopen_read("/proc/self/maps");
		if (f) {
			rc = dw.linux_proc_maps_report(u->dwfl, f);
			fclose(f);
			d9__log_once(D9_LOG_INFO, "DWARF unwinding: /proc/self/auxv is refused (the "
				"process changed its credentials); modules are read from /proc/self/maps, "
				"without the vDSO");
		}
	}
	if (dw.report_end(u->dwfl, NULL, NULL) != 0 && rc == 0)
		rc = -1;
	if (rc != 0)
		d9__log_once(D9_LOG_WARN, "DWARF unwinding: cannot read the module map (%s)",
			rc > 0 ? strerror(rc) : dw.errmsg(-1));
	d9__log(D9_LOG_DEBUG, "DWARF unwinding: module map read (%s) in %llu us", why,
		(unsigned long long)(now_ns() - u->reported_ns) / 1000);
	return rc;
}

/* ---- Dwfl_Thread_Callbacks: one thread, whose state is the sample being unwound ---------------- */
static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = arg;
	return ((struct d9__unwinder *)arg)->pid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

/* Serves the stack copy only (1 and *result, or 0 with u->refused set). Anything else (an
 * address above the copy, a pointer into the heap) fails, which ends the unwind there: the live
 * memory no longer holds what it held at the sample, and reading it could fault. One exception,
 * above the copy only: a coroutine's root slot (d9_agent_stack_root_slot), whose word is known
 * without reading it. The kernel's copy stops at the first page the program never wrote, often
 * inside the coroutine's outermost frame (a large buffer), just below the entry function's
 * return address; that word is the root return address for as long as the coroutine runs. */
static int read_word(struct d9__unwinder *u, uint64_t addr, uint64_t *result)
{
	uint64_t ra;

	if (addr >= u->sp && addr - u->sp >= u->len && d9__stack_root_slot(addr, &ra)) {
		*result = ra;
		return 1;
	}
	if (u->len < sizeof(*result) || addr < u->sp || addr - u->sp > u->len - sizeof(*result)) {
		u->refused = 1;
		return 0;
	}
	memcpy(result, u->stack + (addr - u->sp), sizeof(*result));
	return 1;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	uint64_t v;

	(void)dwfl;
	if (!read_word(arg, addr, &v))
		return false;
	*result = v;
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct d9__unwinder *u = arg;

	for (int r = 0; r < DWARF_NREGS; r++)
		if ((u->have >> r & 1) && !dw.state_registers(thread, r, 1, &u->regs[r]))
			return false;
	dw.state_register_pc(thread, u->regs[DWARF_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* The module whose reported range holds pc, or NULL. dwfl_addrmodule alone is not enough: it
 * also answers with a neighbouring module for addresses in no module at all (0.188), and libdw
 * itself then looks for the frame in that module's CFI. *lax is what dwfl_addrmodule said. */
static Dwfl_Module *module_at(struct d9__unwinder *u, Dwarf_Addr pc, Dwfl_Module **lax)
{
	Dwarf_Addr lo = 0, hi = 0;
	Dwfl_Module *mod = dw.addrmodule(u->dwfl, pc);

	*lax = mod;
	if (!mod || !dw.module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL))
		return NULL;
	return pc >= lo && pc < hi ? mod : NULL;
}

/* The row of the module's .eh_frame for the frame at pc (a return address already moved back
 * into its call instruction; the caller frees it), or NULL when .eh_frame does not cover pc. */
static Dwarf_Frame *eh_frame_row(Dwfl_Module *mod, Dwarf_Addr pc)
{
	Dwarf_Addr bias;
	Dwarf_Frame *frame;
	Dwarf_CFI *cfi = dw.eh_cfi(mod, &bias);

	return cfi && dw.cfi_addrframe(cfi, pc - bias, &frame) == 0 ? frame : NULL;
}

static int has_eh_frame(Dwfl_Module *mod, Dwarf_Addr pc)
{
	Dwarf_Frame *frame = eh_frame_row(mod, pc);

	free(frame);
	return frame != NULL;
}

static void log_no_cfi(Dwfl_Module *mod, Dwarf_Addr at)
{
	if (d9__log_level >= D9_LOG_DEBUG) {
		Dwarf_Addr lo = 0, hi = 0;
		const char *name = dw.module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
		d9__log(D9_LOG_DEBUG, "DWARF unwinding: %#llx (%s %#llx-%#llx) has no .eh_frame "
			"entry: the stack ends there", (unsigned long long)at, name ? name : "?",
			(unsigned long long)lo, (unsigned long long)hi);
	}
}

/* One frame, innermost first. Stops at max frames, a zero pc, a frame whose SP does not lie above
 * its callee's (a loop, or garbage taken for a return address), and after a frame in a module
 * whose .eh_frame does not cover it: libdw would go on to the module's .debug_frame, which means
 * loading (and decompressing) all of its DWARF, separate debug file included, inside the host,
 * for an address that is most likely garbage. A pc in no module (JIT code) is left to libdw's
 * frame-pointer fallback. */
static int on_frame(Dwfl_Frame *f, void *arg)
{
	struct d9__unwinder *u = arg;
	Dwarf_Addr pc;
	Dwarf_Word sp = 0;

	/* never ask for isactivation: libdw would unwind this frame to answer, before our checks */
	if (!dw.frame_pc(f, &pc, NULL) || pc == 0)
		return DWARF_CB_ABORT;
	if (dw.frame_reg && dw.frame_reg(f, DWARF_SP, &sp) != 0)
		sp = 0;
	if (u->n > 0) {
		if (sp && u->last_sp && sp <= u->last_sp)
			return DWARF_CB_ABORT;
		if (!sp && pc == u->ips[u->n - 1])
			return DWARF_CB_ABORT; /* without SPs, a repeated pc is the only loop sign */
	}
	u->last_sp = sp;
	u->ips[u->n++] = pc;
	if (u->n >= u->max)
		return DWARF_CB_ABORT;
	Dwarf_Addr at = u->n == 1 ? pc : pc - 1; /* a return address: look up its call */
	uint64_t *slot = &u->known[(at ^ at >> 12 ^ at >> 24) & (D9__UNWIND_KNOWN - 1)];
	if (at && *slot == at) /* 0 is an empty slot */
		return DWARF_CB_OK; /* the same few return addresses come back sample after sample */
	Dwfl_Module *lax, *mod = module_at(u, at, &lax);
	if (!mod) {
		u->unknown = 1; /* a library loaded since the map was read, or JIT code */
		/* libdw falls back to frame pointers where it finds no module at all; where it finds
		 * a wrong one, it would read that one's CFI (and DWARF): stop */
		return lax ? DWARF_CB_ABORT : DWARF_CB_OK;
	}
	if (!has_eh_frame(mod, at)) {
		log_no_cfi(mod, at);
		return DWARF_CB_ABORT;
	}
	*slot = at;
	return DWARF_CB_OK;
}

/* ---- The fast path: cached rows ------------------------------------------------------------
 * libdw unwinds a frame in ~0.5 us, most of it allocating and freeing its states and the row it
 * reads from .eh_frame again each time; an off-CPU sample is taken at every context switch, so
 * with D9_SCHED_EVENTS that was the writer's whole cost (about 5 us a sample on redis). The
 * rows a sample's frames need are few and come back sample after sample, so each is read from
 * libdw once and kept, and fast_walk applies them the way libdw's unwinder does (elfutils 0.188
 * libdwfl/frame_unwind.c handle_cfi, dwfl_frame.c dwfl_thread_getframes) with on_frame's checks.
 * A sample with any frame outside these forms (a module unknown, a signal frame, a DWARF
 * expression) goes to libdw whole, so every sample's frames are libdw's (tests/tools/
 * unwind-check.c compares the two on real samples). */

static int fits32(uint64_t v)
{
	return (int64_t)v >= INT32_MIN && (int64_t)v <= INT32_MAX;
}

/* The rule of register i, from dwarf_frame_register's answer; 0, or -1 for a form left to libdw. */
static int set_rule(struct row *r, int i, Dwarf_Op *mem, Dwarf_Op *ops, size_t nops)
{
	if (nops == 0) {
		if (ops != mem && ops != NULL)
			return -1;
		r->rule[i] = ops ? RULE_UNDEF : RULE_SAME;
		return 0;
	}
	if (ops != mem)
		return -1; /* an expression */
	if (nops == 1 && ops[0].atom == DW_OP_regx) {
		if (ops[0].number >= DWARF_NREGS)
			return -1;
		r->rule[i] = RULE_REG;
		r->val[i] = (int32_t)ops[0].number;
		return 0;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return -1;
	size_t k = 1;
	if (k < nops && ops[k].atom == DW_OP_plus_uconst) {
		if (!fits32(ops[k].number))
			return -1;
		r->val[i] = (int32_t)(int64_t)ops[k].number;
		k++;
	}
	r->rule[i] = RULE_AT_CFA;
	if (k < nops && ops[k].atom == DW_OP_stack_value) {
		r->rule[i] = RULE_CFA_PLUS;
		k++;
	}
	return k == nops ? 0 : -1;
}

/* Reads the row of the looked-up address at from libdw into r. */
static void fill_row(struct d9__unwinder *u, uint64_t at, struct row *r)
{
	Dwarf_Frame *frame;
	Dwarf_Op mem[3], *ops;
	size_t nops;
	bool signal = true;
	Dwfl_Module *lax;

	memset(r, 0, sizeof(*r));
	r->at = at;
	r->kind = ROW_LIBDW;
	Dwfl_Module *mod = module_at(u, at, &lax);
	if (!mod)
		return; /* a library loaded since, JIT code: walk() and on_frame decide */
	if (!(frame = eh_frame_row(mod, at))) {
		log_no_cfi(mod, at);
		r->kind = ROW_NO_CFI;
		return;
	}
	/* libdw takes the return address from the CIE's column: x86-64's is rip (16) */
	if (dw.frame_info(frame, NULL, NULL, &signal) != DWARF_IP || signal)
		goto out;
	if (dw.frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx ||
		ops[0].number >= DWARF_NREGS || !fits32(ops[0].number2))
		goto out;
	r->cfa_reg = (uint8_t)ops[0].number;
	r->cfa_off = (int32_t)(int64_t)ops[0].number2;
	for (int i = 0; i < DWARF_NREGS; i++)
		if (dw.frame_register(frame, i, mem, &ops, &nops) != 0 ||
			set_rule(r, i, mem, ops, nops) != 0)
			goto out;
	r->kind = ROW_OK;
out:
	free(frame);
}

/* read_word for fast_walk: also kept in the memo slot being filled (u->rec), if any. */
static int walk_read(struct d9__unwinder *u, uint64_t addr, uint64_t *v)
{
	int ok = read_word(u, addr, v);
	struct memo *m = u->rec;

	if (m) {
		int k = m->nreads;
		if (k < D9__MEMO_READS) {
			m->reads[k].addr = addr;
			m->reads[k].val = ok ? *v : 0;
			m->ok[k] = (uint8_t)ok;
		}
		m->nreads++; /* past the array: not kept (memo_keep) */
	}
	return ok;
}

/* Unwinds the sample in u from the rows, with walk()'s result: the frame count and *complete.
 * -1: a frame needs libdw (walk() then unwinds the whole sample). *dep: the sample's registers
 * whose values the result depends on (each register's value is traced to the sample's registers
 * it was copied or computed from; a word read from the copy is walk_read's). */
static int fast_walk(struct d9__unwinder *u, int *complete, uint32_t *dep)
{
	uint64_t regs[DWARF_NREGS], next[DWARF_NREGS], last_sp = 0;
	uint32_t set = u->have, from[DWARF_NREGS], nfrom[DWARF_NREGS], used = 0;
	int n = 0;

	memcpy(regs, u->regs, sizeof(regs));
	for (int i = 0; i < DWARF_NREGS; i++)
		from[i] = 1u << i;
	u->refused = 0;
	u->unknown = 0;
	*complete = 0;
	for (;;) {
		/* on_frame, for the frame whose registers are regs */
		uint64_t pc = regs[DWARF_IP], sp = set >> DWARF_SP & 1 ? regs[DWARF_SP] : 0;
		used |= from[DWARF_IP] | (set >> DWARF_SP & 1 ? from[DWARF_SP] : 0);
		*dep = used;
		if (pc == 0)
			return n;
		if (n > 0 && ((sp && last_sp && sp <= last_sp) || (!sp && pc == u->ips[n - 1])))
			return n;
		last_sp = sp;
		u->ips[n++] = pc;
		if (n >= u->max)
			return n;
		uint64_t at = n == 1 ? pc : pc - 1;
		struct row *r = &u->rows[(at ^ at >> 11 ^ at >> 22) & (D9__UNWIND_ROWS - 1)];
		if (r->at != at)
			fill_row(u, at, r);
		if (r->kind == ROW_NO_CFI)
			return n;
		if (r->kind != ROW_OK)
			return -1;
		/* the caller's registers, as handle_cfi computes them */
		int have_cfa = set >> r->cfa_reg & 1, ra_undefined = 0;
		uint64_t cfa = have_cfa ? regs[r->cfa_reg] + (uint64_t)(int64_t)r->cfa_off : 0, v;
		uint32_t nset = 0, cfa_from = have_cfa ? from[r->cfa_reg] : 0;
		used |= cfa_from;
		for (int i = 0; i < DWARF_NREGS; i++) {
			uint32_t f = 0;
			switch (r->rule[i]) {
			case RULE_UNDEF:
				ra_undefined |= i == DWARF_IP;
				continue;
			case RULE_SAME:
				if (!(set >> i & 1))
					continue;
				v = regs[i];
				f = from[i];
				break;
			case RULE_AT_CFA:
				if (!have_cfa || !walk_read(u, cfa + (uint64_t)(int64_t)r->val[i], &v))
					continue;
				break;
			case RULE_CFA_PLUS:
				if (!have_cfa)
					continue;
				v = cfa + (uint64_t)(int64_t)r->val[i];
				f = cfa_from;
				break;
			default: /* RULE_REG */
				if (!(set >> r->val[i] & 1))
					continue;
				v = regs[r->val[i]];
				f = from[r->val[i]];
				break;
			}
			next[i] = v;
			nfrom[i] = f;
			nset |= 1u << i;
		}
		/* the end: the return address undefined (the outermost frame) or 0 is the stack's
		 * end (libdw returns 0) */
		if (nset >> DWARF_IP & 1)
			used |= nfrom[DWARF_IP];
		*dep = used;
		if (ra_undefined || (nset >> DWARF_IP & 1 && next[DWARF_IP] == 0)) {
			*complete = !u->refused;
			return n;
		}
		/* one that could not be had: after a refused read, an incomplete stack either way;
		 * otherwise (a register the rows leave undefined) elfutils versions differ on what
		 * the stack is: libdw says */
		if (!(nset >> DWARF_IP & 1))
			return u->refused ? n : -1;
		memcpy(regs, next, sizeof(regs));
		memcpy(from, nfrom, sizeof(from));
		set = nset;
	}
}

/* ---- The memo: whole walks again -----------------------------------------------------------
 * An off-CPU sample is taken at every context switch, and a server switches out in the same
 * wait with the same stack each time (redis in epoll_wait, 6,000 times a second): the walk is
 * the same, frame for frame. A slot keeps one walk with its inputs (struct memo); a sample with
 * the same IP and SP is given the kept frames when the registers the walk used are the same and
 * every word it read reads the same in this sample's copy (read_word again: a refused read must
 * be refused again). Then fast_walk, fed the same answers, would take the same steps; the
 * sample's other registers and the rest of its copy (locals, arguments) do not matter. */
static struct memo *memo_slot(struct d9__unwinder *u)
{
	uint64_t ip = u->regs[DWARF_IP], sp = u->regs[DWARF_SP];
	uint64_t h = ip ^ ip >> 17 ^ sp >> 4 ^ sp >> 21;

	return &u->memo[(h ^ h >> 9) & (D9__UNWIND_MEMO - 1)];
}

/* The kept walk's frame count for the sample in u (frames in u->ips, *complete), or -1. */
static int memo_find(struct d9__unwinder *u, struct memo *m, int *complete)
{
	if (m->ip != u->regs[DWARF_IP] || m->sp != u->regs[DWARF_SP] || m->have != u->have ||
		m->max != u->max)
		return -1;
	for (uint32_t d = m->dep; d; d &= d - 1) {
		int i = __builtin_ctz(d);
		if (m->regs[i] != u->regs[i])
			return -1;
	}
	for (int k = 0; k < m->nreads; k++) {
		uint64_t v = 0;
		int ok = read_word(u, m->reads[k].addr, &v);
		if (ok != m->ok[k] || (ok && v != m->reads[k].val))
			return -1; /* fast_walk starts again, u->refused too */
	}
	u->refused = m->refused;
	u->unknown = 0;
	memcpy(u->ips, m->ips, (size_t)m->n * sizeof(*u->ips));
	*complete = m->complete;
	return m->n;
}

/* Keeps the walk just made into m (filled by walk_read), unless it was too long for a slot. */
static void memo_keep(struct d9__unwinder *u, struct memo *m, int n, int complete, uint32_t dep)
{
	if (n < 1 || n > D9__MEMO_FRAMES || m->nreads > D9__MEMO_READS) {
		m->ip = 0;
		return;
	}
	m->ip = u->regs[DWARF_IP];
	m->sp = u->regs[DWARF_SP];
	m->have = u->have;
	m->dep = dep;
	m->max = u->max;
	m->n = n;
	m->complete = complete;
	m->refused = u->refused;
	for (uint32_t d = dep; d; d &= d - 1)
		m->regs[__builtin_ctz(d)] = u->regs[__builtin_ctz(d)];
	memcpy(m->ips, u->ips, (size_t)n * sizeof(*u->ips));
}

/* fast_walk through the memo: the kept walk when the sample answers as it did, else a new walk
 * kept in the slot. -1: libdw must unwind the sample. */
static int fast_unwind(struct d9__unwinder *u, int *complete)
{
	uint32_t dep = 0;

	if (!u->memo)
		return fast_walk(u, complete, &dep);
	struct memo *m = memo_slot(u);
	int n = memo_find(u, m, complete);
	if (n >= 0) {
		u->nmemo++;
		return n;
	}
	m->ip = 0; /* the slot is being rewritten */
	m->nreads = 0;
	u->rec = m;
	n = fast_walk(u, complete, &dep);
	u->rec = NULL;
	if (n >= 0)
		memo_keep(u, m, n, *complete, dep);
	return n;
}

struct d9__unwinder *d9__unwind_new(void)
{
	if (!dw_load())
		return NULL;
	struct d9__unwinder *u = calloc(1, sizeof(*u));
	if (!u) {
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: out of memory");
		goto err_alloc;
	}
	u->dwfl = dw.begin(&dw.cb);
	if (!u->dwfl) {
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: dwfl_begin: %s", dw.errmsg(-1));
		goto err_begin;
	}
	/* A bare x86-64 ELF header selects libdw's unwinder backend for the process. Left to itself,
	 * dwfl_attach_state would borrow the first module's backend, which dies with that module
	 * when a later report drops it (dlclose). */
	memcpy(u->ehdr.e_ident, ELFMAG, SELFMAG);
	u->ehdr.e_ident[EI_CLASS] = ELFCLASS64;
	u->ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
	u->ehdr.e_ident[EI_VERSION] = EV_CURRENT;
	u->ehdr.e_type = ET_DYN;
	u->ehdr.e_machine = EM_X86_64;
	u->ehdr.e_version = EV_CURRENT;
	u->ehdr.e_ehsize = sizeof(u->ehdr);
	u->elf = dw.elf_memory((char *)&u->ehdr, sizeof(u->ehdr));
	if (!u->elf) {
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: libelf refused an x86-64 header");
		goto err_elf;
	}
	if (report(u, "start") != 0)
		goto err_report; /* logged */
	if (dw.frame_info && dw.frame_cfa && dw.frame_register && dw.frame_reg) {
		/* without the cache every sample goes to libdw, as before it existed */
		u->rows = calloc(D9__UNWIND_ROWS, sizeof(*u->rows));
		u->fast = u->rows != NULL;
		if (u->rows)
			u->memo = calloc(D9__UNWIND_MEMO, sizeof(*u->memo)); /* NULL: no memo */
	}
	if (!dw.attach_state(u->dwfl, u->elf, u->pid, &thread_callbacks, u)) {
		d9__log_once(D9_LOG_WARN, "DWARF unwinding off: dwfl_attach_state: %s",
			dw.errmsg(-1));
		goto err_report;
	}
	return u;

err_report:
	dw.elf_end(u->elf);
err_elf:
	dw.end(u->dwfl);
err_begin:
	free(u);
err_alloc:
	return NULL;
}

void d9__unwind_free(struct d9__unwinder *u)
{
	if (!u)
		return;
	dw.end(u->dwfl); /* detaches the process state first; its backend is ours to close */
	dw.elf_end(u->elf);
	free(u->rows);
	free(u->memo);
	free(u);
}

void d9__unwind_modules_changed(struct d9__unwinder *u)
{
	if (u)
		u->stale = 1;
}

void d9__unwind_set_fast(struct d9__unwinder *u, int on)
{
	if (u)
		u->fast = on && u->rows;
}

void d9__unwind_counts(const struct d9__unwinder *u, uint64_t *fast, uint64_t *slow)
{
	*fast = u ? u->nfast : 0;
	*slow = u ? u->nslow : 0;
}

uint64_t d9__unwind_memo_hits(const struct d9__unwinder *u)
{
	return u ? u->nmemo : 0;
}

/* One pass of libdw over the sample in u; returns the frame count. *complete = 1 when libdw
 * reached the outermost frame (the thread's start: its CFI marks the return address undefined).
 * dwfl_getthread_frames returns 0 then, but also when a return address could not be read (libdw
 * takes that for the end of the stack too): a return address above the copy. So a walk that
 * asked for memory outside the copy is not complete. It returns DWARF_CB_ABORT when on_frame
 * stopped, -1 on other errors. */
static int walk(struct d9__unwinder *u, int *complete)
{
	u->n = 0;
	u->last_sp = 0;
	u->unknown = 0;
	u->refused = 0;
	*complete = dw.getthread_frames(u->dwfl, u->pid, on_frame, u) == 0 && u->n > 0 &&
		!u->refused;
	return u->n;
}

int d9__unwind(struct d9__unwinder *u, const uint64_t *regs, uint64_t mask, const uint8_t *stack,
	size_t len, uint64_t *ips, int max, int *complete)
{
	*complete = 0;
	if (max < 1 || !regs)
		return 0;
	uint32_t have = 0;
	int k = 0;
	for (int bit = 0; bit < 64; bit++) {
		if (!(mask >> bit & 1))
			continue;
		if (bit < (int)sizeof(perf_to_dwarf) && perf_to_dwarf[bit] >= 0) {
			if (u)
				u->regs[perf_to_dwarf[bit]] = regs[k];
			have |= 1u << perf_to_dwarf[bit];
			if (perf_to_dwarf[bit] == DWARF_IP)
				ips[0] = regs[k];
		}
		k++;
	}
	if (!(have >> DWARF_IP & 1))
		return 0;
	if (!u || !(have >> DWARF_SP & 1) || max == 1 || ips[0] == 0)
		return 1;

	u->have = have;
	u->sp = u->regs[DWARF_SP];
	u->stack = stack;
	u->len = stack ? len : 0;
	u->ips = ips;
	u->max = max;
	Dwfl_Module *lax;
	if (u->stale || u->gen != fork_gen)
		report(u, u->stale ? "modules changed" : "new process");
	else if (now_ns() - u->reported_ns >= D9__UNWIND_REFRESH_NS && !module_at(u, ips[0], &lax))
		report(u, "IP in no module"); /* maybe a library loaded since (no dlopen hook saw it) */
	int n = u->fast ? fast_unwind(u, complete) : -1;
	if (n >= 0) {
		u->nfast++;
	} else {
		u->nslow++;
		n = walk(u, complete);
		if (u->unknown && now_ns() - u->reported_ns >= D9__UNWIND_REFRESH_NS) {
			report(u, "return address in no module");
			n = walk(u, complete);
		}
	}
	if (u->unknown)
		*complete = 0; /* libdw's frame-pointer guess took over somewhere */
	if (n < 1) {
		ips[0] = u->regs[DWARF_IP]; /* libdw refused even the first frame */
		n = 1;
		*complete = 0;
	}
	u->stack = NULL;
	u->ips = NULL;
	return n;
}
