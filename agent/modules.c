/* modules.c: the process's module map (path, build id, executable address range, file offset),
 * so the analyzer can name code addresses (spawn locations, stacks) from the files on its own
 * machine. Modules are interned definitions: written into every segment. The writer refreshes the
 * map when the loader's counters say a library was loaded or unloaded (dlopen/dlclose), at most
 * once per pass; never on a recording thread. */
#include "internal.h"

#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

static unsigned long long seen_adds, seen_subs;
static int scanned;

/* The GNU build id from a module's PT_NOTE segments, or 0 bytes. */
static size_t build_id(const struct dl_phdr_info *info, uint8_t *out, size_t cap)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
			size_t name = (n->n_namesz + 3) & ~3u, desc = (n->n_descsz + 3) & ~3u;
			const uint8_t *d = p + sizeof(*n) + name;
			if (d + desc > end)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
				!memcmp(p + sizeof(*n), "GNU", 4)) {
				size_t len = n->n_descsz < cap ? n->n_descsz : cap;
				memcpy(out, d, len);
				return len;
			}
			p = d + desc;
		}
	}
	return 0;
}

static int on_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	char exe[4096];
	const char *path = info->dlpi_name;
	uint8_t id[64];
	int *first = arg;

	if (*first && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		*first = 0;
		if (scanned && info->dlpi_adds == seen_adds && info->dlpi_subs == seen_subs)
			return 1; /* nothing loaded or unloaded since the last scan: stop here */
		if (scanned)
			d9__profile_modules_changed();
		seen_adds = info->dlpi_adds;
		seen_subs = info->dlpi_subs;
	}
	if (!path || !*path) {
		/* the main program */
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return 0;
		exe[n] = 0;
		path = exe;
	}
	size_t idlen = build_id(info, id, sizeof(id));
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uint64_t start = info->dlpi_addr + ph->p_vaddr;
		d9__defs_module(path, start, start + ph->p_memsz, ph->p_offset, id, idlen);
	}
	return 0;
}

void d9__modules_refresh(void)
{
	int first = 1;

	d9__dl_iterate_phdr(on_module, &first); /* a fork waits (lifecycle.c) */
	scanned = 1;
}
