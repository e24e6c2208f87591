/* dwsym.h: code addresses to names with elfutils libdw, loaded by dlopen (never linked), shared by
 * the agent's background symbolizer (symbolize.c) and the analyzer (analyze/symbols.c), so that
 * both name an address the same way. It depends on nothing else of the agent. It must never give
 * a wrong name: a module is usable only when its file's build id and PT_LOAD placement match what
 * the trace recorded. Design: agent/DESIGN.md, "Background symbolization". */
#ifndef D9_AGENT_DWSYM_H
#define D9_AGENT_DWSYM_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

/* The libdw (and libelf, its dependency) entry points, looked up once by d9__dwsym_load. */
struct d9__dw {
	int tried, ok;
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	void (*end)(Dwfl *);
	void (*report_begin)(Dwfl *);
	void (*report_begin_add)(Dwfl *);
	Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, GElf_Addr, bool);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *),
		void *);
	Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
	const char *(*addrinfo)(Dwfl_Module *, GElf_Addr, GElf_Off *, GElf_Sym *, GElf_Word *,
		Elf **, Dwarf_Addr *);
	Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
	const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *);
	int (*build_id)(Dwfl_Module *, const unsigned char **, GElf_Addr *);
	Dwarf_Die *(*addrdie)(Dwfl_Module *, Dwarf_Addr, Dwarf_Addr *);
	int (*getscopes)(Dwarf_Die *, Dwarf_Addr, Dwarf_Die **);
	int (*getscopes_die)(Dwarf_Die *, Dwarf_Die **);
	int (*tag)(Dwarf_Die *);
	Dwarf_Attribute *(*attr_integrate)(Dwarf_Die *, unsigned int, Dwarf_Attribute *);
	const char *(*formstring)(Dwarf_Attribute *);
	int (*formudata)(Dwarf_Attribute *, Dwarf_Word *);
	int (*getsrcfiles)(Dwarf_Die *, Dwarf_Files **, size_t *);
	const char *(*filesrc)(Dwarf_Files *, size_t, Dwarf_Word *, Dwarf_Word *);
	Elf *(*getelf)(Dwfl_Module *, GElf_Addr *);
	int (*getphdrnum)(Elf *, size_t *);
	GElf_Phdr *(*getphdr)(Elf *, int, GElf_Phdr *);
	/* the analyzer's debug-file search (libdw's standard one); never called in the agent */
	int (*build_id_find_elf)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, Elf **);
	int (*standard_find_debuginfo)(Dwfl_Module *, void **, const char *, Dwarf_Addr,
		const char *, const char *, GElf_Word, char **);
	int (*offline_section_address)(Dwfl_Module *, void **, const char *, Dwarf_Addr,
		const char *, GElf_Word, const GElf_Shdr *, Dwarf_Addr *);
	const char *(*module_info)(Dwfl_Module *, void ***, Dwarf_Addr *, Dwarf_Addr *,
		Dwarf_Addr *, Dwarf_Addr *, const char **, const char **);
	/* checking a separate debug file inside the host (libelf, libdw's dependency) */
	Elf *(*elf_begin)(int, Elf_Cmd, Elf *);
	int (*elf_end)(Elf *);
	ssize_t (*elf_build_id)(Elf *, const void **);
	/* optional (NULL when missing): naming functions without a symbol by .eh_frame_hdr */
	Elf_Data *(*getdata_rawchunk)(Elf *, int64_t, size_t, Elf_Type);
	/* optional (NULL when missing): naming the PLT's stubs by their section */
	Elf_Scn *(*nextscn)(Elf *, Elf_Scn *);
	GElf_Shdr *(*getshdr)(Elf_Scn *, GElf_Shdr *);
	int (*getshdrstrndx)(Elf *, size_t *);
	char *(*strptr)(Elf *, size_t, size_t);
	/* optional (NULL when missing: no DWARF over a limit, d9__dwsym_dwarf_limit) */
	GElf_Chdr *(*getchdr)(Elf_Scn *, GElf_Chdr *);
	/* optional (NULL when missing: a compile unit's lines are trusted past its ranges) */
	int (*haspc)(Dwarf_Die *, Dwarf_Addr);
};
extern struct d9__dw d9__dw; /* valid once d9__dwsym_load returned 1 */

/* Longest demangled C++ name kept; a longer one stays mangled. */
#define D9__DWSYM_NAME_MAX 1024

/* One level of the names of an address: a function and the file:line reached in it (file NULL
 * or line 0 when unknown). Strings belong to the libdw session, or to dem (a demangled C++
 * name): copy the frame with its strings, not by value. */
struct d9__dwsym_frame {
	const char *fn, *file;
	int line;
	char dem[D9__DWSYM_NAME_MAX]; /* fn points here when it was demangled */
};

/* Loads libdw.so.1 (once per process; call it from one thread only). Returns 1 when usable, 0
 * when not (*why, when why is not NULL, says why: "not found" or "a function is missing"). */
