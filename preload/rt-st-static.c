/* rt-st-static.c: State Threads linked into the executable (SRS links libst.a into its server), so
 * no st_* symbol is there to interpose. Before main, the adapter's attach finds the runtime's
 * functions in the executable's symbol table (d9__exe_symbol, preload/patch.c) and patches the
 * entry points that have no hook of their own to the same hooks rt-st.c interposes on libst.so
 * (d9__patch: a relocated copy of the prologue becomes the "real" function). The switch
 * callbacks are the runtime's own hooks: rt-st.c installs them by calling the setters found here.
 * It must never leave the program half-traced: anything unexpected refuses the whole runtime
 * (one message, generic mode) and every hook already patched passes straight through.
 * agent/DESIGN.md ("State Threads linked into the program") has the facts. */
#include "preload.h"
#include "rt-st.h"

#include "internal.h"

#include <string.h>

#if __has_include("patch.h")
#include "patch.h"
#define HAVE_PATCH 1
#else
#define HAVE_PATCH 0
#endif

int d9__st_static, d9__st_off;

#if HAVE_PATCH
static int refuse(const char *why, const char *name, int err)
{
	d9__st_off = 1;
	d9__log(D9_LOG_WARN, "State Threads in the executable: %s %s (%s); this process stays in "
		"generic mode", why, name, strerror(err));
	return -err;
}
#endif

int d9__st_attach_static(void)
{
#if !HAVE_PATCH
	return 0;
#else
	void *addr[64];
	int n = 0;

	if (!d9__exe_symbol("st_init"))
		return 0; /* no State Threads in the program */
	/* every function first, so that a runtime that does not look like State Threads (built
	 * without switch callbacks, or a different library's st_init) is refused before any patch */
	for (n = 0; n < 64 && d9__st_entries[n].name; n++) {
		addr[n] = d9__exe_symbol(d9__st_entries[n].name);
		if (!addr[n] && n < D9__ST_REQUIRED)
			return refuse("no", d9__st_entries[n].name, ENOENT);
	}
	if (!d9__exe_symbol("st_thread_self"))
		return refuse("no", "st_thread_self", ENOENT);
	for (int i = 0; i < n; i++) {
		const struct d9__st_entry *e = &d9__st_entries[i];
		if (!addr[i]) {
			continue; /* not linked in: the program cannot call it */
		} else if (!e->hook) {
			*e->real = addr[i];
		} else {
			int r = d9__patch(addr[i], e->hook, e->real, NULL, 0);
			if (r < 0)
				return refuse("cannot patch", e->name, -r);
		}
	}
	d9__st_static = 1;
	return 1;
#endif
}
