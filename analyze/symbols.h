/* symbols.h: the symbolization hook of the analyzer (symbols.c): code addresses to names, from
 * the Symbol records embedded in the segments first, else from the module files with libdw. */
#ifndef D9_ANALYZE_SYMBOLS_H
#define D9_ANALYZE_SYMBOLS_H
#include <stddef.h>
#include <stdint.h>

struct d9__trace;
struct d9__proc;

/* The name of the code at addr in process p: "function (file:line)", "function" without line
 * information, "module+0xoffset" (file offset) when the module's file is missing on this
 * machine, differs from the recorded build, or has no symbol there; NULL when no recorded
 * module holds addr. ret_addr: addr is a return address (stack frames), so the call before it
 * (addr - 1) is looked up. Symbol records of p (d9__symbols_add) that cover the looked-up
 * address win over libdw. The result is interned in t. */
const char *d9__symbolize(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr);

/* The same with inlined functions expanded: fills names[0..n) with the chain of functions
 * inlined at addr, innermost first, each "function (file:line)" at the line reached in it, and
 * last the real function (as d9__symbolize names it). Returns n (0 as for NULL above). */
#define D9__MAX_INLINE 16
size_t d9__symbolize_inline(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr,
	const char **names, size_t max);
/* One Symbol record of a segment of process p (FORMAT.md section 10): [start, start+len) is
 * function (with file:line when file is not NULL and line > 0) at inline level inline_depth.
 * The records of one range form its inline chain; a range is owned by the first segment (seg,
 * any token) that describes it, later segments' records for it are ignored. Memory follows the
 * number of distinct ranges. Returns 0 or -ENOMEM. */
int d9__symbols_add(struct d9__trace *t, struct d9__proc *p, const void *seg, uint64_t start,
	uint64_t len, const char *function, const char *file, uint64_t line, uint64_t inline_depth);
void d9__symtab_free(struct d9__proc *p);
#endif
