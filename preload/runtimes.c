/* runtimes.c: the table of runtime adapters (runtime.h). Adding a runtime: write
 * preload/rt-<name>.c with its `const struct d9__runtime d9__rt_<name>`, add it to the table and
 * its name to d9__runtime_choices, and document it in README.md ("Runtimes"). */
#include "runtime.h"

#include <dlfcn.h>
#include <string.h>

extern const struct d9__runtime d9__rt_st;
extern const struct d9__runtime d9__rt_libco;
extern const struct d9__runtime d9__rt_libuv;

const struct d9__runtime *const d9__runtimes[] = {
	&d9__rt_st,
	&d9__rt_libco,
	&d9__rt_libuv,
	NULL,
};

const char d9__runtime_choices[] = "auto, generic, st, libco, libuv";

/* D9_RUNTIME's value as d9__pcfg.runtime: 0 auto, -1 generic, i + 1 for d9__runtimes[i], -2 unknown. */
int d9__runtime_parse(const char *v)
{
	if (!strcmp(v, "auto"))
		return D9_RUNTIME_AUTO;
	if (!strcmp(v, "generic"))
		return D9_RUNTIME_GENERIC;
	for (int i = 0; d9__runtimes[i]; i++)
		if (!strcmp(v, d9__runtimes[i]->name))
			return i + 1;
	return -2;
}

int d9__rt_wanted(const struct d9__runtime *rt)
{
	int r = d9__pcfg.runtime;

	if (r == D9_RUNTIME_GENERIC || (r > 0 && d9__runtimes[r - 1] != rt))
		return 0;
	return d9_agent_active() && !d9__self.busy && d9__self.role != D9_ROLE_AGENT;
}

/* Called once by the agent's start (lifecycle.c): lets each allowed adapter look for its runtime. */
void d9__runtimes_attach(void)
{
	for (int i = 0; d9__runtimes[i]; i++) {
		const struct d9__runtime *rt = d9__runtimes[i];
		if (rt->attach && (d9__pcfg.runtime == D9_RUNTIME_AUTO || d9__pcfg.runtime == i + 1))
			rt->attach();
	}
}

/* Called by the agent when it ends (lifecycle.c). */
void d9__preload_at_exit(void)
{
	for (int i = 0; d9__runtimes[i]; i++)
		if (d9__runtimes[i]->at_exit)
			d9__runtimes[i]->at_exit();
}

uint64_t d9__rt_location(struct d9__loc_cache *c, void *start, void *callsite)
{
	size_t h = (((uintptr_t)start >> 4) ^ ((uintptr_t)callsite >> 2)) & 63;

	if (c->e[h].id && c->e[h].start == (uintptr_t)start && c->e[h].callsite == (uintptr_t)callsite)
		return c->e[h].id;
	/* a static function has no dynamic symbol: dladdr would give the one before it */
	Dl_info di;
	uint64_t name = 0;
	if (dladdr(start, &di) && di.dli_sname && di.dli_saddr == start)
		name = d9_agent_string(di.dli_sname, strlen(di.dli_sname));
	uint64_t id = d9_agent_location((uintptr_t)start, (uintptr_t)callsite, name);
	if (id) {
		c->e[h].start = (uintptr_t)start;
		c->e[h].callsite = (uintptr_t)callsite;
		c->e[h].id = id;
	}
	return id;
}
