# kb - a knowledge base and kernel skill library for GPU kernel engineers.
#
#   make            build/kb (and build/kb-verify where a CUDA toolkit is found)
#   make deps       install packages and the FAISS C API (idempotent)
#   make model      build/kb model fetch: the embedding model, SHA-256 checked
#   make test       deps, build, the model, the layer and size checks, the tests of
#                   tier ci, TEST_JOBS (nproc) at once: what CI runs
#   make test-quick build, the unit tests, fuzz replays and quick CLI tests
#   make test-full  as make test, with the slow tests too (tier full)
#                   (tiers, logs, skips: tests/run.sh)
#   make check      the test suite under ASan + UBSan
#   make fuzz       each fuzz target for FUZZ_SECONDS (60) under libFuzzer
#   make demo       deps, build, the model, ingest the mirror, answer a query
#   make bench      the figures of BENCHMARKS.md
#   make install PREFIX=/usr/local DESTDIR=   (make uninstall, the same)
#   V=1 shows full commands.

PREFIX  ?= /usr/local
BUILD   ?= build
CC      ?= cc
# BLIS: same throughput as OpenBLAS 0.3.21 here, 1.8x faster query embedding
# (BENCHMARKS.md, Embeddings); BLAS=openblas builds with OpenBLAS
BLAS    ?= blis
KB_MIRROR ?= $(abspath ../shared/corpus)
export KB_MIRROR

ifeq ($(V),1)
Q :=
else
Q := @
endif

