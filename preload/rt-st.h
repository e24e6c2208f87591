/* rt-st.h: what the State Threads adapter's two files share. rt-st.c interposes libst.so's entry
 * points; rt-st-static.c finds a runtime linked into the executable (SRS links libst.a) and patches
 * the same entry points there to the same hooks. agent/DESIGN.md ("State Threads") has the facts
 * both rely on. */
#ifndef D9_RT_ST_H
#define D9_RT_ST_H

#include <st.h>

/* SRS's ST has it, Debian's st.h does not declare it */
void st_thread_yield(void);

/* The entry points the adapter hooks (interposed, or patched in the executable) ... */
#define D9__ST_HOOKED(X)                                                            \
	X(int, st_init, (void))                                                     \
	X(st_thread_t, st_thread_create, (void *(*)(void *), void *, int, int))     \
	X(void, st_thread_exit, (void *))                                           \
	X(int, st_poll, (struct pollfd *, int, st_utime_t))                         \
	X(st_switch_cb_t, st_set_switch_in_cb, (st_switch_cb_t))                    \
	X(st_switch_cb_t, st_set_switch_out_cb, (st_switch_cb_t))                   \
	X(int, st_usleep, (st_utime_t))                                             \
	X(int, st_cond_timedwait, (st_cond_t, st_utime_t))                          \
	X(int, st_cond_signal, (st_cond_t))                                         \
	X(int, st_cond_broadcast, (st_cond_t))                                      \
	X(int, st_mutex_lock, (st_mutex_t))                                         \
	X(int, st_mutex_unlock, (st_mutex_t))                                       \
	X(int, st_thread_join, (st_thread_t, void **))                              \
	X(void, st_thread_interrupt, (st_thread_t))                                 \
	X(void, st_thread_yield, (void))
/* ... and the ones it only calls. */
#define D9__ST_CALLED(X)                                                            \
	X(st_thread_t, st_thread_self, (void))                                      \
	X(st_utime_t, st_utime, (void))                                             \
	X(st_utime_t, st_utime_last_clock, (void))
#define D9__ST_FUNCS(X) D9__ST_HOOKED(X) D9__ST_CALLED(X)

/* One function of the runtime: its hook (NULL: only called) and where the adapter keeps the
 * address it calls. The first six hooked ones are what the adapter cannot work without. */
struct d9__st_entry {
	const char *name;
	void *hook;
	void **real;
};
#define D9__ST_REQUIRED 6
extern D9_HIDDEN const struct d9__st_entry d9__st_entries[]; /* rt-st.c; ends with a NULL name */

/* rt-st-static.c: 1 once the executable's runtime was patched (the real functions are then set
 * and never looked up); d9__st_off: it was found and refused, the hooks pass straight through. */
extern D9_HIDDEN int d9__st_static, d9__st_off;

/* rt-st-static.c, from the adapter's attach (before main): returns 1 when the executable contains
 * State Threads and its entry points now lead to the hooks, 0 when it contains none, -errno when
 * it does but cannot be traced (said once on stderr; generic mode). */
int d9__st_attach_static(void);

#endif
