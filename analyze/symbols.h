/* symbols.h: the symbolization hook of the analyzer (symbols.c): code addresses to names. */
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
 * is looked up. The result is interned in t. */
const char *d9__symbolize(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr);

/* The same with inlined functions expanded: fills names[0..n) with the chain of functions
 * inlined at addr, innermost first, each "function (file:line)" at the line reached in it, and
 * last the real function (as d9__symbolize names it). Returns n (0 as for NULL above). */
#define D9__MAX_INLINE 16
size_t d9__symbolize_inline(struct d9__trace *t, struct d9__proc *p, uint64_t addr, int ret_addr,
	const char **names, size_t max);
void d9__symtab_free(struct d9__proc *p);
#endif
