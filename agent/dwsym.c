/* dwsym.c: names of code addresses with elfutils libdw, for the agent's background symbolizer
 * (symbolize.c, on the compressor thread of the host) and the analyzer (analyze/symbols.c, which
 * builds this file too), so both name an address the same way. libdw is loaded with dlopen: the
 * agent does not link it and d9-analyze runs without it. Never a wrong name: a module counts only
 * when its build id and placement match the trace's record, an address only when an ELF symbol
 * holds it, and a separate debug file only when its build id (or debuglink CRC) matches. Inside
 * the host, debug files are searched by build id and .gnu_debuglink only, never debuginfod. C++
 * names are demangled with libiberty's allocation-free demangler (linked statically, hidden).
 * Design: agent/DESIGN.md, "Background symbolization" and "Names". */
#include "dwsym.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <dwarf.h>
#include <fcntl.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

struct d9__dw d9__dw;

/* Where separate debug files live: /usr/lib/debug, or D9_DEBUG_DIR (an absolute directory; for
 * tests and for debug trees kept elsewhere). Read once while the program starts (a constructor:
 * single-threaded then; getenv later could race with the host's setenv). */
static char debug_root[PATH_MAX / 2] = "/usr/lib/debug";
static char std_path[PATH_MAX / 2 + 16]; /* libdw's search path for the analyzer */
static char *debuginfo_path; /* NULL: libdw's default search path (":.debug:/usr/lib/debug") */

__attribute__((constructor)) static void read_debug_dir(void)
{
	const char *v = getenv("D9_DEBUG_DIR");
	size_t n = v ? strlen(v) : 0;

	if (!v || v[0] != '/' || n >= sizeof(debug_root))
		return; /* unset, relative or too long: the standard place */
	while (n > 1 && v[n - 1] == '/')
		n--;
	memcpy(debug_root, v, n);
	debug_root[n] = 0;
	snprintf(std_path, sizeof(std_path), ":.debug:%s", debug_root);
	debuginfo_path = std_path;
}

/* 1 when descriptor fd is module m's separate debug file: it carries the module's build id
 * (bid[0..nbid)), or, for a module without one, its bytes have the CRC-32 the module's
 * .gnu_debuglink recorded (zlib's CRC is the one debuglink uses). */
static int debug_file_matches(int fd, const unsigned char *bid, int nbid, GElf_Word crc)
{
	if (nbid > 0) {
		Elf *e = d9__dw.elf_begin(fd, ELF_C_READ_MMAP, NULL);
		const void *b = NULL;
		ssize_t n = e ? d9__dw.elf_build_id(e, &b) : -1;
		int ok = n == nbid && b && !memcmp(b, bid, (size_t)n);
		if (e)
			d9__dw.elf_end(e);
		return ok;
	}
	unsigned char buf[16384];
	uLong c = crc32(0, NULL, 0);
	off_t off = 0;
	ssize_t k;
	while ((k = pread(fd, buf, sizeof(buf), off)) > 0) {
		c = crc32(c, buf, (uInt)k);
		off += k;
	}
	return k == 0 && (GElf_Word)c == crc;
}

/* Opens path when it is module m's debug file and not the module's own file (self: its stat).
 * Returns the descriptor (*out: a copy of path, for libdw), or -1. */
static int try_debug_file(const char *path, const struct stat *self, const unsigned char *bid,
	int nbid, GElf_Word crc, char **out)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
		(self && st.st_dev == self->st_dev && st.st_ino == self->st_ino) ||
		!debug_file_matches(fd, bid, nbid, crc) || !(*out = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the DWARF limit of host sessions (d9__dwsym_dwarf_limit) --------------------------------
 * A module's state sits in its libdw user data (the slot libdw hands the find_debuginfo
 * callback): undecided, its DWARF opened (its inflated bytes counted), or named without it. */
