/* unwind.h: DWARF (CFI) unwinding of perf_event user-stack samples, inside the traced process.
 * Turns a sample's user registers and stack copy (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER)
 * into code addresses with elfutils libdw, loaded by dlopen on first use. Only the agent's writer
 * thread may call it: never a host thread, never a signal handler. See agent/DESIGN.md
 * ("DWARF unwinding"). x86-64 only. */
#ifndef D9_AGENT_UNWIND_H
#define D9_AGENT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* The user registers a sample must carry (perf_event_attr.sample_regs_user), as PERF_REG_X86_*
 * bits: AX BX CX DX SI DI BP SP IP (bits 0-8) and R8-R15 (bits 16-23), the 17 registers of the
 * x86-64 DWARF frame. FLAGS and the segment registers are left out (the kernel refuses DS, ES, FS
 * and GS for 64-bit tasks). 136 bytes per sample. */
#define D9__UNWIND_REGS_MASK 0x0000000000ff01ffull

struct d9__unwinder;

/* Loads libdw (dlopen, once), reads the process's modules (/proc/<pid>/maps) and prepares the
 * unwinder. Returns NULL when libdw cannot be loaded or the process cannot be described (logged
 * once at warn level); never aborts. Costs ~0.5 ms; each module's ELF is opened on first use
 * (~0.2 ms), mapped, and no descriptor stays open. */
struct d9__unwinder *d9__unwind_new(void);
void d9__unwind_free(struct d9__unwinder *u);

/* Unwinds one sample with the modules' .eh_frame. regs: the sample's user registers in
 * increasing PERF_REG_X86 bit order of mask, exactly as they follow the abi word in a
 * PERF_RECORD_SAMPLE (the caller skips samples whose abi is PERF_SAMPLE_REGS_ABI_NONE).
 * stack/len: the stack copy, which starts at the sampled SP; len is the record's dyn_size (the
 * bytes the kernel really copied), not its size.
 * Fills ips[0..n), innermost first: ips[0] is the sampled IP, the others are return addresses
 * (subtract 1 to find the call). Returns n: 0 when mask has no IP or max < 1, 1 when only the IP
 * is known (no SP, no unwinder, IP in no module...), at most max. The stack ends early rather
 * than go on guessing when a return address lies above the copy (8 KiB: ~100 frames of 80
 * bytes) and is no coroutine's root slot (d9__stack_root_slot gives that word), in code that
 * .eh_frame does not cover (.debug_frame is never loaded in the host), or when the SP stops
 * growing. *complete = 1 only when the unwind reached the outermost frame (the
 * thread's start, whose CFI leaves the return address undefined): any other end is a truncated
 * stack. Reads nothing outside the stack copy. Warm cost: ~0.7 us for 10 frames from the
 * cache of rows (unwind.c, fast_walk), ~6 us when libdw unwinds the sample itself. An IP or return address in no known module re-reads the module map, at most once a
 * second; a forked child re-reads it by itself. */
int d9__unwind(struct d9__unwinder *u, const uint64_t *regs, uint64_t mask, const uint8_t *stack,
	size_t len, uint64_t *ips, int max, int *complete);

/* on = 0: every sample goes to libdw, as it did before the cache of rows (unwind.c, fast_walk),
 * whose results must be the same (tests/tools/unwind-check.c compares them). *fast and *slow:
 * samples the cache unwound, and samples libdw unwound. */
void d9__unwind_set_fast(struct d9__unwinder *u, int on);
void d9__unwind_counts(const struct d9__unwinder *u, uint64_t *fast, uint64_t *slow);
/* Of the fast ones, the samples whose walk came from the memo (unwind.c, "The memo"): a walk
 * kept with every register and stack word it read, given again to a sample that reads the same. */
uint64_t d9__unwind_memo_hits(const struct d9__unwinder *u);

/* The root return address that the word at `at` holds while its coroutine runs
 * (d9_agent_stack_root_slot; agent/profile.c): 1 and *ra when `at` is such a slot, else 0. */
int d9__stack_root_slot(uint64_t at, uint64_t *ra);

/* The module map changed (dlopen/dlclose): the next d9__unwind re-reads the process's mappings.
 * Needed after a dlclose: the automatic re-read only notices addresses in no known module, not a
 * new library mapped where an unloaded one was. */
void d9__unwind_modules_changed(struct d9__unwinder *u);

#endif
