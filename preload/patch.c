/* patch.c: the functions of a runtime linked statically into the program, found and redirected in
 * process. d9__exe_symbol reads the running executable's own file (.symtab, else .dynsym, else its
 * separate debug file or DWARF through libdw); d9__patch decodes a function's first instructions
 * with libcapstone (dlopen'ed on the first patch), copies them relocated into a trampoline page
 * mapped within 2 GiB of the code, and writes a jump to the hook over them. It must never crash the
 * host nor change code that may be running: it patches only while one thread exists (the agent's
 * constructor), and refuses, with one message, whatever it cannot prove correct.
 * Design: agent/DESIGN.md, "Patching static runtimes". */
#include "patch.h"

#include "dwsym.h"
#include "internal.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <dwarf.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PAGE_SIZE_ 4096u
#define FN_NAME_MAX 128
#define COLD_MAX 4 /* separated parts (gcc's <fn>.cold) of one function scanned for branches */
#define REL32_REACH (((int64_t)1 << 31) - ((int64_t)1 << 20)) /* rel32 reach, with a margin */

/* ---- the function: where it is, how long, its name and its other parts -------------------- */

struct fn_info {
	uintptr_t start;
	size_t size; /* 0: unknown */
	char name[FN_NAME_MAX];
	struct { uintptr_t start; size_t size; } cold[COLD_MAX]; /* separated parts */
	int ncold;
	int ambiguous; /* a name: several local definitions at different addresses */
};

/* The main program as loaded: its load bias and program headers. */
struct image {
	uintptr_t bias;
	const ElfW(Phdr) *phdr;
	int phnum;
};

static int image_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct image *im = arg;

	(void)size;
	im->bias = info->dlpi_addr;
	im->phdr = info->dlpi_phdr;
	im->phnum = info->dlpi_phnum;
	return 1; /* the first object is the main program */
}

static int image_get(struct image *im)
{
	memset(im, 0, sizeof(*im));
	d9__dl_iterate_phdr(image_cb, im); /* a fork waits (agent/lifecycle.c) */
	return im->phdr ? 0 : -ENOENT;
}

/* 1 when [a, a + n) lies in an executable PT_LOAD of the running program. */
static int image_code(const struct image *im, uintptr_t a, size_t n)
{
	for (int i = 0; i < im->phnum; i++) {
		const ElfW(Phdr) *p = &im->phdr[i];
		uintptr_t lo = im->bias + p->p_vaddr;
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && a >= lo && n <= p->p_memsz &&
			a - lo <= p->p_memsz - n)
			return 1;
	}
	return 0;
}

/* The running program's GNU build id (its PT_NOTE in memory), or 0 bytes. */
static size_t image_build_id(const struct image *im, const uint8_t **id)
{
	for (int i = 0; i < im->phnum; i++) {
		const ElfW(Phdr) *p = &im->phdr[i];
		if (p->p_type != PT_NOTE)
			continue;
		const uint8_t *q = (const uint8_t *)(im->bias + p->p_vaddr), *end = q + p->p_filesz;
		size_t al = p->p_align == 8 ? 7 : 3; /* notes padded to the segment's alignment */
		while (end - q >= (ptrdiff_t)sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *nh = (const void *)q;
			size_t nsz = (nh->n_namesz + al) & ~al, dsz = (nh->n_descsz + al) & ~al;
			if ((size_t)(end - q) - sizeof(*nh) < nsz ||
				(size_t)(end - q) - sizeof(*nh) - nsz < dsz)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
				!memcmp(q + sizeof(*nh), "GNU", 4)) {
				*id = q + sizeof(*nh) + nsz;
				return nh->n_descsz;
			}
			q += sizeof(*nh) + nsz + dsz;
		}
	}
	return 0;
}

/* ---- the executable's file: .symtab and .dynsym, every offset checked ---------------------- */

struct exe_file {
	const uint8_t *map;
	size_t len;
	const ElfW(Shdr) *sh;
	size_t shnum;
};

static void exe_close(struct exe_file *f)
{
	if (f->map)
		munmap((void *)f->map, f->len);
	f->map = NULL;
}

/* Maps the running program's own file (/proc/self/exe names the inode that runs, even when the
 * path has since been replaced) and checks its section table, and that its program headers are
 * the running program's (a program started as "ld.so ./prog" has ld.so as /proc/self/exe: its
 * symbols with the program's load bias would be wrong addresses). */
static int exe_open(struct exe_file *f, const struct image *im)
{
	struct stat st;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	memset(f, 0, sizeof(*f));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
		close(fd);
		return -ENOEXEC;
	}
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -ENOMEM;
	f->map = m;
	f->len = (size_t)st.st_size;
	const ElfW(Ehdr) *eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
		eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff == 0 || eh->e_shoff >= f->len)
		goto bad;
	if (eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phnum != im->phnum ||
		eh->e_phoff > f->len || (size_t)im->phnum * sizeof(ElfW(Phdr)) > f->len - eh->e_phoff ||
		memcmp(f->map + eh->e_phoff, im->phdr, (size_t)im->phnum * sizeof(ElfW(Phdr))))
		goto bad;
	f->sh = (const ElfW(Shdr) *)(f->map + eh->e_shoff);
	if ((f->len - eh->e_shoff) / sizeof(ElfW(Shdr)) < 1)
		goto bad;
	f->shnum = eh->e_shnum ? eh->e_shnum : f->sh[0].sh_size; /* extended numbering */
	if (f->shnum > (f->len - eh->e_shoff) / sizeof(ElfW(Shdr)))
		goto bad;
	return 0;
bad:
	exe_close(f);
	return -ENOEXEC;
}

/* The first section of type `type`, or -1. */
static int exe_section(const struct exe_file *f, uint32_t type)
{
	for (size_t i = 1; i < f->shnum; i++)
		if (f->sh[i].sh_type == type)
			return (int)i;
	return -1;
}

/* What a symbol search looks for: a name (start of the function) or an address (its name). */
struct sym_query {
	const char *name; /* NULL: by address */
	uintptr_t addr;
	int found_global, found_local;
	struct fn_info *out;
};

/* 1 when name is "<base>.cold" or "<base>.cold.<digits>" (gcc's separated cold part). */
static int is_cold_part(const char *name, const char *base)
{
	size_t n = strlen(base);

	if (strncmp(name, base, n) || strncmp(name + n, ".cold", 5))
		return 0;
	name += n + 5;
	if (!*name)
		return 1;
	if (*name++ != '.' || !*name)
		return 0;
	while (*name >= '0' && *name <= '9')
		name++;
	return !*name;
}