enum { DW_UNDECIDED, DW_OPENED, DW_NAMES_ONLY, DW_SEARCHED };
static uint64_t dwarf_max = UINT64_MAX, dwarf_used; /* the limit; inflated bytes opened */
static unsigned dwarf_skipped; /* modules named without their DWARF */
static char dwarf_skipped_path[256]; /* the last of them */

void d9__dwsym_dwarf_limit(uint64_t max)
{
	dwarf_max = max;
}

unsigned d9__dwsym_dwarf_skipped(char *buf, size_t cap)
{
	if (cap)
		snprintf(buf, cap, "%s", dwarf_skipped_path);
	return dwarf_skipped;
}

/* What opening e's DWARF would inflate: the sizes of its compressed debug sections (ELF
 * SHF_COMPRESSED, or GNU .zdebug_*; uncompressed ones are mapped from the file, not copied).
 * *info: e has a .debug_info; *symtab: e has a .symtab. UINT64_MAX when it cannot tell. */
static uint64_t inflated_bytes(Elf *e, int *info, int *symtab)
{
	size_t shstrndx;
	uint64_t sum = 0;

	*info = *symtab = 0;
	if (!e || !d9__dw.nextscn || !d9__dw.getshdr || !d9__dw.getshdrstrndx || !d9__dw.strptr ||
		!d9__dw.getchdr || !d9__dw.getdata_rawchunk || d9__dw.getshdrstrndx(e, &shstrndx))
		return UINT64_MAX;
	for (Elf_Scn *scn = d9__dw.nextscn(e, NULL); scn; scn = d9__dw.nextscn(e, scn)) {
		GElf_Shdr sh;
		const char *n;
		if (!d9__dw.getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
			!(n = d9__dw.strptr(e, shstrndx, sh.sh_name)))
			continue;
		*symtab |= sh.sh_type == SHT_SYMTAB;
		int gnu = !strncmp(n, ".zdebug_", 8);
		if (!gnu && strncmp(n, ".debug_", 7))
			continue;
		*info |= !strcmp(n + 1 + gnu, "debug_info");
		uint64_t k = 0;
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;
			if (!d9__dw.getchdr(scn, &ch))
				return UINT64_MAX;
			k = ch.ch_size;
		} else if (gnu) {
			/* "ZLIB" and the inflated size, 8 bytes big-endian */
			Elf_Data *d = sh.sh_size >= 12 ?
				d9__dw.getdata_rawchunk(e, (int64_t)sh.sh_offset, 12, ELF_T_BYTE) : NULL;
			const unsigned char *b = d ? d->d_buf : NULL;
			if (!b || memcmp(b, "ZLIB", 4))
				return UINT64_MAX;
			for (int i = 4; i < 12; i++)
				k = k << 8 | b[i];
		}
		if (k > UINT64_MAX - sum)
			return UINT64_MAX;
		sum += k;
	}
	return sum;
}

/* Counts bytes against the limit. Returns 1 when they fit (counted), 0 when not. */
static int dwarf_fits(uint64_t bytes)
{
	if (bytes > dwarf_max || dwarf_used > dwarf_max - bytes)
		return 0;
	dwarf_used += bytes;
	return 1;
}

static void dwarf_skip(const char *path)
{
	dwarf_skipped++;
	snprintf(dwarf_skipped_path, sizeof(dwarf_skipped_path), "%s", path ? path : "?");
}

/* 1 when resolve may open module dm's DWARF. The DWARF in dm's own file is decided here; a module
 * without one gets its debug file's by host_find_debuginfo, which decides there. */
static int dwarf_usable(Dwfl_Module *dm)
{
	void **ud = NULL;

	if (dwarf_max == UINT64_MAX)
		return 1;
	const char *path = d9__dw.module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (!ud)
		return 0;
	if ((uintptr_t)*ud == DW_UNDECIDED) {
		GElf_Addr bias;
		int info, symtab;
		uint64_t k = inflated_bytes(d9__dw.getelf(dm, &bias), &info, &symtab);
		if (!info)
			*ud = (void *)(uintptr_t)DW_SEARCHED; /* libdw looks for a debug file */
		else if (dwarf_fits(k))
			*ud = (void *)(uintptr_t)DW_OPENED;
		else {
			*ud = (void *)(uintptr_t)DW_NAMES_ONLY;
			dwarf_skip(path);
		}
	}
	return (uintptr_t)*ud != DW_NAMES_ONLY;
}

