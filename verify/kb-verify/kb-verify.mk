# kb-verify.mk - build/kb-verify (CUDA driver API + NVRTC), only where a CUDA
# toolkit is found: $(CUDA_HOME), else /usr/local/cuda. Included by the
# Makefile; without a toolkit it defines nothing and kb builds as before.
# kb itself never links CUDA: kb-verify's sources live in verify/kb-verify/
# (kept out of libkb.a) and link the plain-C task model from libkb.a.
# libcuda is opened at run time (cudrv.h), so kb-verify starts without a
# driver: --compile-only needs none.

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
$(VERIFY_OBJ): verify/kb-verify/verify_int.h
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