/* Offers one defined function symbol (runtime address a, size n) to the query. */
static void sym_offer(struct sym_query *q, const char *name, uintptr_t a, size_t n, int global)
{
	struct fn_info *o = q->out;

	if (!q->name) {
		/* by address: the first symbol there with a size, else the first name (for the
		 * message that says why its body cannot be checked) */
		if (a != q->addr || (q->found_local && (o->size || !n)))
			return;
		q->found_local = 1;
		goto take;
	}
	if (strcmp(name, q->name) != 0)
		return;
	if (global) {
		if (q->found_global)
			return;
		q->found_global = 1;
		o->ambiguous = 0;
	} else if (q->found_global) {
		return;
	} else if (q->found_local++) {
		if (o->start != a)
			o->ambiguous = 1;
		return;
	}
take:
	o->start = a;
	o->size = n;
	snprintf(o->name, sizeof(o->name), "%s", name);
}

/* Runs the query over symbol table section `sec` (SHT_SYMTAB or SHT_DYNSYM). With cold set, adds
 * the separated parts of q->out's function instead. Returns 0, or -ENOEXEC when the table is
 * damaged. */
static int sym_scan(const struct exe_file *f, const struct image *im, int sec,
	struct sym_query *q, int cold)
{
	const ElfW(Shdr) *s = &f->sh[sec];

	if (s->sh_entsize != sizeof(ElfW(Sym)) || s->sh_offset > f->len ||
		s->sh_size > f->len - s->sh_offset || s->sh_link == 0 || s->sh_link >= f->shnum)
		return -ENOEXEC;
	const ElfW(Shdr) *ss = &f->sh[s->sh_link];
	if (ss->sh_offset > f->len || ss->sh_size > f->len - ss->sh_offset)
		return -ENOEXEC;
	const char *str = (const char *)f->map + ss->sh_offset;
	const ElfW(Sym) *sym = (const ElfW(Sym) *)(f->map + s->sh_offset);
	size_t n = s->sh_size / sizeof(ElfW(Sym));

	for (size_t i = 1; i < n; i++) {
		const ElfW(Sym) *y = &sym[i];
		if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_shndx == SHN_UNDEF ||
			y->st_shndx >= SHN_LORESERVE || y->st_shndx >= f->shnum ||
			y->st_name >= ss->sh_size ||
			!memchr(str + y->st_name, 0, ss->sh_size - y->st_name))
			continue;
		const ElfW(Shdr) *in = &f->sh[y->st_shndx];
		if (!(in->sh_flags & SHF_EXECINSTR) || y->st_value < in->sh_addr ||
			y->st_value - in->sh_addr > in->sh_size ||
			y->st_size > in->sh_size - (y->st_value - in->sh_addr))
			continue;
		uintptr_t a = im->bias + y->st_value;
		if (!image_code(im, a, y->st_size ? y->st_size : 1))
			continue; /* not where the running program has code: another file */
		const char *name = str + y->st_name;
		if (cold) {
			struct fn_info *o = q->out;
			if (o->ncold < COLD_MAX && y->st_size && is_cold_part(name, o->name)) {
				o->cold[o->ncold].start = a;
				o->cold[o->ncold++].size = y->st_size;
			}
			continue;
		}
		sym_offer(q, name, a, y->st_size, ELF64_ST_BIND(y->st_info) != STB_LOCAL);
	}
	return 0;
}

/* ---- stripped programs: libdw, the separate debug file's symbols, else DWARF --------------- */

/* The libdw entry points dwsym.c does not look up (same library, already loaded by it). */
static struct {
	int (*getsymtab)(Dwfl_Module *);
	const char *(*getsym_info)(Dwfl_Module *, int, GElf_Sym *, GElf_Addr *, GElf_Word *,
		Elf **, Dwarf_Addr *);
	Dwarf_Die *(*nextcu)(Dwfl_Module *, Dwarf_Die *, Dwarf_Addr *);
	ptrdiff_t (*getfuncs)(Dwarf_Die *, int (*)(Dwarf_Die *, void *), void *, ptrdiff_t);
	int (*lowpc)(Dwarf_Die *, Dwarf_Addr *);
	int (*highpc)(Dwarf_Die *, Dwarf_Addr *);
	int (*hasattr)(Dwarf_Die *, unsigned int);
} dwx;

/* Loads the entry points above (once). Returns 1 when libdw is usable. */
static int dwx_load(void)
{
	static int tried, ok;

	if (tried)
		return ok;
	tried = 1;
	if (!d9__dwsym_load(NULL))
		return 0;
	void *h = d9__dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	if (!h)
		return 0;
#define SYM(field, name) if (!(*(void **)&dwx.field = dlsym(h, name))) return 0
	SYM(getsymtab, "dwfl_module_getsymtab");
	SYM(getsym_info, "dwfl_module_getsym_info");
	SYM(nextcu, "dwfl_module_nextcu");
	SYM(getfuncs, "dwarf_getfuncs");
	SYM(lowpc, "dwarf_lowpc");
	SYM(highpc, "dwarf_highpc");
	SYM(hasattr, "dwarf_hasattr");
#undef SYM
	return ok = 1;
}

/* A libdw session on the running executable (*dwfl: end it with d9__dw.end), with its debug file
 * found as the agent's symbolizer finds it (build id, .gnu_debuglink; never debuginfod). One per
 * lookup: no descriptor or debug data stays in the host. Returns the module or NULL. */
static Dwfl_Module *dbg_open(const struct image *im, Dwfl **dwfl)
{
	char path[PATH_MAX];
	const uint8_t *bid = NULL;

	*dwfl = NULL;
	if (!dwx_load())
		return NULL;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0 || (size_t)n >= sizeof(path) - 1)
		return NULL;
	path[n] = 0;
	/* the first PT_LOAD: where the file's first mapped byte is */
	const ElfW(Phdr) *load = NULL;
	for (int i = 0; i < im->phnum && !load; i++)
		if (im->phdr[i].p_type == PT_LOAD)
			load = &im->phdr[i];
	if (!load || !(*dwfl = d9__dwsym_begin(D9__DWSYM_HOST)))
		return NULL;
	size_t nbid = image_build_id(im, &bid);
	uintptr_t off = load->p_offset & ~(uintptr_t)(PAGE_SIZE_ - 1);
	uintptr_t start = im->bias + load->p_vaddr - (load->p_offset - off);
	d9__dw.report_begin(*dwfl);
	/* the file must be the running build (its build id), else its names would be wrong */
	Dwfl_Module *m = d9__dwsym_report(*dwfl, path, start, off, bid, nbid);
	d9__dw.report_end(*dwfl, NULL, NULL);
	return m;
}