/* Host sessions: a debug file found for module m (descriptor fd) whose DWARF is over the limit.
 * When m's own file has a symbol table, the debug file is not used at all (-1); else it stays
 * for the symbols, without its DWARF. Returns fd or -1. */
static int dwarf_check_file(Dwfl_Module *m, void **user, const char *name, int fd, char **out)
{
	int info, symtab, main_info, main_symtab;
	GElf_Addr bias;

	if (dwarf_max == UINT64_MAX || !user)
		return fd;
	Elf *e = d9__dw.elf_begin(fd, ELF_C_READ_MMAP, NULL);
	uint64_t k = inflated_bytes(e, &info, &symtab);
	if (e)
		d9__dw.elf_end(e);
	if (dwarf_fits(k)) {
		*user = (void *)(uintptr_t)DW_OPENED;
		return fd;
	}
	*user = (void *)(uintptr_t)DW_NAMES_ONLY;
	dwarf_skip(name);
	inflated_bytes(d9__dw.getelf(m, &bias), &main_info, &main_symtab);
	if (!main_symtab)
		return fd;
	close(fd);
	free(*out);
	*out = NULL;
	return -1;
}

int d9__dwsym_debug_place(char *path, size_t cap, int place, const unsigned char *bid, int nbid,
	const char *file, const char *link)
{
	int k = -1;

	if (place == 0) {
		if (nbid < 2 || nbid > 64)
			return -1;
		k = snprintf(path, cap, "%s/.build-id/%02x/", debug_root, bid[0]);
		for (int i = 1; i < nbid && k > 0 && (size_t)k < cap; i++)
			k += snprintf(path + k, cap - (size_t)k, "%02x", bid[i]);
		if (k > 0 && (size_t)k < cap)
			k += snprintf(path + k, cap - (size_t)k, ".debug");
	} else if (place <= 3) {
		if (!link || !*link || strchr(link, '/') || !file || file[0] != '/')
			return -1;
		const char *slash = strrchr(file, '/');
		int dlen = (int)(slash - file); /* the module's directory, without the last '/' */
		k = place == 1 ? snprintf(path, cap, "%.*s/%s", dlen, file, link) :
			place == 2 ? snprintf(path, cap, "%.*s/.debug/%s", dlen, file, link) :
			snprintf(path, cap, "%s%.*s/%s", debug_root, dlen, file, link);
	}
	return k > 0 && (size_t)k < cap ? 0 : -1;
}

/* Separate debug files inside the host, in gdb's order (d9__dwsym_debug_place). libdw's
 * standard search is not used here: it loads libdebuginfod, and with it libcurl and some twenty
 * libraries, into the host process, and may ask debuginfod servers over the network from inside
 * it. */
static int host_find_debuginfo(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base,
	const char *file, const char *debuglink, GElf_Word crc, char **debuginfo_file)
{
	const unsigned char *bid = NULL;
	GElf_Addr vaddr;
	char path[PATH_MAX];
	struct stat self;
	int fd;

	(void)base;
	if (debuglink && crc == 0)
		return -1; /* libdw looking for a dwz alt file: the module's own file would be wrong */
	int nbid = d9__dw.build_id(m, &bid, &vaddr);
	if (nbid < 0 || nbid > 64)
		nbid = 0;
	int stated = 0;
	for (int place = 0; place <= 3; place++) {
		if (d9__dwsym_debug_place(path, sizeof(path), place, bid, nbid, file, debuglink))
			continue;
		if (place && !stated++ && stat(file, &self) != 0)
			return -1; /* a debuglink file must not be the module itself */
		if ((fd = try_debug_file(path, place ? &self : NULL, bid, nbid, crc,
			     debuginfo_file)) >= 0)
			return dwarf_check_file(m, user, name, fd, debuginfo_file);
	}
	return -1;
}