int d9__dwsym_load(const char **why);

/* Where a session finds the modules' separate debug files. ROOT is /usr/lib/debug, or
 * D9_DEBUG_DIR when set (read once when the program starts). */
enum d9__dwsym_search {
	/* inside the host: ROOT/.build-id/xx/yyyy.debug named by build id, then the file named by
	 * the module's .gnu_debuglink in the module's directory, its .debug/ and ROOT + directory;
	 * a file counts only when its build id (or, without one, its CRC) is the module's. Never
	 * debuginfod: libdw's standard search would load libdebuginfod (and libcurl) into the host
	 * and could ask servers over the network */
	D9__DWSYM_HOST,
	/* the analyzer: libdw's standard search (build id, .gnu_debuglink, debuginfod when
	 * DEBUGINFOD_URLS is set) */
	D9__DWSYM_STANDARD,
};

/* The places of a module's separate debug file inside the host, in the order D9__DWSYM_HOST
 * tries them: 0 is ROOT/.build-id/xx/yyyy.debug, named by its build id (bid[0..nbid), 2 to 64
 * bytes); 1 to 3 the file its .gnu_debuglink names (link, without '/') in the directory of file
 * (an absolute path), in its .debug/ and under ROOT + that directory. Writes the path of place
 * into path[0..cap): 0, or -1 when the place does not apply or the path does not fit. */
int d9__dwsym_debug_place(char *path, size_t cap, int place, const unsigned char *bid, int nbid,
	const char *file, const char *link);

/* A new libdw session (d9__dw.end frees it) whose modules are reported by file, or NULL. */
Dwfl *d9__dwsym_begin(enum d9__dwsym_search search);

/* The DWARF limit of host sessions (D9_SYMBOLIZE_MEMORY; the analyzer sets none). libelf
 * inflates every compressed debug section of a module when libdw opens its DWARF, and keeps
 * them with the session: libc6-dbg's libc is 10 MB inflated, 16 MB of the host's memory with
 * libdw's tables, for the inline levels and lines of libc frames. A host session opens a
 * module's DWARF only while the inflated bytes of the modules it opened stay within max; past it,
 * the module is named from its symbol table alone (no inline levels, no file:line). Set it before
 * the first session, from the one thread that uses host sessions. */
void d9__dwsym_dwarf_limit(uint64_t max);

/* How many modules host sessions named without their DWARF for the limit since the process
 * started, and the path of the last one (into buf[0..cap)). */
unsigned d9__dwsym_dwarf_skipped(char *buf, size_t cap);

/* Reports to dwfl (between report_begin[_add] and report_end) the file path mapped so that file
 * offset `offset` is at address `start`, as recorded in a trace. Returns the module when its
 * names can be trusted: the file exists, its build id equals build_id (when both are known) and
 * it lands where it was mapped (d9__dwsym_placed_right); NULL otherwise. */
Dwfl_Module *d9__dwsym_report(Dwfl *dwfl, const char *path, uint64_t start, uint64_t offset,
	const uint8_t *build_id, size_t build_id_len);

/* 1 when libdw placed module dm so that file offset `offset` is at address `start`, as in the
 * traced process (a PT_LOAD whose address and file offset differ would shift every name). */
int d9__dwsym_placed_right(Dwfl_Module *dm, uint64_t start, uint64_t offset);

/* The names of address a in module dm into f[0..n): the functions inlined at a, innermost first,
 * each with the file:line reached in it, then the real function (its ELF symbol) at the line
 * reached in it. At most max levels (max >= 1): deeper inlined levels are left out, the real
 * function is always last. Returns n, 0 when a has no trustworthy name (no ELF symbol that holds
 * a: libdw's nearest preceding symbol would be wrong). C++ names are demangled (a name that
 * does not demangle stays as it is). In d9's own agent (a module named libd9agent.so*) a frame is
 * the interposer a program called: it gets the ELF symbol alone, the name of the interposed call
 * (`read`, `pthread_mutex_lock`), without the agent's file:line or inlined helpers. With by_fde,
 * an address no symbol holds is named after the start of its function's .eh_frame entry,
 * "<module>@0x<start>" (1 level), when the module has the usual .eh_frame_hdr table. The agent
 * does not: a segment's Symbol records would then win over the names the analyzer finds in
 * debug files on its machine. */
int d9__dwsym_resolve(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f, int max, int by_fde);

/* The demangled form of C++ name `name` (Itanium ABI, `_Z...`) in buf[0..cap), or name itself
 * when it is not mangled, longer than 2048 bytes, or its demangled form does not fit. Allocates
 * nothing: libiberty's callback demangler works on the stack (about 64 bytes per mangled byte). */
const char *d9__dwsym_demangle(const char *name, char *buf, size_t cap);

/* The last component of path p. */
const char *d9__dwsym_base_name(const char *p);

#endif
