# d9: one non-recursive Makefile. `make` builds everything into build/; `make test` runs every
# test and ends with "N passed, N failed"; `make demo` runs the main job end to end.
# SAN=address,undefined builds the analyzer, the format code and the unit tests with sanitizers
# (the unit tests always build that way under build/san/).

CC      ?= gcc
CLANG   ?= clang
SAN     ?=
CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -fno-omit-frame-pointer
CFLAGS  ?=
ALL_CFLAGS := $(CFLAGS_BASE) -Iformat -Iagent -Ipreload $(CFLAGS)
ifneq ($(SAN),)
ALL_CFLAGS += -fsanitize=$(SAN) -fno-sanitize-recover=all
endif
LDLIBS_FMT := -lz -ldeflate
# dwsym.c demangles C++ names with libiberty's allocation-free demangler (static, PIC on Debian);
# the agent keeps its symbols hidden so they never interpose on the host's own copy
LDLIBS_DEM := -liberty

B := build
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all

FORMAT_SRC  := format/format.c
# the analyzer names code addresses with the agent's agent/dwsym.c (the same libdw naming)
ANALYZE_SRC := $(wildcard analyze/*.c) agent/dwsym.c agent/s3common.c
AGENT_SRC   := $(wildcard agent/*.c) $(wildcard preload/*.c)
UNIT_SRC    := $(wildcard tests/unit/test-*.c)
UNIT_BIN    := $(patsubst tests/unit/%.c,$(B)/san/tests/%,$(UNIT_SRC))
TOOL_SRC    := $(wildcard tests/tools/*.c)
TOOL_BIN    := $(patsubst tests/tools/%.c,$(B)/tests/%,$(TOOL_SRC))
SERVER_BIN  := $(B)/tests/st-http $(B)/tests/st-http-nofp $(B)/tests/epoll-http $(B)/tests/busy-workers \
	$(B)/tests/cxx-http
SERVER_BIN  += $(B)/tests/uv-http
SERVER_BIN  += $(B)/tests/uctx-sched $(B)/tests/mutex-wait $(B)/tests/nbfd
SERVER_BIN  += $(B)/tests/direct $(B)/tests/libcount-read.so
SERVER_BIN  += $(B)/tests/api-demo $(B)/tests/api-demo-nopie

.PHONY: all deps test test-run demo bench fuzz clean golden servers
# no intermediate file is deleted: make's "rm build/san/obj/..." after a fresh build would
# otherwise be the last line of `make test`, after its "N passed, N failed" line
.SECONDARY:
all: $(B)/libd9agent.so $(B)/d9-analyze $(TOOL_BIN) $(SERVER_BIN)

deps:
	bash scripts/install-deps.sh

# ---- objects: build/obj (plain, PIC) and build/san (sanitizers) --------------------------------
$(B)/obj/%.o: %.c $(wildcard format/*.h agent/*.h analyze/*.h preload/*.h) | $(B)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -fno-plt -c $< -o $@

$(B)/san/obj/%.o: %.c $(wildcard format/*.h agent/*.h analyze/*.h tests/unit/*.h) | $(B)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Iformat -Iagent -Itests/unit $(SAN_FLAGS) -c $< -o $@

$(B):
	@mkdir -p $(B)

# ---- products -----------------------------------------------------------------------------------
$(B)/libd9agent.so: $(patsubst %.c,$(B)/obj/%.o,$(FORMAT_SRC) $(AGENT_SRC))
	$(CC) $(ALL_CFLAGS) -shared -fvisibility=hidden -Wl,-z,defs -Wl,--exclude-libs,libiberty.a -o $@ $^ \
		$(LDLIBS_FMT) $(LDLIBS_DEM) -ldl -lpthread

$(B)/d9-analyze: $(patsubst %.c,$(B)/obj/%.o,$(FORMAT_SRC) $(ANALYZE_SRC))
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_FMT) $(LDLIBS_DEM) -lm -lprotobuf-c

# sanitizer build of the analyzer: tests replay hostile inputs through it, about 1,500 runs a
# suite. Linked without PIE: its 39,000 relative relocations (ASan's descriptions of every
# global) cost each run's start about 270 page faults, 4 ms on these VMs.
$(B)/san/d9-analyze: $(patsubst %.c,$(B)/san/obj/%.o,$(FORMAT_SRC) $(ANALYZE_SRC))
	$(CC) $(SAN_FLAGS) -no-pie -o $@ $^ $(LDLIBS_FMT) $(LDLIBS_DEM) -lm -lprotobuf-c

# test-analyze.c #includes the analyzer's sources: rebuild it when they change
$(B)/san/obj/tests/unit/test-analyze.o: $(ANALYZE_SRC) $(wildcard analyze/*.h) agent/dwsym.c
$(B)/san/obj/tests/unit/test-s3.o: agent/s3common.c
$(B)/san/obj/tests/unit/test-fdown.o: agent/fdown.c
$(B)/san/obj/tests/unit/test-files.o: agent/fdown.c agent/files.c
$(B)/san/obj/tests/unit/test-http-scan.o: preload/http-scan.h
$(B)/san/obj/tests/unit/test-pmap.o: preload/pmap.c preload/pmap.h preload/waitq.h agent/mem.c
$(B)/san/obj/tests/unit/test-mem.o: agent/mem.c
$(B)/san/obj/tests/unit/test-schedstat.o: agent/schedstat.h

$(B)/san/tests/%: $(B)/san/obj/tests/unit/%.o $(B)/san/obj/format/format.o
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LDLIBS_FMT) $(LDLIBS_DEM) -lpthread -lm

# test-raw-encode runs the writer's raw.c itself (the test stands in for what it calls)
$(B)/san/tests/test-raw-encode: $(B)/san/obj/tests/unit/test-raw-encode.o $(B)/san/obj/agent/raw.o \
		$(B)/san/obj/format/format.o
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LDLIBS_FMT) $(LDLIBS_DEM) -lpthread -lm

# the recording core as a static archive: the test driver and benchmarks link it directly, so
# they exercise the real inline hot path (objects are pulled in only when referenced)
$(B)/libd9core.a: $(patsubst %.c,$(B)/obj/%.o,$(FORMAT_SRC) $(wildcard agent/*.c))
	rm -f $@
	ar rcs $@ $^

# helper programs for tests and benchmarks (plain build)
$(B)/tests/%: tests/tools/%.c tests/tools/gen-common.h tests/tools/raw-seccomp.h $(B)/libd9core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< $(B)/libd9core.a $(LDLIBS_FMT) $(LDLIBS_DEM) -lpthread -lm -ldl

# unwind-check: its call chain must have no frame pointers (what DWARF unwinding is for), and
# -rdynamic exports its function names to dladdr
$(B)/tests/unwind-check: tests/tools/unwind-check.c $(B)/libd9core.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fomit-frame-pointer -rdynamic -Itests/unit -o $@ $< $(B)/libd9core.a \
		$(LDLIBS_FMT) $(LDLIBS_DEM) -lpthread -lm -ldl

# ---- test servers (tests/servers/): ordinary programs that know nothing of d9 ----------------------
# Own flags: never sanitized (sanitizers and LD_PRELOAD do not mix), frame pointers chosen per
# variant (gcc -O2 omits them by default on x86-64).
SERVER_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2
servers: $(SERVER_BIN)

$(B)/tests/st-http: tests/servers/st-http.c tests/servers/reqlog.h tests/servers/clocks.h
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $< -lst

$(B)/tests/st-http-nofp: tests/servers/st-http.c tests/servers/reqlog.h tests/servers/clocks.h
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fomit-frame-pointer -o $@ $< -lst

$(B)/tests/epoll-http: tests/servers/epoll-http.c tests/servers/reqlog.h tests/servers/clocks.h
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $< -lpthread

$(B)/tests/busy-workers: tests/servers/busy-workers.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -o $@ $< -lpthread

# a libuv server (Debian's libuv1-dev): the libuv adapter's tests
$(B)/tests/uv-http: tests/servers/uv-http.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $< -luv -lpthread

# a hand-written ucontext scheduler: a runtime d9 does not know (test-rt-unknown.sh)
$(B)/tests/uctx-sched: tests/servers/uctx-sched.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $<

# reads the blocking-call wrapper must time, and reads it need not (test-preload-nbfd.sh)
$(B)/tests/nbfd: tests/servers/nbfd.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $< -lpthread

# the calls whose wrappers may enter the kernel themselves, and an interposer after the agent's
# (test-preload-direct.sh)
$(B)/tests/direct: tests/servers/direct.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -o $@ $< -lpthread

$(B)/tests/libcount-read.so: tests/servers/count-read.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -shared -fPIC -o $@ $< -ldl

# pthread_mutex_lock under the blocking-call wrapper (test-preload-mutex.sh)
$(B)/tests/mutex-wait: tests/servers/mutex-wait.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-omit-frame-pointer -o $@ $< -lpthread

# a program built with include/d9.h (test-api.sh): PIE (the default) and not, with --as-needed
$(B)/tests/api-demo: tests/servers/api-demo.c include/d9.h
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -Wl,--as-needed -o $@ $<

$(B)/tests/api-demo-nopie: tests/servers/api-demo.c include/d9.h
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-PIE -no-pie -o $@ $<

# a C++ server (names to demangle: namespaces, classes, templates), built with g++
CXX ?= g++
$(B)/tests/cxx-http: tests/servers/cxx-http.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -O2 -g -Wall -Wextra -Wshadow -fno-omit-frame-pointer -o $@ $<

# ---- patching (preload/patch.c): a program of known prologues, PIE and not, and a preload library
# of the test's own that links patch.o and patches it (test-preload-patch.sh; no test hook in the
# agent)
PATCH_TEST := $(B)/tests/patch-target $(B)/tests/patch-target-nopie $(B)/tests/patch-preload.so
all: $(PATCH_TEST)

$(B)/tests/patch-target: tests/integration/patch-target.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fPIE -pie -o $@ $<

$(B)/tests/patch-target-nopie: tests/integration/patch-target.c
	@mkdir -p $(dir $@)
	$(CC) $(SERVER_CFLAGS) -fno-PIE -no-pie -o $@ $<

# dwsym.o first: its constructor (D9_DEBUG_DIR) must run before the test's, as in the agent
$(B)/tests/patch-preload.so: $(B)/obj/agent/dwsym.o $(B)/obj/preload/patch.o tests/integration/patch-preload.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -Wl,-z,defs -Wl,--exclude-libs,libiberty.a -o $@ $^ \
		$(LDLIBS_FMT) $(LDLIBS_DEM) -ldl -lpthread

# a preload library of test-agent-hostile.sh's that slows the agent writer's writes (no test hook
# in the agent)
all: $(B)/tests/slow-write.so $(B)/tests/heap-who.so
# a preload library of test-agent-heap.sh's that counts the agent's allocations on the program's
# threads (no test hook in the agent)
$(B)/tests/heap-who.so: tests/integration/heap-who.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -Wl,-z,defs -o $@ $< -ldl
$(B)/tests/slow-write.so: tests/integration/slow-write.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -Wl,-z,defs -o $@ $<

# ---- viewer/ embedded in d9-analyze (`d9-analyze html`, analyze/cmd-html.c) ----------------------
# The page and its scripts become byte arrays in build/gen/viewer-files.c (od + sed: no xxd needed).
VIEWER_FILES := viewer/index.html viewer/decode.js viewer/model.js viewer/worker.js viewer/viewer.js
VIEWER_FILES += viewer/diff.html
VIEWER_FILES += viewer/diff.js
$(B)/gen/viewer-files.c: $(VIEWER_FILES) Makefile | $(B)
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile from viewer/: do not edit */'; \
	  echo '#include <stddef.h>'; \
	  echo 'struct d9__viewer_file { const char *name; const unsigned char *data; size_t len; };'; \
	  for f in $(VIEWER_FILES); do \
	    echo "static const unsigned char v_$$(basename $$f | tr -c 'a-zA-Z0-9\n' _)[] = {"; \
	    od -An -v -tx1 $$f | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	    echo '0 };'; \
	  done; \
	  echo 'extern const struct d9__viewer_file d9__viewer_files[];'; \
	  echo 'extern const size_t d9__viewer_nfiles;'; \
	  echo 'const struct d9__viewer_file d9__viewer_files[] = {'; \
	  for f in $(VIEWER_FILES); do \
	    v=v_$$(basename $$f | tr -c 'a-zA-Z0-9\n' _); \
	    echo "	{ \"$$(basename $$f)\", $$v, sizeof($$v) - 1 },"; \
	  done; \
	  echo '};'; \
	  echo 'const size_t d9__viewer_nfiles = sizeof(d9__viewer_files) / sizeof(d9__viewer_files[0]);'; \
	} >$@.tmp && mv $@.tmp $@