/* Inside the host every module is reported with its file (dwfl_report_elf): no other search. */
static int host_find_elf(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base,
	char **file, Elf **elf)
{
	(void)m, (void)user, (void)name, (void)base, (void)file, (void)elf;
	return -1;
}

static Dwfl_Callbacks host_cb, standard_cb;

/* The agent's loader gate (lifecycle.c: a fork waits for it); d9-analyze, which links this file
 * without the agent, calls dlopen itself. */
void *d9__dlopen(const char *path, int flags) __attribute__((weak));

int d9__dwsym_load(const char **why)
{
	static const char *why_not; /* why libdw is not usable */

	if (d9__dw.tried)
		goto out;
	d9__dw.tried = 1;
	void *h = d9__dlopen ? d9__dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL) :
		dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
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
	SYM(module_info, "dwfl_module_info");
	SYM(elf_begin, "elf_begin"); /* libelf */
	SYM(elf_end, "elf_end");
	SYM(elf_build_id, "dwelf_elf_gnu_build_id");
#undef SYM
	*(void **)&d9__dw.getdata_rawchunk = dlsym(h, "elf_getdata_rawchunk");
	*(void **)&d9__dw.nextscn = dlsym(h, "elf_nextscn");
	*(void **)&d9__dw.getshdr = dlsym(h, "gelf_getshdr");
	*(void **)&d9__dw.getshdrstrndx = dlsym(h, "elf_getshdrstrndx");
	*(void **)&d9__dw.strptr = dlsym(h, "elf_strptr");
	*(void **)&d9__dw.getchdr = dlsym(h, "gelf_getchdr");
	*(void **)&d9__dw.haspc = dlsym(h, "dwarf_haspc");
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
	if (search == D9__DWSYM_HOST)
		dwarf_used = 0;
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

/* Demangler output into a fixed buffer: what does not fit marks it full (the name stays
 * mangled), nothing is allocated. */
struct dem_out {
	char *p;
	size_t len, cap;
	int full;
};

static void dem_put(const char *s, size_t n, void *opaque)
{
	struct dem_out *o = opaque;

	if (o->full || n >= o->cap - o->len) {
		o->full = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

const char *d9__dwsym_demangle(const char *name, char *buf, size_t cap)
{
	/* bounds the demangler's stack (arrays sized by the mangled length, ~64 B per byte) */
	if (!name || name[0] != '_' || name[1] != 'Z' || cap < 2 || strnlen(name, 2049) > 2048)
		return name;
	struct dem_out o = { buf, 0, cap, 0 };
	if (!cplus_demangle_v3_callback(name, DMGL_PARAMS | DMGL_ANSI, dem_put, &o) || o.full ||
		!o.len)
		return name;
	buf[o.len] = 0;
	return buf;
}

/* Fills one level of names; fn is demangled into the frame's own buffer. */
static void set_frame(struct d9__dwsym_frame *f, const char *fn, const char *file, int line)
{
	f->fn = d9__dwsym_demangle(fn, f->dem, sizeof(f->dem));
	f->file = file;
	f->line = line;
}

/* The name of a function's DIE: its C++ linkage name when it has one (demangled later: the
 * qualified name with namespaces, classes and parameters, as the ELF symbol gives), else
 * DW_AT_name. */
static const char *die_name(Dwarf_Die *die)
{
	static const unsigned int attrs[] = { DW_AT_linkage_name, DW_AT_MIPS_linkage_name,
		DW_AT_name };
	Dwarf_Attribute at;

	/* integrate: an inlined instance names its function through DW_AT_abstract_origin (and
	 * a definition through DW_AT_specification) */
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		const char *s = d9__dw.attr_integrate(die, attrs[i], &at) ?
			d9__dw.formstring(&at) : NULL;
		if (s && *s)
			return s;
	}
	return NULL;
}

/* 1 when dm is d9's own agent: its frames are the interposers a program called. */
static int is_agent(Dwfl_Module *dm)
{
	const char *name = d9__dw.module_info(dm, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

	return name && !strncmp(d9__dwsym_base_name(name), "libd9agent.so", 13);
}

/* The bytes of the file at [off, off + n) of the module's ELF, or NULL. */
static const uint8_t *raw(Elf *e, uint64_t off, size_t n)
{
	Elf_Data *d = d9__dw.getdata_rawchunk(e, (int64_t)off, n, ELF_T_BYTE);

	return d && d->d_buf && d->d_size >= n ? d->d_buf : NULL;
}

static int32_t le32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		(uint32_t)p[3] << 24);
}