PKGS    := sqlite3 libcurl libcjson libxml-2.0 md4c yaml-0.1 libutf8proc libmicrohttpd libcrypto hiredis libzip
ifeq ($(BLAS),blis)
BLAS_CFLAGS := -I/usr/include/$(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/blis-openmp -DKB_BLAS_BLIS
BLAS_LIBS   := -lblis
else
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
endif

# LAPACK (FAISS's few calls into it) linked statically where Debian's
# reference LAPACK is installed (liblapack-dev): the shared one brings in
# OpenBLAS, whose 16,000 symbol relocations cost every fresh kb process
# about a third of its start (BENCHMARKS.md, Fresh-process queries); its
# BLAS calls go to the BLAS above. Its Fortran runtime is named by the
# file liblapack3 brings (libgfortran5): -lgfortran needs
# libgfortran-12-dev, which only gfortran installs, not make deps
MULTIARCH   := $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
LAPACK_A    := $(wildcard /usr/lib/$(MULTIARCH)/lapack/liblapack.a)
GFORTRAN_SO := $(wildcard /usr/lib/$(MULTIARCH)/libgfortran.so.5)
LAPACK_LIBS := $(if $(and $(LAPACK_A),$(GFORTRAN_SO)),$(LAPACK_A) $(GFORTRAN_SO),-llapack)

FAISS_CAPI := $(BUILD)/faiss-capi
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
CPPFLAGS ?=
# CPPFLAGS as make and dpkg-buildflags mean them (the package build's
# -D_FORTIFY_SOURCE=2 comes that way)
ALL_CFLAGS  = -std=c11 -D_GNU_SOURCE $(WARN) $(CPPFLAGS) $(CFLAGS) -I. -isystem $(FAISS_CAPI)/include \
              $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(BLAS_CFLAGS) -include kb/banned.h
LIBS    = $(FAISS_CAPI)/libfaiss_c.a -lfaiss -lstdc++ -lgomp \
          $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(BLAS_LIBS) $(LAPACK_LIBS) -lm -lpthread
LDFLAGS ?=

# Every .c of the library rooms goes into libkb.a. The command layer,
# cli/ (main.c, the command table and every cmd_*.c), is linked into
# build/kb only: library code cannot call it.
MODULES  := kb index verify skills ingest query generator api serve
LIB_SRC  := $(sort $(wildcard $(MODULES:%=%/*.c)))
CMD_SRC  := $(sort $(wildcard cli/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps model test test-quick test-full unit cli layers check demo bench install uninstall clean
all: $(BUILD)/kb $(BUILD)/kb.bash $(BUILD)/_kb $(BUILD)/kb.fish $(BUILD)/kb.1

$(BUILD)/obj/%.o: %.c kb/kb.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libkb.a: $(LIB_OBJ)
	$(Q)rm -f $@.tmp && ar rcs $@.tmp $^ && mv -f $@.tmp $@

$(BUILD)/kb: $(MAIN_OBJ) $(BUILD)/libkb.a $(wildcard $(FAISS_CAPI)/libfaiss_c.a)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@.tmp $(MAIN_OBJ) $(BUILD)/libkb.a $(LIBS) && mv -f $@.tmp $@

# shell completion and the man page: made by kb from its command table
$(BUILD)/kb.bash: $(BUILD)/kb
	$(Q)$(BUILD)/kb completion bash > $@.tmp && mv -f $@.tmp $@
$(BUILD)/_kb: $(BUILD)/kb
	$(Q)$(BUILD)/kb completion zsh > $@.tmp && mv -f $@.tmp $@
$(BUILD)/kb.fish: $(BUILD)/kb
	$(Q)$(BUILD)/kb completion fish > $@.tmp && mv -f $@.tmp $@
$(BUILD)/kb.1: $(BUILD)/kb
	$(Q)$(BUILD)/kb manpage > $@.tmp && mv -f $@.tmp $@

$(BUILD)/tests/%: tests/unit/%.c tests/unit/test_util.h tests/unit/test_http_server.h $(BUILD)/libkb.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST-CC $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkb.a $(LIBS) $(shell pkg-config --libs cmocka)

-include $(LIB_OBJ:.o=.d) $(MAIN_OBJ:.o=.d)

# benchmark programs (scripts/bench-*.sh)
$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libkb.a
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkb.a $(LIBS)

# the encoder's always-inlined AVX helpers: no ABI is crossed; FMA in its
# element-wise loops (ISO C mode turns contraction off)
$(BUILD)/obj/index/bert.o: ALL_CFLAGS += -Wno-psabi -ffp-contract=fast
# bert_gpu.o embeds the device code's text (.incbin), compiled at run time
$(BUILD)/obj/index/bert_gpu.o: index/bert_gpu.cu
# bert.o and vec_file.o include the chosen BLAS's cblas.h (index/blas.h):
# rebuild them when BLAS changes
$(BUILD)/obj/index/bert.o $(BUILD)/obj/index/vec_file.o: $(BUILD)/blas.stamp
$(BUILD)/blas.stamp: FORCE
	@mkdir -p $(BUILD) && echo '$(BLAS)' | cmp -s - $@ || echo '$(BLAS)' > $@
.PHONY: FORCE

# ---- kb-verify (CUDA driver API + NVRTC), only where a toolkit is found ----
-include verify/kb-verify/kb-verify.mk
# ---- fuzz targets: replayed by make test, run by make fuzz ----
include tests/fuzz/fuzz.mk

deps:
	$(Q)scripts/deps.sh

# the embedding model, by kb itself once it is built (deps comes before
# the build: kb links the FAISS C API that deps makes); nothing is
# downloaded when the pinned files are there. KB_MODEL_DIR set but empty
# asks for no model.
model: $(BUILD)/kb
	$(Q)if [ -n "$${KB_MODEL_DIR-unset}" ]; then $(BUILD)/kb -q model fetch; fi

# test-only Python tools (tests/requirements.txt) in a virtualenv; the
# tests that use them find it through $KB_VENV
VENV := $(BUILD)/venv
$(VENV)/.stamp: tests/requirements.txt tests/requirements-nodeps.txt
	$(Q)rm -rf $(VENV) && python3 -m venv $(VENV)
	$(Q)$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
	$(Q)$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -r tests/requirements-nodeps.txt
	$(Q)touch $@

# what the tests run: built at once (-j, unless make was given one), the
# venv's download beside the compiles
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_BINS := all $(UNIT_BIN) $(FUZZ_REPLAY) $(VERIFY_TARGETS) $(VENV)/.stamp
TEST_MAKE  = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS))
test: deps
	$(Q)$(TEST_MAKE) $(TEST_BINS) model
	$(Q)scripts/check-layers.sh $(BUILD)
	$(Q)scripts/check-sizes.sh
	$(Q)KB_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(BUILD) ci

# the edit loop: no deps, no layer check
test-quick:
	$(Q)$(TEST_MAKE) $(TEST_BINS)
	$(Q)KB_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(BUILD) quick

test-full: deps
	$(Q)$(TEST_MAKE) $(TEST_BINS) model
	$(Q)scripts/check-layers.sh $(BUILD)
	$(Q)scripts/check-sizes.sh
	$(Q)KB_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(BUILD) full

# the dependency direction of docs/design.md's Layout, from includes and
# symbols, and the house rules on file and function size
layers: all
	$(Q)scripts/check-layers.sh $(BUILD)
	$(Q)scripts/check-sizes.sh

# one kind of test, every tier
unit: all $(UNIT_BIN) $(FUZZ_REPLAY)
	$(Q)KB_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(BUILD) full unit

cli: all
	$(Q)KB_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(BUILD) full cli

check: deps
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" FAISS_CAPI=build/faiss-capi all model \
	  $(UNIT_SRC:tests/unit/%.c=build-asan/tests/%) $(FUZZ_NAMES:%=build-asan/tests/test_fuzz_%)
	$(Q)ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  tests/run.sh build-asan full

# deps first, then the build: under make -j the two would race
demo: deps
	$(Q)$(MAKE) --no-print-directory all model
	$(Q)scripts/demo.sh $(BUILD)

bench: all model
	$(Q)scripts/bench.sh $(BUILD)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/kb $(DESTDIR)$(PREFIX)/bin/kb
	install -d $(DESTDIR)$(PREFIX)/share/kb
	install -m 644 corpus/sources.json $(DESTDIR)$(PREFIX)/share/kb/sources.json
	install -m 755 scripts/tune-embedder.py $(DESTDIR)$(PREFIX)/share/kb/tune-embedder.py
	cp -R corpus/tasks $(DESTDIR)$(PREFIX)/share/kb/
	cp -RL corpus/skills $(DESTDIR)$(PREFIX)/share/kb/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/kb.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/kb
	install -m 644 $(BUILD)/_kb $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_kb
	install -m 644 $(BUILD)/kb.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/kb.fish
	install -m 644 $(BUILD)/kb.1 $(DESTDIR)$(PREFIX)/share/man/man1/kb.1
	$(if $(wildcard $(BUILD)/kb-verify),install -m 755 $(BUILD)/kb-verify $(DESTDIR)$(PREFIX)/bin/kb-verify)

# what make install put there, and the model 'kb model fetch --system'
# put in PREFIX/share/kb/models (kb's own folder goes whole)
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/kb $(DESTDIR)$(PREFIX)/bin/kb-verify \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/kb \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_kb \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/kb.fish \
	  $(DESTDIR)$(PREFIX)/share/man/man1/kb.1
	rm -rf $(DESTDIR)$(PREFIX)/share/kb

clean:
	rm -rf $(BUILD)/obj $(BUILD)/tests $(BUILD)/kb $(BUILD)/kb.bash $(BUILD)/_kb $(BUILD)/kb.fish $(BUILD)/kb.1 $(BUILD)/kb-verify $(BUILD)/libkb.a build-asan build-fuzz