/* 1 when a stripped executable may have more to say than its .dynsym: DWARF of its own, or a
 * separate debug file where the symbolizer would find one (d9__dwsym_debug_place: by its build
 * id, or the file its .gnu_debuglink names). Checked first because libdw costs milliseconds and
 * mappings, and because its session runs on the program's thread before main: what it
 * allocates and frees there leaves holes in the program's main heap. nginx, whose worker serves
 * from that heap, then spent about 200 more instructions in malloc and free per request
 * (agent/COST.md section 29). Most packaged servers have a .gnu_debuglink (Debian's strip adds
 * one) and no debug file installed; every program the agent is preloaded into asks at start. */
static int worth_debug(const struct exe_file *f, const struct image *im)
{
	const ElfW(Ehdr) *eh = (const void *)f->map;
	const char *link = NULL;
	char path[PATH_MAX], exe[PATH_MAX];

	if (eh->e_shstrndx != SHN_UNDEF && eh->e_shstrndx < f->shnum) {
		const ElfW(Shdr) *ss = &f->sh[eh->e_shstrndx];
		if (ss->sh_offset <= f->len && ss->sh_size <= f->len - ss->sh_offset)
			for (size_t i = 1; i < f->shnum; i++) {
				const ElfW(Shdr) *sh = &f->sh[i];
				size_t o = sh->sh_name;
				const char *nm = (const char *)f->map + ss->sh_offset + o;
				if (o >= ss->sh_size || !memchr(nm, 0, ss->sh_size - o))
					continue;
				if (!strcmp(nm, ".debug_info"))
					return 1;
				/* the name it holds, when it lies in the file and ends there */
				if (!strcmp(nm, ".gnu_debuglink") && sh->sh_type != SHT_NOBITS &&
					sh->sh_offset <= f->len && sh->sh_size &&
					sh->sh_size <= f->len - sh->sh_offset &&
					memchr(f->map + sh->sh_offset, 0, sh->sh_size))
					link = (const char *)f->map + sh->sh_offset;
			}
	}
	const uint8_t *bid;
	int nbid = (int)image_build_id(im, &bid);
	ssize_t n = link ? readlink("/proc/self/exe", exe, sizeof(exe) - 1) : -1;
	if (n > 0 && (size_t)n < sizeof(exe) - 1)
		exe[n] = 0;
	else
		link = NULL;
	for (int place = 0; place <= 3; place++)
		if (!d9__dwsym_debug_place(path, sizeof(path), place, bid, nbid, link ? exe : NULL,
			    link) && access(path, R_OK) == 0)
			return 1;
	return 0;
}

struct die_query {
	const char *name; /* NULL: by address */
	uintptr_t addr;
	Dwarf_Addr bias;
	int found;
	struct fn_info *out;
};

static int die_cb(Dwarf_Die *die, void *arg)
{
	struct die_query *q = arg;
	Dwarf_Addr lo, hi;
	Dwarf_Attribute at;
	/* an out-of-line copy of an inlined function has its name through DW_AT_abstract_origin */
	Dwarf_Attribute *na = d9__dw.attr_integrate(die, DW_AT_name, &at);
	const char *name = na ? d9__dw.formstring(na) : NULL;

	if (!name || dwx.hasattr(die, DW_AT_declaration) || dwx.lowpc(die, &lo) ||
		dwx.highpc(die, &hi) || hi <= lo)
		return DWARF_CB_OK; /* no single code range: not one we can name with certainty */
	uintptr_t a = (uintptr_t)(lo + q->bias);
	if (q->name ? strcmp(name, q->name) != 0 : a != q->addr)
		return DWARF_CB_OK;
	if (q->found++ && q->out->start != a) {
		q->out->ambiguous = 1; /* static functions of one name in several files */
		return DWARF_CB_OK;
	}
	q->out->start = a;
	q->out->size = (size_t)(hi - lo);
	snprintf(q->out->name, sizeof(q->out->name), "%s", name);
	return DWARF_CB_OK;
}

/* Looks the function up in the debug file's symbol table, else in its DWARF (subprogram DIEs with
 * one code range). Returns 0 or -ENOENT. */
static int dbg_find(const struct image *im, struct sym_query *q)
{
	Dwfl *dwfl;
	Dwfl_Module *m = dbg_open(im, &dwfl);
	int ret = -ENOENT;

	if (!m)
		goto out;
	int n = dwx.getsymtab(m);
	for (int i = 1; i < n; i++) {
		GElf_Sym s;
		GElf_Addr a;
		GElf_Word shndx;
		const char *name = dwx.getsym_info(m, i, &s, &a, &shndx, NULL, NULL);
		if (!name || GELF_ST_TYPE(s.st_info) != STT_FUNC || shndx == SHN_UNDEF ||
			!image_code(im, (uintptr_t)a, s.st_size ? s.st_size : 1))
			continue;
		sym_offer(q, name, (uintptr_t)a, s.st_size, GELF_ST_BIND(s.st_info) != STB_LOCAL);
	}
	if (q->found_global || q->found_local) {
		if (q->out->size) /* its cold parts, from the same table */
			for (int i = 1; i < n && q->out->ncold < COLD_MAX; i++) {
				GElf_Sym s;
				GElf_Addr a;
				const char *name = dwx.getsym_info(m, i, &s, &a, NULL, NULL, NULL);
				if (name && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_size &&
					is_cold_part(name, q->out->name) &&
					image_code(im, (uintptr_t)a, s.st_size)) {
					q->out->cold[q->out->ncold].start = (uintptr_t)a;
					q->out->cold[q->out->ncold++].size = s.st_size;
				}
			}
		ret = 0;
		goto out;
	}
	struct die_query d = { q->name, q->addr, 0, 0, q->out };
	Dwarf_Die *cu = NULL;
	while ((cu = dwx.nextcu(m, cu, &d.bias)))
		dwx.getfuncs(cu, die_cb, &d, 0);
	if (d.found && image_code(im, q->out->start, q->out->size ? q->out->size : 1))
		ret = 0;
out:
	if (dwfl)
		d9__dw.end(dwfl);
	return ret;
}

