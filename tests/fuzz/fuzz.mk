# fuzz.mk - the fuzz targets (tests/fuzz/fuzz_*.c), included by the Makefile.
#   $(BUILD)/tests/test_fuzz_NAME  the target linked with replay.c: run by
#                                  make test on tests/fuzz/regress/NAME/
#   $(BUILD)/fuzz/fuzz_NAME        the target linked with libFuzzer (clang,
#                                  ASan + UBSan): built and run by make fuzz
#                                  (scripts/fuzz.sh), BUILD=build-fuzz

FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES  := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)
FUZZ_REPLAY := $(FUZZ_NAMES:%=$(BUILD)/tests/test_fuzz_%)
FUZZ_BINS   := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/tests/test_fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(BUILD)/libkb.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ-CC $@")
	$(Q)$(CC) $(ALL_CFLAGS) -DFUZZ_NAME='"$*"' $(LDFLAGS) -o $@ $< tests/fuzz/replay.c \
	  $(BUILD)/libkb.a $(LIBS)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libkb.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ-LD $@")
	$(Q)$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libkb.a $(LIBS)

.PHONY: fuzz fuzz-bins
fuzz-bins: $(FUZZ_BINS)
# FUZZ_SECONDS per target (default 60), FUZZ_TARGETS to pick some
fuzz:
	$(Q)scripts/fuzz.sh
