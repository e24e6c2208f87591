/* symbolize.h: background symbolization of sealed segments (symbolize.c), run by the
 * compressor thread (compress.c). Design: agent/DESIGN.md, "Background symbolization"; the
 * records it writes: format/FORMAT.md section 10 (Symbol). */
#ifndef D9_AGENT_SYMBOLIZE_H
#define D9_AGENT_SYMBOLIZE_H

#include <stdint.h>

/* Reads the sealed segment at path, resolves every address its definitions use (Stack frames,
 * SpawnLocation addresses) with libdw (loaded with dlopen) in the modules its Module
 * definitions record, and writes to tmp a copy of the segment with one more DEFS chunk (String
 * and Symbol records) right after its HEADER and SCHEMA chunks, its trailer's chunk count
 * raised by one. The caller renames tmp over path. Returns 1 when tmp was written (its size in
 * *size), 0 when there is nothing to add or the segment cannot be symbolized (left alone,
 * logged once; tmp does not exist), -ECANCELED when the process is exiting (compress_abort)
 * and tmp was removed. Never touches path itself. errno is preserved. */
int d9__symbolize_segment(const char *path, const char *tmp, uint64_t *size);
/* In a forked child: forgets the libdw session the parent's compressor kept (its state may have
 * been mid-change in another thread at the fork); its memory and descriptors are left as they
 * are, never used. */
void d9__symbolize_child(void);
void d9__symbolize_thread_end(void); /* the compressor ends: its session with it (fdown.c) */

#endif