/* The file offset of ELF address va in a PT_LOAD of e, or -1. */
static int64_t file_off(Elf *e, size_t nph, uint64_t va)
{
	GElf_Phdr ph;

	for (size_t i = 0; i < nph; i++)
		if (d9__dw.getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && va >= ph.p_vaddr &&
			va - ph.p_vaddr < ph.p_filesz)
			return (int64_t)(va - ph.p_vaddr + ph.p_offset);
	return -1;
}

/* Names the frame "<module>@plt" when a is in a stub of the procedure linkage table (.plt,
 * .plt.got, .plt.sec): no symbol holds it, and its .eh_frame entry covers the whole table, whose
 * start is no function's. Returns 1, or 0 when a is not there (or sections cannot be read). */
static int plt_name(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f)
{
	GElf_Addr bias;
	GElf_Shdr sh;
	size_t strndx;
	Elf_Scn *scn = NULL;
	Elf *e = d9__dw.nextscn && d9__dw.getshdr && d9__dw.getshdrstrndx && d9__dw.strptr ?
		d9__dw.getelf(dm, &bias) : NULL;

	if (!e || d9__dw.getshdrstrndx(e, &strndx))
		return 0;
	while ((scn = d9__dw.nextscn(e, scn))) {
		if (!d9__dw.getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) ||
			a - bias < sh.sh_addr || a - bias - sh.sh_addr >= sh.sh_size)
			continue;
		const char *sec = d9__dw.strptr(e, strndx, sh.sh_name);
		if (!sec || strncmp(sec, ".plt", 4) || (sec[4] && sec[4] != '.'))
			return 0;
		const char *path = d9__dw.module_info(dm, NULL, NULL, NULL, NULL, NULL, NULL,
			NULL);
		snprintf(f->dem, sizeof(f->dem), "%s@plt",
			path ? d9__dwsym_base_name(path) : "?");
		f->fn = f->dem;
		f->file = NULL;
		f->line = 0;
		return 1;
	}
	return 0;
}

/* No symbol holds a (a static function of a stripped binary), but its .eh_frame entry still
 * says which function it is in: the entry's start, from the binary search table of
 * .eh_frame_hdr (PT_GNU_EH_FRAME) in the usual encoding (datarel sdata4 entries; others are
 * not read), checked against the entry's own range. Names the frame "<module>@0x<start>" (the
 * start as an ELF address, as objdump shows it) so the samples of one unnamed function add up.
 * Returns 1, or 0 when not known. */