$(B)/d9-analyze: $(B)/obj/$(B)/gen/viewer-files.o
$(B)/san/d9-analyze: $(B)/san/obj/$(B)/gen/viewer-files.o

# ---- pprof output (`d9-analyze pprof`, analyze/cmd-pprof.c) ---------------------------------------
# protoc-c (Debian's protobuf-c-compiler) generates the encoder from analyze/proto/profile.proto at
# build time: the .proto is the reviewed source, nothing generated is checked in.
$(B)/gen/profile.pb-c.c $(B)/gen/profile.pb-c.h &: analyze/proto/profile.proto | $(B)
	@mkdir -p $(B)/gen
	protoc-c --proto_path=analyze/proto --c_out=$(B)/gen analyze/proto/profile.proto
$(B)/obj/analyze/cmd-pprof.o $(B)/san/obj/analyze/cmd-pprof.o: $(B)/gen/profile.pb-c.h
$(B)/obj/analyze/cmd-pprof.o: ALL_CFLAGS += -I$(B)/gen
$(B)/san/obj/analyze/cmd-pprof.o: CFLAGS_BASE += -I$(B)/gen
$(B)/obj/$(B)/gen/profile.pb-c.o: ALL_CFLAGS += -I$(B)/gen
$(B)/san/obj/$(B)/gen/profile.pb-c.o: CFLAGS_BASE += -I$(B)/gen
$(B)/d9-analyze: $(B)/obj/$(B)/gen/profile.pb-c.o
$(B)/san/d9-analyze: $(B)/san/obj/$(B)/gen/profile.pb-c.o