/* Finds a function of the running program by name (name != NULL) or by its start address:
 * .symtab, else .dynsym, else (no .symtab) the debug file or DWARF. Returns 0, -ENOENT, or
 * -EINVAL when the name has several local definitions at different addresses. */
static int find_fn(const char *name, uintptr_t addr, struct fn_info *out)
{
	struct image im;
	struct exe_file f;
	struct sym_query q = { name, addr, 0, 0, out };
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = image_get(&im)) != 0)
		return err;
	if ((err = exe_open(&f, &im)) != 0)
		return err;
	int symtab = exe_section(&f, SHT_SYMTAB), dynsym = exe_section(&f, SHT_DYNSYM);
	if (symtab > 0)
		sym_scan(&f, &im, symtab, &q, 0);
	if (!q.found_global && !q.found_local && dynsym > 0)
		sym_scan(&f, &im, dynsym, &q, 0);
	if (q.found_global || q.found_local) {
		if (symtab > 0 && out->size)
			sym_scan(&f, &im, symtab, &q, 1);
		exe_close(&f);
	} else {
		/* a program with its .symtab has every function there: only a stripped one may
		 * have more in a debug file */
		int more = symtab <= 0 && worth_debug(&f, &im);
		exe_close(&f);
		if (!more || dbg_find(&im, &q) != 0)
			return -ENOENT;
	}
	if (out->ambiguous && !q.found_global)
		return -EINVAL;
	return 0;
}

/* Lookups and patches are meant for the agent's start (one thread); the lock only keeps a
 * later caller from running into another's libdw session or patch. */
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;

void *d9__exe_symbol(const char *name)
{
	struct fn_info fi;

	if (!name || !*name)
		return NULL;
	int saved = errno;
	pthread_mutex_lock(&patch_lock);
	int err = find_fn(name, 0, &fi);
	pthread_mutex_unlock(&patch_lock);
	errno = saved;
	if (err == -EINVAL)
		d9__log(D9_LOG_DEBUG, "the executable defines several local functions named %s: "
			"none is taken", name);
	return err ? NULL : (void *)fi.start;
}

/* ---- capstone, loaded with dlopen on the first patch ---------------------------------------- */

static struct {
	int tried, ok;
	csh h;
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*option)(csh, cs_opt_type, size_t);
	cs_insn *(*malloc)(csh);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	void (*free)(cs_insn *, size_t);
	bool (*insn_group)(csh, const cs_insn *, unsigned int);
} cs;

