/* dwsym.c: names of code addresses with elfutils libdw, for the agent's background symbolizer
 * (symbolize.c, on the compressor thread of the host) and the analyzer (analyze/symbols.c, which
 * builds this file too), so both name an address the same way. libdw is loaded with dlopen: the
 * agent does not link it and d9-analyze runs without it. Never a wrong name: a module counts only
 * when its build id and placement match the trace's record, and an address only when an ELF
 * symbol holds it. Inside the host no debug file is searched beyond /usr/lib/debug/.build-id.
 * Design: agent/DESIGN.md, "Background symbolization". */
#include "dwsym.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct d9__dw d9__dw;

/* Separate debug files inside the host: only /usr/lib/debug/.build-id/xx/yyyy.debug, named by
 * the module's build id (what Debian's -dbgsym packages install). libdw's standard search is not
 * used there: it loads libdebuginfod, and with it libcurl and some twenty libraries, into the
 * host process, and may ask debuginfod servers over the network from inside it. */
static int host_find_debuginfo(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base,
	const char *file, const char *debuglink, GElf_Word crc, char **debuginfo_file)
{
	const unsigned char *bid;
	GElf_Addr vaddr;
	char path[256];

	(void)user, (void)name, (void)base, (void)file;
	if (debuglink && crc == 0)
		return -1; /* libdw looking for a dwz alt file: the module's own file would be wrong */
	int n = d9__dw.build_id(m, &bid, &vaddr);
	if (n < 2 || n > 64)
		return -1;
	int k = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", bid[0]);
	for (int i = 1; i < n; i++)
		k += snprintf(path + k, sizeof(path) - (size_t)k, "%02x", bid[i]);
	snprintf(path + k, sizeof(path) - (size_t)k, ".debug");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !(*debuginfo_file = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Inside the host every module is reported with its file (dwfl_report_elf): no other search. */
static int host_find_elf(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base,
	char **file, Elf **elf)
{
	(void)m, (void)user, (void)name, (void)base, (void)file, (void)elf;
	return -1;
}

static char *debuginfo_path; /* NULL: libdw's default search path */
static Dwfl_Callbacks host_cb, standard_cb;

int d9__dwsym_load(const char **why)
{
	static const char *why_not; /* why libdw is not usable */

	if (d9__dw.tried)
		goto out;
	d9__dw.tried = 1;
	void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		why_not = "not found";
		goto out;
	}
	why_not = "a function is missing";
#define SYM(field, name) if (!(*(void **)&d9__dw.field = dlsym(h, name))) goto out
	SYM(begin, "dwfl_begin");
	SYM(end, "dwfl_end");
	SYM(report_begin, "dwfl_report_begin");
	SYM(report_begin_add, "dwfl_report_begin_add");
	SYM(report_elf, "dwfl_report_elf");
	SYM(report_end, "dwfl_report_end");
	SYM(addrmodule, "dwfl_addrmodule");
	SYM(addrinfo, "dwfl_module_addrinfo");
	SYM(getsrc, "dwfl_module_getsrc");
	SYM(lineinfo, "dwfl_lineinfo");
	SYM(build_id, "dwfl_module_build_id");
	SYM(addrdie, "dwfl_module_addrdie");
	SYM(getscopes, "dwarf_getscopes");
	SYM(getscopes_die, "dwarf_getscopes_die");
	SYM(tag, "dwarf_tag");
	SYM(attr_integrate, "dwarf_attr_integrate");
	SYM(formstring, "dwarf_formstring");
	SYM(formudata, "dwarf_formudata");
	SYM(getsrcfiles, "dwarf_getsrcfiles");
	SYM(filesrc, "dwarf_filesrc");
	SYM(getelf, "dwfl_module_getelf");
	SYM(getphdrnum, "elf_getphdrnum"); /* libelf, a dependency of libdw */
	SYM(getphdr, "gelf_getphdr");
	SYM(build_id_find_elf, "dwfl_build_id_find_elf");
	SYM(standard_find_debuginfo, "dwfl_standard_find_debuginfo");
	SYM(offline_section_address, "dwfl_offline_section_address");
#undef SYM
	host_cb.find_elf = host_find_elf;
	host_cb.find_debuginfo = host_find_debuginfo;
	host_cb.section_address = d9__dw.offline_section_address;
	standard_cb.find_elf = d9__dw.build_id_find_elf;
	standard_cb.find_debuginfo = d9__dw.standard_find_debuginfo;
	standard_cb.section_address = d9__dw.offline_section_address;
	standard_cb.debuginfo_path = &debuginfo_path;
	d9__dw.ok = 1;
	why_not = NULL;
out:
	if (why)
		*why = why_not;
	return d9__dw.ok;
}

Dwfl *d9__dwsym_begin(enum d9__dwsym_search search)
{
	if (!d9__dwsym_load(NULL))
		return NULL;
	return d9__dw.begin(search == D9__DWSYM_HOST ? &host_cb : &standard_cb);
}

const char *d9__dwsym_base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

int d9__dwsym_placed_right(Dwfl_Module *dm, uint64_t start, uint64_t offset)
{
	GElf_Addr bias;
	Elf *elf = d9__dw.getelf(dm, &bias);
	size_t n;

	if (!elf || d9__dw.getphdrnum(elf, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!d9__dw.getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz)
			return ph.p_vaddr + (offset - ph.p_offset) + bias == start;
	}
	return 0;
}

Dwfl_Module *d9__dwsym_report(Dwfl *dwfl, const char *path, uint64_t start, uint64_t offset,
	const uint8_t *build_id, size_t build_id_len)
{
	const unsigned char *bid;
	GElf_Addr vaddr;
	/* Our own descriptor, close-on-exec (libdw's own open would be inherited by a program the
	 * host execs); libdw owns it once the module is reported. The module is named by its full
	 * path: under its base name, libdw would take another file of that name at the same place
	 * for the same module and free the first one while we still hold it. */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	Dwfl_Module *dm = d9__dw.report_elf(dwfl, path, path, fd, start - offset, false);
	if (!dm) {
		close(fd);
		return NULL;
	}
	int n = d9__dw.build_id(dm, &bid, &vaddr);
	if (build_id_len &&
		(n <= 0 || (size_t)n != build_id_len || memcmp(bid, build_id, (size_t)n)))
		return NULL; /* another build of that file now (or none): its names would be wrong */
	return d9__dwsym_placed_right(dm, start, offset) ? dm : NULL;
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;

	/* integrate: an inlined instance names its function through DW_AT_abstract_origin */
	return d9__dw.attr_integrate(die, DW_AT_name, &at) ? d9__dw.formstring(&at) : NULL;
}

int d9__dwsym_resolve(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f, int max)
{
	GElf_Off symoff;
	GElf_Sym sym;
	const char *name = d9__dw.addrinfo(dm, a, &symoff, &sym, NULL, NULL, NULL);

	/* libdw falls back to the closest symbol before the address when none holds it (a static
	 * function of a stripped library): that name would be wrong */
	if (!name || !*name || sym.st_size == 0 || symoff >= sym.st_size || max < 1)
		return 0;
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *l = d9__dw.getsrc(dm, a);
	if (l)
		file = d9__dw.lineinfo(l, NULL, &line, NULL, NULL, NULL);
	int n = 0;
	Dwarf_Addr bias;
	Dwarf_Die *cu = d9__dw.addrdie(dm, a, &bias), *scopes = NULL;
	int ns = cu ? d9__dw.getscopes(cu, a - bias, &scopes) : -1;
	/* dwarf_getscopes goes from the innermost inlined instance to the scopes of that inlined
	 * function's own (abstract) definition, not to the instances it was inlined into: the
	 * concrete chain comes from the instance's DIE (as eu-addr2line -i does) */
	for (int i = 0; i < ns; i++) {
		int tag = d9__dw.tag(&scopes[i]);
		if (tag == DW_TAG_subprogram)
			break;
		if (tag == DW_TAG_inlined_subroutine) {
			Dwarf_Die inl = scopes[i];
			free(scopes);
			scopes = NULL;
			ns = d9__dw.getscopes_die(&inl, &scopes);
			break;
		}
	}
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (ns > 0 && d9__dw.getsrcfiles(cu, &files, &nfiles) != 0)
		files = NULL;
	/* scopes run from a outwards: inlined instances (and lexical blocks) up to the real
	 * function. Every level is walked, so the real function gets the line it calls from even
	 * when deeper levels are left out. */
	for (int i = 0; i < ns; i++) {
		int tag = d9__dw.tag(&scopes[i]);
		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue; /* lexical blocks */
		if (n < max - 1) {
			const char *fn = die_name(&scopes[i]);
			f[n++] = (struct d9__dwsym_frame){ fn && *fn ? fn : "?", file, line };
		}
		/* the caller's position: where this instance was inlined */
		Dwarf_Attribute at;
		Dwarf_Word v;
		line = d9__dw.attr_integrate(&scopes[i], DW_AT_call_line, &at) &&
			!d9__dw.formudata(&at, &v) && v <= 0x7fffffff ? (int)v : 0;
		file = files && d9__dw.attr_integrate(&scopes[i], DW_AT_call_file, &at) &&
			!d9__dw.formudata(&at, &v) && v < nfiles ?
			d9__dw.filesrc(files, v, NULL, NULL) : NULL;
	}
	free(scopes);
	f[n++] = (struct d9__dwsym_frame){ name, file, line }; /* the real function */
	return n;
}