# ---- fuzzing (clang + libFuzzer) -------------------------------------------------------------------
FUZZ_FLAGS := -std=gnu11 -O1 -g -Iformat -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
$(B)/fuzz/fuzz-decode: tests/fuzz/fuzz-decode.c $(FORMAT_SRC) format/d9-format.h
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz-decode.c $(FORMAT_SRC) -lz -ldeflate

FUZZ_TIME ?= 600
fuzz: $(B)/fuzz/fuzz-decode
	@mkdir -p $(B)/fuzz/corpus
	$(B)/fuzz/fuzz-decode -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		$(B)/fuzz/corpus tests/fuzz/corpus

# ---- tests, demo, bench ------------------------------------------------------------------------------
TEST_DEPS := all $(B)/san/d9-analyze $(UNIT_BIN) $(B)/fuzz/fuzz-decode
# test and demo are the README's two set-up commands: each runs the install step first
test:
	@bash scripts/install-deps.sh
	@$(MAKE) --no-print-directory test-run

test-run: $(TEST_DEPS)
	@bash tests/run.sh

demo:
	@bash scripts/install-deps.sh
	@$(MAKE) --no-print-directory all
	@bash scripts/demo.sh

bench: all
	@bash scripts/bench.sh

# regenerates tests/golden/*.bin and their expected JSONL (review the diff before committing)
golden: all
	bash tests/golden/make-golden.sh

clean:
	rm -rf $(B)