/* Returns NULL, or why capstone cannot be used. */
static const char *cs_load(void)
{
	static const char *why;

	if (cs.tried)
		return why;
	cs.tried = 1;
	why = "libcapstone.so.4 not found (Debian: libcapstone4)";
	void *h = d9__dlopen("libcapstone.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return why;
	why = "libcapstone.so.4 lacks a function";
#define SYM(field, name) if (!(*(void **)&cs.field = dlsym(h, name))) return why
	SYM(open, "cs_open");
	SYM(option, "cs_option");
	SYM(malloc, "cs_malloc");
	SYM(disasm_iter, "cs_disasm_iter");
	SYM(free, "cs_free");
	SYM(insn_group, "cs_insn_group");
#undef SYM
	why = "capstone refused x86-64";
	if (cs.open(CS_ARCH_X86, CS_MODE_64, &cs.h) != CS_ERR_OK)
		return why;
	if (cs.option(cs.h, CS_OPT_DETAIL, CS_OPT_ON) != CS_ERR_OK)
		return why;
	cs.ok = 1;
	return why = NULL;
}

/* ---- one instruction, as far as moving it is concerned ------------------------------------- */

enum ins_kind {
	INS_PLAIN, /* copied as it is */
	INS_RIP, /* a memory operand relative to rip: copied with its displacement moved */
	INS_JMP, /* jmp rel8/rel32 */
	INS_JCC, /* jcc rel8/rel32 */
	INS_CALL, /* call rel32 */
};

struct ins {
	uintptr_t addr;
	unsigned len;
	enum ins_kind kind;
	uintptr_t target; /* INS_RIP: the operand's address; branches: where they go */
	unsigned cc; /* INS_JCC: the condition (low 4 bits of the opcode) */
	unsigned disp_off; /* INS_RIP: offset of the 32-bit displacement */
};

static int is_legacy_prefix(uint8_t b)
{
	return b == 0xf0 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 || b == 0x3e ||
		b == 0x26 || b == 0x64 || b == 0x65 || b == 0x66 || b == 0x67;
}

static int64_t sext(const uint8_t *p, unsigned n)
{
	if (n == 1)
		return (int8_t)p[0];
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Sorts a decoded instruction. Returns NULL, or why it cannot be moved (a 16-bit or other
 * relative form we do not rewrite, a breakpoint, a rip-relative operand we cannot locate). */
static const char *ins_classify(const cs_insn *in, struct ins *o)
{
	const uint8_t *b = in->bytes;
	unsigned n = in->size, i = 0;
	int size_prefix = 0;

	memset(o, 0, sizeof(*o));
	o->addr = (uintptr_t)in->address;
	o->len = n;
	while (i < n && is_legacy_prefix(b[i])) {
		size_prefix |= b[i] == 0x66 || b[i] == 0x67;
		i++;
	}
	if (i < n && (b[i] & 0xf0) == 0x40)
		i++; /* REX */
	if (i >= n)
		return "an instruction of prefixes only";
	unsigned rest = n - i;
	uint8_t op = b[i], op2 = rest > 1 ? b[i + 1] : 0;
	if (op == 0xcc || op == 0xcd)
		return "a breakpoint (int3) in the first instructions: a debugger's, or not code";
	if ((op == 0xe9 && rest == 5) || (op == 0xeb && rest == 2))
		o->kind = INS_JMP;
	else if (op == 0xe8 && rest == 5)
		o->kind = INS_CALL;
	else if (op >= 0x70 && op <= 0x7f && rest == 2)
		o->kind = INS_JCC, o->cc = op & 15u;
	else if (op == 0x0f && op2 >= 0x80 && op2 <= 0x8f && rest == 6)
		o->kind = INS_JCC, o->cc = op2 & 15u;
	if (o->kind != INS_PLAIN) {
		if (size_prefix)
			return "a branch with a 16-bit displacement";
		o->target = o->addr + n + (uintptr_t)sext(b + n - (rest == 2 ? 1 : 4), rest == 2 ? 1 : 4);
		return NULL;
	}
	if (cs.insn_group(cs.h, in, X86_GRP_BRANCH_RELATIVE))
		return "a relative branch that has no 32-bit form (loop, jrcxz, xbegin)";
	const cs_x86 *x = &in->detail->x86;
	for (int k = 0; k < x->op_count; k++) {
		const cs_x86_op *p = &x->operands[k];
		if (p->type != X86_OP_MEM || (p->mem.base != X86_REG_RIP && p->mem.index != X86_REG_RIP))
			continue;
		if (p->mem.index == X86_REG_RIP || x->encoding.disp_size != 4 ||
			x->encoding.disp_offset == 0 || x->encoding.disp_offset + 4u > n)
			return "a rip-relative operand whose displacement cannot be located";
		o->kind = INS_RIP;
		o->disp_off = x->encoding.disp_offset;
		o->target = o->addr + n + (uintptr_t)sext(b + o->disp_off, 4);
	}
	/* the ModRM byte itself: mod 00, r/m 101 is rip + disp32 in 64-bit mode, whatever the
	 * decoder's operand list says (an operand it failed to report would be copied unmoved) */
	unsigned mo = x->encoding.modrm_offset;
	if (o->kind != INS_RIP && mo && mo < n && (b[mo] & 0xc7) == 0x05)
		return "a rip-relative operand the decoder did not report";
	return NULL;
}

static int fits32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* Writes "jmp [rip+0]" and the address: a 14-byte jump that reaches anywhere. */
static unsigned emit_abs_jmp(uint8_t *out, uintptr_t target)
{
	static const uint8_t abs_jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };

	memcpy(out, abs_jmp, 6);
	memcpy(out + 6, &target, 8);
	return 14;
}

/* Writes "jmp target" at out (placed at address at): 5 bytes when rel32 reaches, else the
 * 14-byte absolute form. Returns the length. */
static unsigned emit_jmp(uint8_t *out, uintptr_t at, uintptr_t target)
{
	int64_t rel = (int64_t)(target - (at + 5));

	if (fits32(rel)) {
		int32_t r = (int32_t)rel;
		out[0] = 0xe9;
		memcpy(out + 1, &r, 4);
		return 5;
	}
	return emit_abs_jmp(out, target);
}

/* Copies instruction in (its bytes at src) to out, placed at address at, with its relative
 * parts moved. Returns the length written, 0 with *why when it cannot be moved. */
static unsigned ins_relocate(const struct ins *in, const uint8_t *src, uint8_t *out, uintptr_t at,
	const char **why)
{
	int64_t rel;
	int32_t r;

	switch (in->kind) {
	case INS_PLAIN:
		memcpy(out, src, in->len);
		return in->len;
	case INS_RIP:
		rel = (int64_t)(in->target - (at + in->len));
		if (!fits32(rel)) {
			*why = "a rip-relative operand would not reach its data from the trampoline";
			return 0;
		}
		memcpy(out, src, in->len);
		r = (int32_t)rel;
		memcpy(out + in->disp_off, &r, 4);
		return in->len;
	case INS_JMP:
		return emit_jmp(out, at, in->target);
	case INS_CALL:
		rel = (int64_t)(in->target - (at + 5));
		if (fits32(rel)) {
			r = (int32_t)rel;
			out[0] = 0xe8;
			memcpy(out + 1, &r, 4);
			return 5;
		} else {
			/* call [rip+2]; jmp +8; .quad target */
			static const uint8_t abs_call[8] = { 0xff, 0x15, 2, 0, 0, 0, 0xeb, 8 };
			memcpy(out, abs_call, 8);
			memcpy(out + 8, &in->target, 8);
			return 16;
		}
	case INS_JCC:
		rel = (int64_t)(in->target - (at + 6));
		if (fits32(rel)) {
			r = (int32_t)rel;
			out[0] = 0x0f;
			out[1] = (uint8_t)(0x80 | in->cc);
			memcpy(out + 2, &r, 4);
			return 6;
		}
		/* the opposite condition jumps over an absolute jmp */
		out[0] = (uint8_t)(0x70 | (in->cc ^ 1u));
		out[1] = 14;
		return 2 + emit_abs_jmp(out + 2, in->target);
	}
	*why = "an instruction of an unknown kind";
	return 0;
}

/* ---- the process: one thread, /proc/self/maps ------------------------------------------------ */

/* The number of threads of the process (/proc/self/stat, field 20), or -errno. */
static long thread_count(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	/* after the command's ")": state (3), ppid (4), ... num_threads (20) */
	for (int field = 2; field < 20 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EIO;
	return strtol(p + 1, NULL, 10);
}

/* Calls cb(lo, hi, prot) for each line of /proc/self/maps, in address order, until it returns
 * non-zero. Returns cb's value, 0, or -errno. */
static int maps_each(int (*cb)(uintptr_t lo, uintptr_t hi, int prot, void *arg), void *arg)
{
	char buf[4096], line[128];
	size_t ll = 0;
	int ret = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		for (ssize_t i = 0; i < n && !ret; i++) {
			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1) /* the start is all we read */
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			char *e;
			uintptr_t lo = strtoul(line, &e, 16), hi;
			if (*e != '-')
				continue;
			hi = strtoul(e + 1, &e, 16);
			if (*e != ' ' || strlen(e) < 4)
				continue;
			int prot = (e[1] == 'r' ? PROT_READ : 0) | (e[2] == 'w' ? PROT_WRITE : 0) |
				(e[3] == 'x' ? PROT_EXEC : 0);
			ret = cb(lo, hi, prot, arg);
		}
		if (ret)
			break;
	}
	close(fd);
	return ret;
}

struct prot_q { uintptr_t a; int prot; };

static int prot_cb(uintptr_t lo, uintptr_t hi, int prot, void *arg)
{
	struct prot_q *q = arg;

	if (q->a >= lo && q->a < hi) {
		q->prot = prot;
		return 1;
	}
	return 0;
}

/* The protection of the page holding a, or -1 when it is not mapped. */
static int page_prot(uintptr_t a)
{
	struct prot_q q = { a, -1 };

	return maps_each(prot_cb, &q) == 1 ? q.prot : -1;
}

struct stack_q { uintptr_t sp, hi; };

static int stack_cb(uintptr_t lo, uintptr_t hi, int prot, void *arg)
{
	struct stack_q *q = arg;

	(void)prot;
	if (q->sp >= lo && q->sp < hi) {
		q->hi = hi;
		return 1;
	}
	return 0;
}

