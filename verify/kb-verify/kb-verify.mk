# kb-verify.mk - builds build/kb-verify, the GPU verifier: a program of its
# own (verify/kb-verify/, not part of libkb.a) that compiles a candidate
# kernel with NVRTC, checks it against a task's reference on every shape,
# seed and input distribution, times it against the baseline and prints
# one JSON result (main.c's opening comment has its command line; kb's
# `kb verify` runs it through verify/verifier.c).
#
# Included by the top Makefile. Built only where a CUDA toolkit is found
# ($(CUDA_HOME), else /usr/local/cuda, with cuda.h and nvrtc.h); without
# one this file defines nothing and kb builds as before. kb itself never
# links CUDA: kb-verify links the plain-C task model (verify/task*.c) and
# kb/'s utilities from libkb.a, NVRTC at build time, and opens libcuda at
# run time (cudrv.h), so it starts without a driver: --compile-only needs
# none.
#
# Its files and the one way they call (verify_int.h, one section each):
#   main.c       the command line, --serve, printing results
#   verify.c     one verification, step by step    reference.c  --reference
#   timing.c check.c tensormap.c baselines.c launch.c buffers.c inputs.c
#   cpuref.c     the steps
#   gpu.c        the device (and harness.cu's kernels, embedded)
#   ctx.c        the ground: the driver's pointers, CUDA errors, the
#                context, reasons and verdicts
#   compile.c    NVRTC and the reference cache
# Nothing outside this folder includes its headers.

CUDA_HOME ?= /usr/local/cuda
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
ifneq ($(wildcard $(CUDA_HOME)/include/nvrtc.h),)

NVCC        := $(CUDA_HOME)/bin/nvcc
VERIFY_SRC  := $(sort $(wildcard verify/kb-verify/*.c))
VERIFY_OBJ  := $(VERIFY_SRC:%.c=$(BUILD)/obj/%.o)
HARNESS_FB  := $(BUILD)/verify/harness.fatbin
VERIFY_LIBS := -L$(CUDA_HOME)/lib64 -lnvrtc \
               -Wl,-rpath,$(CUDA_HOME)/lib64 \
               $(shell pkg-config --libs libcjson libcrypto libutf8proc 2>/dev/null) -ldl -lm

$(VERIFY_OBJ): ALL_CFLAGS += -I$(CUDA_HOME)/include -DKBV_CUDA_HOME='"$(CUDA_HOME)"' \
                             -DKBV_HARNESS_PATH='"$(HARNESS_FB)"'
$(VERIFY_OBJ): verify/kb-verify/verify_int.h verify/kb-verify/cudrv.h
# gpu.c embeds the harness with .incbin
$(BUILD)/obj/verify/kb-verify/gpu.o: $(HARNESS_FB)

# kb-verify's own device code (input generation, comparison), built once
# for sm_90 with PTX for newer GPUs, and embedded with .incbin.
$(HARNESS_FB): verify/kb-verify/harness.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) -fatbin -gencode arch=compute_90,code=sm_90 \
	  -gencode arch=compute_90,code=compute_90 -o $@ $<

$(BUILD)/kb-verify: $(VERIFY_OBJ) $(BUILD)/libkb.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $(VERIFY_OBJ) $(BUILD)/libkb.a $(VERIFY_LIBS)

VERIFY_TARGETS := $(BUILD)/kb-verify
all: $(BUILD)/kb-verify
-include $(VERIFY_OBJ:.o=.d)

endif
endif