static int fde_name(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f)
{
	GElf_Addr bias;
	GElf_Phdr ph;
	size_t nph, i;
	Elf *e = d9__dw.getdata_rawchunk ? d9__dw.getelf(dm, &bias) : NULL;

	if (!e || d9__dw.getphdrnum(e, &nph))
		return 0;
	for (i = 0; i < nph; i++)
		if (d9__dw.getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			break;
	if (i == nph || ph.p_filesz < 12)
		return 0;
	const uint8_t *h = raw(e, ph.p_offset, ph.p_filesz);
	/* version 1; eh_frame_ptr sdata4 (pcrel or not); count udata4; table datarel|sdata4 */
	if (!h || h[0] != 1 || (h[1] & 0x0f) != 0x0b || h[2] != 0x03 || h[3] != 0x3b)
		return 0;
	uint64_t n = (uint32_t)le32(h + 8), va = a - bias;
	if (n == 0 || n > (ph.p_filesz - 12) / 8)
		return 0;
	uint64_t lo = 0, hi = n; /* the first entry whose start is above va */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ph.p_vaddr + (uint64_t)(int64_t)le32(h + 12 + mid * 8) <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	uint64_t start = ph.p_vaddr + (uint64_t)(int64_t)le32(h + 12 + (lo - 1) * 8);
	uint64_t fde = ph.p_vaddr + (uint64_t)(int64_t)le32(h + 12 + (lo - 1) * 8 + 4);
	int64_t off = file_off(e, nph, fde);
	const uint8_t *r = off >= 0 ? raw(e, (uint64_t)off, 16) : NULL;
	/* length (not 64-bit), CIE pointer, pc_begin pcrel sdata4 (it must decode to start: the
	 * encoding is the one assumed), pc_range */
	if (!r || (uint32_t)le32(r) == 0xffffffffu ||
		fde + 8 + (uint64_t)(int64_t)le32(r + 8) != start || va - start >= (uint32_t)le32(r + 12))
		return 0;
	const char *path = d9__dw.module_info(dm, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	snprintf(f->dem, sizeof(f->dem), "%s@0x%" PRIx64, path ? d9__dwsym_base_name(path) : "?",
		start);
	f->fn = f->dem;
	f->file = NULL;
	f->line = 0;
	return 1;
}

int d9__dwsym_resolve(Dwfl_Module *dm, uint64_t a, struct d9__dwsym_frame *f, int max, int by_fde)
{
	GElf_Off symoff;
	GElf_Sym sym;
	const char *name = d9__dw.addrinfo(dm, a, &symoff, &sym, NULL, NULL, NULL);

	/* libdw falls back to the closest symbol before the address when none holds it (a static
	 * function of a stripped library): that name would be wrong */
	if (max < 1)
		return 0;
	if (!name || !*name || sym.st_size == 0 || symoff >= sym.st_size)
		return by_fde ? plt_name(dm, a, f) || fde_name(dm, a, f) : 0;
	if (is_agent(dm)) {
		/* the interposer's symbol is the call's name; the agent's own source lines and
		 * inlined helpers would read as the program's code. A part of an interposer split
		 * off into a function of its own is named "interposer.part" (preload/libc-block.c's
		 * read.timed), like the compiler's clones (accept.part.0): the name ends at the dot */
		set_frame(&f[0], name, NULL, 0);
		size_t len = strcspn(f[0].fn, ".");
		if (f[0].fn[len] && len > 0 && len < sizeof(f[0].dem)) {
			memmove(f[0].dem, f[0].fn, len); /* fn may be dem itself */
			f[0].dem[len] = 0;
			f[0].fn = f[0].dem;
		}
		return 1;
	}
	if (!dwarf_usable(dm)) {
		set_frame(&f[0], name, NULL, 0);
		return 1;
	}
	Dwarf_Addr bias;
	Dwarf_Die *cu = d9__dw.addrdie(dm, a, &bias), *scopes = NULL;
	/* libdw hands the compile unit whose range starts last before a, even when a lies past
	 * its end (code without DWARF, e.g. crt1.o's _start after a unit's .text.unlikely part),
	 * and then that unit's last line: a false file:line. Such an address gets its symbol only */
	if (cu && d9__dw.haspc && d9__dw.haspc(cu, a - bias) != 1) {
		set_frame(&f[0], name, NULL, 0);
		return 1;
	}
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *l = d9__dw.getsrc(dm, a);
	if (l)
		file = d9__dw.lineinfo(l, NULL, &line, NULL, NULL, NULL);
	int n = 0;
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
			set_frame(&f[n++], fn && *fn ? fn : "?", file, line);
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
	set_frame(&f[n++], name, file, line); /* the real function */
	return n;
}