/* 1 when this thread's stack, from sp (the frame of d9__patch: above the locals that hold the
 * addresses being patched) to its top, holds a value in (lo, hi): a return address (of a call
 * among the bytes to replace, or of a signal that interrupted them) that would come back into
 * the middle of the jump. Meant for the start, where the stack is a few KiB; a value that merely
 * looks like one refuses too (safe). Returns -1 when the stack cannot be found. */
static int stack_returns_into(uintptr_t sp, uintptr_t lo, uintptr_t hi)
{
	struct stack_q q = { sp, 0 };

	if (maps_each(stack_cb, &q) != 1)
		return -1;
	for (uintptr_t p = (q.sp + 7) & ~(uintptr_t)7; p + 8 <= q.hi; p += 8) {
		uintptr_t v = *(const uintptr_t *)p;
		if (v > lo && v < hi)
			return 1;
	}
	return 0;
}

/* Looking for a free page within rel32 reach of the code: below it first (just under the
 * mapping above the gap: what grows, the heap after the program, grows up, away from it). */
struct gap_q {
	uintptr_t fn, prev_hi;
	uintptr_t below, above; /* best candidates, 0: none */
};

static int gap_cb(uintptr_t lo, uintptr_t hi, int prot, void *arg)
{
	struct gap_q *q = arg;
	uintptr_t w0 = q->fn > (uintptr_t)REL32_REACH ? q->fn - (uintptr_t)REL32_REACH : 0;
	uintptr_t w1 = q->fn + (uintptr_t)REL32_REACH;
	uintptr_t g0 = q->prev_hi > 0x10000 ? q->prev_hi : 0x10000, g1 = lo;

	(void)prot;
	if (hi > q->prev_hi)
		q->prev_hi = hi;
	if (g0 < w0)
		g0 = w0;
	if (g1 > w1)
		g1 = w1;
	if (g1 <= g0 || g1 - g0 < 2 * PAGE_SIZE_ || g1 > 0x7fffffff0000ul)
		return 0;
	/* one page, leaving a guard page's room under the mapping above it */
	uintptr_t c = (g1 - 2 * PAGE_SIZE_) & ~(uintptr_t)(PAGE_SIZE_ - 1);
	if (c < g0)
		return 0;
	if (c < q->fn)
		q->below = c; /* gaps come in address order: the last one below is the closest */
	else if (!q->above)
		q->above = c;
	return 0;
}

/* Maps one read-write page within rel32 reach of fn, or returns NULL. */
static uint8_t *near_page(uintptr_t fn)
{
	struct gap_q q = { fn, 0, 0, 0 };

	if (maps_each(gap_cb, &q) < 0)
		return NULL;
	uintptr_t cand[2] = { q.below, q.above };
	for (int i = 0; i < 2; i++) {
		if (!cand[i])
			continue;
		void *p = mmap((void *)cand[i], PAGE_SIZE_, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			continue;
		int64_t d = (int64_t)((uintptr_t)p - fn);
		if (d > -REL32_REACH && d < REL32_REACH)
			return p;
		munmap(p, PAGE_SIZE_); /* an old kernel took the address as a mere hint */
	}
	return NULL;
}

/* ---- d9__patch ------------------------------------------------------------------------------- */

#define PATCHED_MAX 32
static uintptr_t patched[PATCHED_MAX]; /* functions patched so far: never twice */
static int npatched;

/* What the scan of a function's body gathers for its jump tables: an indirect jmp (a switch) may
 * land anywhere its table says, and the table is found through a rip-relative lea (PIC: 32-bit
 * offsets from the table) or the jmp's own absolute displacement (non-PIC: 64-bit addresses). */
#define TABLES_MAX 32
struct scan {
	uintptr_t fn, end; /* [fn, end): the entry and the bytes the jump replaces */
	int indirect; /* an indirect jmp through a register or a register-based operand */
	int ntab, nabs, overflow;
	uintptr_t tab[TABLES_MAX]; /* lea targets: candidate PIC tables */
	uintptr_t abs[TABLES_MAX]; /* jmp [disp + index * 8]: absolute tables */
};

/* Checks every relative branch and rip-relative address in [a, a + n) (a part of the function):
 * none may land in [fn, end), the entry and the copied bytes, but a call of fn itself (recursion:
 * it goes through the hook like any call) and fn's own address taken (a pointer to it). Notes
 * what the jump-table check needs. Returns NULL or why not; *at gets the culprit. */
static const char *scan_range(uintptr_t a, size_t n, struct scan *sc, cs_insn *in, uintptr_t *at)
{
	const uint8_t *code = (const uint8_t *)a;
	uint64_t addr = a;
	size_t left = n;

	while (left > 0) {
		struct ins x;
		*at = (uintptr_t)addr;
		if (!cs.disasm_iter(cs.h, &code, &left, &addr, in))
			return "bytes in the function that do not decode: a branch back into the "
			       "patched bytes cannot be ruled out";
		const cs_x86 *d = &in->detail->x86;
		if (ins_classify(in, &x)) {
			if (cs.insn_group(cs.h, in, X86_GRP_BRANCH_RELATIVE) && d->op_count >= 1 &&
				d->operands[0].type == X86_OP_IMM)
				/* loop, jrcxz, xbegin: moved never, but their target counts */
				x.kind = INS_JCC, x.target = (uintptr_t)d->operands[0].imm;
			else if (x.kind != INS_PLAIN)
				return "a branch whose target cannot be computed";
			else
				continue; /* int3 and the like: not a branch */
		}
		if (in->id == X86_INS_LEA && x.kind == INS_RIP) {
			if (sc->ntab < TABLES_MAX)
				sc->tab[sc->ntab++] = x.target;
			else
				sc->overflow = 1;
		} else if (in->id == X86_INS_JMP && d->op_count == 1) {
			const cs_x86_op *o = &d->operands[0];
			if (o->type == X86_OP_REG)
				sc->indirect = 1;
			else if (o->type == X86_OP_MEM && o->mem.base == X86_REG_INVALID &&
				o->mem.index != X86_REG_INVALID && o->mem.scale == 8) {
				if (sc->nabs < TABLES_MAX)
					sc->abs[sc->nabs++] = (uintptr_t)o->mem.disp;
				else
					sc->overflow = 1;
			} else if (o->type == X86_OP_MEM && o->mem.base != X86_REG_RIP)
				sc->indirect = 1; /* jmp [reg + ...]: a table whose base is in a register */
		}
		if (x.kind == INS_PLAIN || x.target < sc->fn || x.target >= sc->end)
			continue;
		if (x.target == sc->fn && (x.kind == INS_CALL || x.kind == INS_RIP))
			continue;
		if (x.kind == INS_RIP)
			return "the function takes the address of an instruction inside the patched bytes";
		return "a branch lands inside the bytes the jump replaces (a loop back to the start?)";
	}
	return NULL;
}

/* 1 when [a, a + n) lies in a readable PT_LOAD of the running program (a table we may read). */
static int image_readable(const struct image *im, uintptr_t a, size_t n)
{
	for (int i = 0; i < im->phnum; i++) {
		const ElfW(Phdr) *p = &im->phdr[i];
		uintptr_t lo = im->bias + p->p_vaddr;
		if (p->p_type == PT_LOAD && (p->p_flags & PF_R) && a >= lo && n <= p->p_filesz &&
			a - lo <= p->p_filesz - n)
			return 1;
	}
	return 0;
}

/* 1 when a lies in the function's body or one of its separated parts. */
static int in_function(const struct fn_info *fi, uintptr_t a)
{
	if (a >= fi->start && a - fi->start < fi->size)
		return 1;
	for (int i = 0; i < fi->ncold; i++)
		if (a >= fi->cold[i].start && a - fi->cold[i].start < fi->cold[i].size)
			return 1;
	return 0;
}

/* The jump tables of the function's indirect jumps: their entries are read from the first one
 * on while they land in the function (the table's end is not recorded anywhere; what follows it
 * lands elsewhere). Returns NULL, or why not when an entry lands in [fn, end). */
static const char *scan_tables(const struct scan *sc, const struct fn_info *fi)
{
	struct image im;

	if (!sc->indirect && !sc->nabs)
		return NULL;
	if (sc->overflow)
		return "too many jump tables to check";
	if (image_get(&im))
		return "the program's headers are not available";
	for (int t = 0; t < sc->ntab && sc->indirect; t++) {
		/* PIC: int32 entries relative to the table */
		for (uintptr_t p = sc->tab[t]; image_readable(&im, p, 4) && p - sc->tab[t] < 16384;
			p += 4) {
			int32_t v;
			memcpy(&v, (const void *)p, 4);
			uintptr_t target = sc->tab[t] + (uintptr_t)(intptr_t)v;
			if (!in_function(fi, target))
				break;
			if (target >= sc->fn && target < sc->end)
				return "a jump table entry lands inside the bytes the jump replaces";
		}
	}
	for (int t = 0; t < sc->nabs; t++) {
		/* non-PIC: absolute addresses */
		for (uintptr_t p = sc->abs[t]; image_readable(&im, p, 8) && p - sc->abs[t] < 32768;
			p += 8) {
			uintptr_t target;
			memcpy(&target, (const void *)p, 8);
			if (!in_function(fi, target))
				break;
			if (target >= sc->fn && target < sc->end)
				return "a jump table entry lands inside the bytes the jump replaces";
		}
	}
	return NULL;
}

static void log_refusal(const struct fn_info *fi, void *fn, const char *why)
{
	d9__log(D9_LOG_WARN, "not patching %s (%p): %s; it is left as it was",
		fi && fi->name[0] ? fi->name : "a function", fn, why);
}

static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };

