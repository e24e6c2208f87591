/* patch.h: finding a function in the main executable when it exports no dynamic symbol, and
 * redirecting it to a d9 hook with an instruction-relocating trampoline, for runtimes linked
 * statically into the program (SRS's State Threads, libco). Patching is refused, with one message,
 * whenever it cannot be proved safe; it never happens once the program may run that code.
 * Design: agent/DESIGN.md, "Patching static runtimes". */
#ifndef D9_PATCH_H
#define D9_PATCH_H

#include <stddef.h>

/* Address of the function `name` defined in the main executable: its .symtab, else .dynsym, else
 * (stripped) its DWARF or separate debug file (libdw, already a dependency); NULL when absent. */
void *d9__exe_symbol(const char *name);

/* Redirects every call of fn (code in the main executable) to hook, before main, while only the
 * thread that runs constructors exists. *orig receives a callable copy of the original (its
 * relocated first instructions + a jump back). Returns 0, or -errno after one d9__log_once-style
 * message naming the function and why (prologue cannot be relocated: rip-relative operand that does
 * not fit, a jump back into the copied bytes, function shorter than the patch, unexpected bytes,
 * mprotect refused, ...). `expect`: optional bytes the function must start with (NULL: any). */
int d9__patch(void *fn, void *hook, void **orig, const unsigned char *expect, size_t expect_len);

#endif
