/* rt-st-static.c: State Threads linked into the executable (SRS links libst.a into its server), so
 * no st_* symbol is there to interpose. Before main, the adapter's attach finds the runtime's
 * functions in the executable's symbol table (d9__exe_symbol, preload/patch.c) and patches the
 * entry points that have no hook of their own to the same hooks rt-st.c interposes on libst.so
 * (d9__patch: a relocated copy of the prologue becomes the "real" function). The switch
 * callbacks are the runtime's own hooks: rt-st.c installs them by calling the setters found here.
 * It must never leave the program half-traced: anything unexpected refuses the whole runtime
 * (one message, generic mode) and every hook already patched passes straight through.
 * agent/DESIGN.md ("State Threads as SRS builds it") has the facts. */
#include "patch.h"
#include "preload.h"
#include "rt-st.h"

#include "internal.h"

int d9__st_static, d9__st_off;

/* The one message of a refusal (d9__patch has said why it refused a patch, if it did). */
static int refuse(const char *name, int err, int missing)
{
	d9__st_off = 1;
	if (missing)
		d9__log(D9_LOG_WARN, "State Threads in the executable has no %s (d9 needs a build with "
			"switch callbacks); this process stays in generic mode", name);
	else
		d9__log(D9_LOG_WARN, "State Threads in the executable: %s cannot be patched; this "
			"process stays in generic mode", name);
	return -err;
}

int d9__st_attach_static(void)
{
	void *addr[64];
	int n = 0;

	if (!d9__exe_symbol("st_init"))
		return 0; /* no State Threads in the program */
	/* every function first, so that a runtime that does not look like State Threads (built
	 * without switch callbacks, or a different library's st_init) is refused before any patch */
	for (n = 0; n < 64 && d9__st_entries[n].name; n++) {
		addr[n] = d9__exe_symbol(d9__st_entries[n].name);
		if (!addr[n] && n < D9__ST_REQUIRED)
			return refuse(d9__st_entries[n].name, ENOENT, 1);
	}
	if (!d9__exe_symbol("st_thread_self"))
		return refuse("st_thread_self", ENOENT, 1);
	for (int i = 0; i < n; i++) {
		const struct d9__st_entry *e = &d9__st_entries[i];
		if (!addr[i]) {
			continue; /* not linked in: the program cannot call it */
		} else if (!e->hook) {
			*e->real = addr[i];
		} else {
			int r = d9__patch(addr[i], e->hook, e->real, NULL, 0);
			if (r < 0)
				return refuse(e->name, -r, 0);
		}
	}
	d9__st_static = 1;
	return 1;
}