static int patch_locked(void *fn, void *hook, void **orig, const unsigned char *expect,
	size_t expect_len, uintptr_t sp)
{
	struct fn_info fi;
	const char *why = NULL;
	int err = -EINVAL;
	cs_insn *in = NULL;
	uint8_t *page = NULL;
	uintptr_t f = (uintptr_t)fn, h = (uintptr_t)hook;

	memset(&fi, 0, sizeof(fi));
#if !defined(__x86_64__)
	(void)h, (void)expect, (void)expect_len, (void)orig, (void)in, (void)endbr64, (void)sp;
	why = "patching is implemented for x86-64 only";
	err = -ENOTSUP;
	goto refuse;
#else
	if (!fn || !hook || !orig || (expect_len && !expect)) {
		why = "bad arguments";
		goto refuse;
	}
	if (find_fn(NULL, f, &fi) != 0) {
		why = "no function symbol of the executable starts there";
		err = -ENOENT;
		goto refuse;
	}
	if (!fi.size) {
		why = "its symbol has no size (assembly without .size?): its body cannot be checked";
		err = -ENOENT;
		goto refuse;
	}
	for (int i = 0; i < npatched; i++)
		if (patched[i] == f) {
			why = "already patched";
			err = -EEXIST;
			goto refuse;
		}
	if (npatched == PATCHED_MAX) {
		why = "too many patches";
		err = -ENOSPC;
		goto refuse;
	}
	/* never code that may be running: before main, only the thread running constructors */
	long nt = thread_count();
	if (nt != 1 || syscall(SYS_gettid) != getpid()) {
		why = nt < 0 ? "/proc/self/stat is unreadable: cannot tell that no other thread runs"
			     : "other threads run (patching is done only before main)";
		err = -EBUSY;
		goto refuse;
	}
	if (expect_len && (expect_len > fi.size || memcmp(fn, expect, expect_len))) {
		why = "its first bytes are not the ones expected (another build of the runtime?)";
		err = -EILSEQ;
		goto refuse;
	}
	if ((why = cs_load()) != NULL) {
		err = -ENOSYS;
		goto refuse;
	}
	if (!(in = cs.malloc(cs.h))) {
		why = "out of memory";
		err = -ENOMEM;
		goto refuse;
	}

	/* an endbr64 stays where it is: fn remains a valid indirect-branch target (IBT), and the
	 * jump goes after it */
	size_t skip = fi.size >= 4 && !memcmp(fn, endbr64, 4) ? 4 : 0;
	uintptr_t e = f + skip; /* where the jump is written */
	if (fi.size < skip + 5) {
		why = "the function is shorter than the 5-byte jump";
		err = -ERANGE;
		goto refuse;
	}

	/* where the trampoline goes: near (a 5-byte jmp at fn) or anywhere (a 14-byte one) */
	page = near_page(f);
	int near = page != NULL;
	if (!near) {
		page = mmap(NULL, PAGE_SIZE_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (page == MAP_FAILED) {
			page = NULL;
			why = "no memory for a trampoline";
			err = -ENOMEM;
			goto refuse;
		}
	}
	unsigned need = near ? 5 : 14;
	if (fi.size < skip + need) {
		why = "the function is shorter than the 14-byte jump (no page free within 2 GiB for a "
		      "5-byte one)";
		err = -ERANGE;
		goto refuse;
	}

	/* decode the instructions the jump will cover */
	struct ins ins[16];
	int nins = 0;
	size_t copied = 0;
	{
		const uint8_t *code = (const uint8_t *)e;
		uint64_t addr = e;
		size_t left = fi.size - skip;
		while (copied < need) {
			if (nins == 16 || !cs.disasm_iter(cs.h, &code, &left, &addr, in)) {
				why = "its first instructions do not decode";
				err = -EILSEQ;
				goto refuse;
			}
			if ((why = ins_classify(in, &ins[nins])) != NULL) {
				err = -EILSEQ;
				goto refuse;
			}
			copied += in->size;
			nins++;
		}
	}
	for (int i = 0; i < nins; i++)
		if (ins[i].kind == INS_CALL && ins[i].target == ins[i].addr + ins[i].len) {
			why = "a call that reads its own return address";
			err = -EILSEQ;
			goto refuse;
		}
	/* the whole body (the copied bytes too) and its separated parts: nothing may branch into
	 * [fn, e + copied) */
	uintptr_t at = 0, part = f;
	struct scan sc = { .fn = f, .end = e + copied };
	if ((why = scan_range(f, fi.size, &sc, in, &at)) == NULL)
		for (int i = 0; i < fi.ncold && !why; i++)
			why = scan_range(part = fi.cold[i].start, fi.cold[i].size, &sc, in, &at);
	if (!why && (why = scan_tables(&sc, &fi)) != NULL) {
		err = -EILSEQ;
		goto refuse;
	}
	if (why) {
		char msg[200];
		snprintf(msg, sizeof(msg), "%s (at %s+0x%lx)", why, part == f ? "" : ".cold",
			(unsigned long)(at - part));
		err = -EILSEQ;
		log_refusal(&fi, fn, msg);
		goto err;
	}

	/* called from code of fn's own (a program that dlopen()s the agent, a handler): a return
	 * address into the replaced bytes would land inside the jump */
	int on_stack = stack_returns_into(sp, f, e + copied);
	if (on_stack) {
		why = on_stack < 0 ? "this thread's stack is not in /proc/self/maps"
				   : "a return address into the bytes to replace is on the stack: the "
				     "function is running";
		err = -EBUSY;
		goto refuse;
	}

	/* the page: [a thunk to the hook, when fn's jmp cannot reach it][the trampoline] */
	uint8_t buf[PAGE_SIZE_ / 4];
	uintptr_t base = (uintptr_t)page, jmp_to = h;
	unsigned len = 0;
	if (near && !fits32((int64_t)(h - (e + 5)))) {
		len = emit_jmp(buf, base, h);
		jmp_to = base;
		len = (len + 15u) & ~15u;
	}
	uintptr_t tramp = base + len;
	if (skip) {
		memcpy(buf + len, endbr64, 4); /* *orig is called indirectly */
		len += 4;
	}
	for (int i = 0; i < nins; i++) {
		if (len + 32 > sizeof(buf)) {
			why = "the trampoline would not fit";
			err = -ENOSPC;
			goto refuse;
		}
		unsigned k = ins_relocate(&ins[i], (const uint8_t *)ins[i].addr, buf + len, base + len,
			&why);
		if (!k) {
			err = -ERANGE;
			goto refuse;
		}
		len += k;
	}
	len += emit_jmp(buf + len, base + len, e + copied);
	memcpy(page, buf, len);
	if (mprotect(page, PAGE_SIZE_, PROT_READ | PROT_EXEC)) {
		why = "mprotect refused an executable trampoline page";
		err = -EACCES;
		goto refuse;
	}

	/* the jump at e */
	uint8_t jmp[14];
	unsigned jlen;
	if (near) {
		int32_t r = (int32_t)(int64_t)(jmp_to - (e + 5));
		jmp[0] = 0xe9;
		memcpy(jmp + 1, &r, 4);
		jlen = 5;
	} else {
		jlen = emit_abs_jmp(jmp, h);
	}
	uintptr_t p0 = e & ~(uintptr_t)(PAGE_SIZE_ - 1);
	uintptr_t p1 = (e + jlen - 1) & ~(uintptr_t)(PAGE_SIZE_ - 1);
	int prot = page_prot(p0);
	if (prot < 0 || (p1 != p0 && page_prot(p1) != prot) || !(prot & PROT_EXEC)) {
		why = "its page's protection could not be read from /proc/self/maps";
		err = -EFAULT;
		goto refuse;
	}
	size_t plen = p1 - p0 + PAGE_SIZE_;
	/* read-write-execute, so that no code of the page stops being executable; a kernel that
	 * refuses writable code (SELinux execmod) gets read-write for the few stores below */
	if (mprotect((void *)p0, plen, PROT_READ | PROT_WRITE | PROT_EXEC) &&
		mprotect((void *)p0, plen, PROT_READ | PROT_WRITE)) {
		why = "mprotect refused to make its code writable";
		err = -EACCES;
		goto refuse;
	}
	*orig = (void *)tramp;
	/* one store sequence, the first byte last: a reader sees the old entry or the new jump */
	volatile uint8_t *dst = (volatile uint8_t *)e;
	for (unsigned i = 1; i < jlen; i++)
		dst[i] = jmp[i];
	__atomic_store_n(&dst[0], jmp[0], __ATOMIC_RELEASE);
	if (mprotect((void *)p0, plen, prot))
		d9__log(D9_LOG_ERROR, "patched %s but could not restore its page's protection (%s)",
			fi.name, strerror(errno));
	patched[npatched++] = f;
	cs.free(in, 1);
	d9__log(D9_LOG_INFO, "patched %s (%p): its calls go to d9's hook, its first %zu bytes run "
		"relocated at %p", fi.name, fn, skip + copied, *orig);
	return 0;
#endif

refuse:
	log_refusal(&fi, fn, why ? why : "unknown");
err:
	if (page)
		munmap(page, PAGE_SIZE_);
	if (in)
		cs.free(in, 1);
	return err;
}

int d9__patch(void *fn, void *hook, void **orig, const unsigned char *expect, size_t expect_len)
{
	int saved = errno;
	/* the callers' frames start here (frame pointers: the Makefile keeps them) */
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

	pthread_mutex_lock(&patch_lock);
	int err = patch_locked(fn, hook, orig, expect, expect_len, sp);
	pthread_mutex_unlock(&patch_lock);
	errno = saved;
	return err;
}
