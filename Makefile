# mmrag — build, test, bench.  `make help` lists the targets.
#   make            build build/mmrag and build/libmmrag.a
#   make SAN=1      the same with ASan+UBSan (into build-san/ unless BUILD is set)
#   make CUDA=1     also compile kernels/*.cu with nvcc and link cuBLAS
BUILD ?= build
ifeq ($(SAN),1)
  override BUILD := $(BUILD)-san
endif
ifeq ($(CUDA),1)
  override BUILD := $(BUILD)-cuda
endif
# FUZZ=1: clang with libFuzzer's coverage, ASan and UBSan, into build-fuzz/ (`make fuzz`)
ifeq ($(FUZZ),1)
  override BUILD := $(BUILD)-fuzz
  override CC := clang
endif

CC      ?= cc
CXX     ?= c++
NVCC    ?= /usr/local/cuda/bin/nvcc
PKGS    := poppler-glib cairo cairo-pdf vips sqlite3 jansson libmicrohttpd tesseract lept zlib libpq
OPENBLAS_INC := /usr/include/x86_64-linux-gnu/openblas-pthread
FAISS   := $(BUILD)/faiss
MODELS  ?= models

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC -pthread $(WARN) -I. -Iinclude -I$(OPENBLAS_INC) \
           -I$(FAISS)/include $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  := -L$(FAISS)/lib -Wl,--disable-new-dtags,-rpath,$(abspath $(FAISS))/lib -lfaiss_c -Wl,--no-as-needed -lfaiss_avx2 -Wl,--as-needed \
           $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lopenblas -lgomp -lstdc++ -lm -pthread
ifeq ($(SAN),1)
  CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(FUZZ),1)
  CFLAGS  += -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
             -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(CUDA),1)
  CUDA_HOME ?= /usr/local/cuda
  CFLAGS  += -DMMRAG_CUDA=1 -I$(CUDA_HOME)/include
  LDLIBS  += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib64/stubs -lcublas -lcudart
  NVFLAGS := -O2 -std=c++17 -Xcompiler -fPIC -I. -Iinclude \
             -gencode arch=compute_75,code=sm_75 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
endif

MODULES := kernels ingest vision index retrieval engine api
# api/ is split into rooms (core/, cli/, server/, lib/): its sources sit one level down;
# the CLI's entry point is linked into the binary only, never into the library
LIB_SRC := $(filter-out api/cli/main.c,$(foreach m,$(MODULES),$(wildcard $(m)/*.c $(m)/*/*.c)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
ifeq ($(CUDA),1)
  LIB_OBJ += $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard kernels/*.cu))
endif
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_SH  := $(wildcard tests/test_*.sh)
TOOL_SRC := $(wildcard tests/tool_*.c)
TOOL_BIN := $(TOOL_SRC:tests/%.c=$(BUILD)/tests/%)
# the CLI with the isolated-ingest fault hook (tests/fault_hooks.c); tests only
FAULT_BIN := $(BUILD)/tests/mmrag_faults
# fuzz targets (tests/fuzz/fuzz_*.c): replayed by `make test` with tests/fuzz/replay.c as
# main; `make fuzz` links the same files with libFuzzer (scripts/fuzz.sh)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
PREFIX ?= /usr/local

.PHONY: all deps deps-dev faiss models models-extra test demo bench eval clean help check-faiss install check-api bench-locate
all: $(BUILD)/mmrag $(BUILD)/libmmrag.a $(BUILD)/libmmrag.so $(EXAMPLE_BIN)

help:
	@sed -n 's/^#   //p' Makefile
	@echo "  make deps | models | models-extra | test | demo | bench | bench-pg | bench-index | bench-textenc | bench-locate | eval | check-api | check-llamacpp | clean"

deps:
	@scripts/deps.sh

# the bench's baselines too: Debian's python3-torch (PyTorch references), libhnswlib-dev
deps-dev:
	@scripts/deps.sh --dev

$(FAISS)/.stamp:
	@scripts/build-faiss.sh $(BUILD)
	@touch $@
faiss: $(FAISS)/.stamp

models:
	@scripts/fetch-models.sh $(MODELS)

# optional models (not needed by `make test`; tests that use them skip without them):
# Gemma 3 270M Q4_K_M (Gemma terms: fetched, never committed)
.PHONY: models-extra
models-extra:
	@scripts/fetch-models.sh --extra $(MODELS)

# llama.cpp's llama-bench, the baseline `make bench` compares the engine with (bench only)
# mmrag's own figure encoder (vision/data/figenc, committed): retrain from scratch.
# CPU by default (hours: FIGENC_S seconds of training); on a machine with CUDA torch,
# FIGENC_ARGS="--device cuda --workers 15 --batch 512" (the committed file: 470 s on one H200);
# on a lent device machine (offline, 64 MiB), scripts/figenc-gpu.sh packs and runs it.
FIGENC_S ?= 14400
FIGENC_ARGS ?=
.PHONY: train-figure-encoder
train-figure-encoder:
	@/usr/bin/python3 vision/train/train_figenc.py --minilm $(MODELS)/minilm --out $(BUILD)/figenc \
	  --seconds $(FIGENC_S) $(FIGENC_ARGS)
	@echo "trained: $(BUILD)/figenc (then make finetune-figure-encoder FIGENC_BASE=$(BUILD)/figenc)"

# Later stages, on the CPU in ~55 min: figures of printed manuals (vision/train/figdata_doc.py)
# and real figures of Debian TeX documentation (scripts/figenc-real-data.sh) with their
# captions and the descriptions written by eye (vision/train/real_figures.json), and the
# training split of R vignette figures boxed and described by eye (vision/train/r_figures.json,
# fetched by scripts/eval_figures.py --fetch-r) and the figures ingest finds in 59 more R
# vignettes, described by eye (vision/train/r_more_figures.json, scripts/figenc-r-data.sh),
# upper six blocks trained
# (vision/train/finetune_figenc.py). See MODEL_CARD.md for which stage the committed file is.
FIGENC_BASE ?= vision/data/figenc
FIGENC_FT_S ?= 3000
FIGENC_FT_ARGS ?= --freeze 2 --n-base 2000 --n-doc 3000 --eval-every 50
.PHONY: finetune-figure-encoder
finetune-figure-encoder: $(BUILD)/mmrag
	@real=$$(scripts/figenc-real-data.sh $(BUILD) $(BUILD)/figenc-real) && \
	rdocs=$$(/usr/bin/python3 scripts/eval_figures.py --fetch-r $(BUILD)/figenc-r) && \
	rmore=$$(scripts/figenc-r-data.sh $(BUILD) $$rdocs $(BUILD)/figenc-rmore) && \
	/usr/bin/python3 vision/train/finetune_figenc.py --base $(FIGENC_BASE) --minilm $(MODELS)/minilm \
	  --out $(BUILD)/figenc-ft --real $$real,$$rmore \
	  --described vision/train/real_figures.json,vision/train/r_more_figures.json \
	  --boxed vision/train/r_figures.json --boxed-dir $$rdocs \
	  --seconds $(FIGENC_FT_S) $(FIGENC_FT_ARGS) \
	  --dev vision/train/dev_figures.json --dev-dir $(BUILD)/figenc-real/dev
	@echo "fine-tuned: $(BUILD)/figenc-ft (copy model.safetensors and config.json to vision/data/figenc/," \
	  "then /usr/bin/python3 scripts/golden_figenc.py > tests/data/golden/figenc.json)"

# locate's picture confidence (engine/vpe.c CAL_*): collect the winner's features over the
# four dev sets with the current build and encoder (~15 min; the .debs come with apt), then
# print the leave-one-set-out report and the constants to paste into vpe.c; after a new
# figure encoder, refit and replace vision/train/vpe_calibration.jsonl with the new data
.PHONY: calibrate-locate
calibrate-locate: $(BUILD)/mmrag
	@/usr/bin/python3 scripts/vpe_calibrate.py collect $(BUILD) $(MODELS) $(BUILD)/vpe_calibration.jsonl
	@/usr/bin/python3 scripts/vpe_calibrate.py fit $(BUILD)/vpe_calibration.jsonl

.PHONY: llamacpp check-llamacpp
# the engine's prompt logits against llama.cpp's on the same GGUF files (SmolLM2 as
# shipped and re-quantized to Q4_K_M/Q5_K_M/Q6_K/Q8_0, gemma-3-270m if fetched, the tiny
# architecture models); outside `make test` (it builds llama.cpp once, ~10-20 min)
check-llamacpp:
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/tests/tool_logits $(GOLDEN)
	@scripts/check-llamacpp.sh $(BUILD) $(MODELS)

llamacpp:
	@scripts/build-llamacpp.sh >/dev/null

$(BUILD)/obj/%.o: %.c | $(FAISS)/.stamp
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVFLAGS) -c $< -o $@

# the web page and OpenAPI document are embedded with .incbin (api/server/server_web.c)
$(BUILD)/obj/api/server/server_web.o: $(wildcard api/server/web/*)

$(BUILD)/libmmrag.a: $(LIB_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

# shared library: finds the FAISS libraries next to itself once installed
$(BUILD)/libmmrag.so: $(LIB_OBJ)
	@echo "  LD      $@"
	@$(CC) -shared $(LDFLAGS) -Wl,-soname,libmmrag.so -o $@ $^ -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

# examples use only the public header, like an outside program would
$(BUILD)/examples/%: examples/%.c include/mmrag.h $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmmrag.a $(LDLIBS)

# `make install PREFIX=DIR`: binary, libraries (+ the FAISS ones they need), header, mmrag.pc
install: all
	install -d $(PREFIX)/bin $(PREFIX)/lib/pkgconfig $(PREFIX)/include
	install -m 755 $(BUILD)/mmrag $(PREFIX)/bin/mmrag
	install -m 644 $(BUILD)/libmmrag.a $(PREFIX)/lib/libmmrag.a
	install -m 755 $(BUILD)/libmmrag.so $(PREFIX)/lib/libmmrag.so
	cp -P $(FAISS)/lib/libfaiss*.so* $(PREFIX)/lib/
	install -m 644 include/mmrag.h $(PREFIX)/include/mmrag.h
	install -d $(PREFIX)/share/mmrag/figenc
	install -m 644 vision/data/figenc/model.safetensors vision/data/figenc/config.json \
	  vision/data/figenc/MODEL_CARD.md $(PREFIX)/share/mmrag/figenc/
	sed -e 's|@PREFIX@|$(abspath $(PREFIX))|' -e 's|@PKGS@|$(PKGS)|' \
	    -e 's|@LIBS_PRIVATE@|-lfaiss_c -lfaiss_avx2 -lopenblas -lgomp -lstdc++ -lm -pthread|' \
	    mmrag.pc.in > $(PREFIX)/lib/pkgconfig/mmrag.pc

$(BUILD)/mmrag: $(BUILD)/obj/api/cli/main.o $(BUILD)/libmmrag.a
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FAULT_BIN): tests/fault_hooks.c $(BUILD)/obj/api/cli/main.o $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/api/cli/main.o $(BUILD)/libmmrag.a $(LDLIBS)

$(BUILD)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz.h $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(BUILD)/libmmrag.a $(LDLIBS)

# the libFuzzer binaries (FUZZ=1 only)
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libmmrag.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmmrag.a tests/test.h
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmmrag.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmmrag.a $(LDLIBS)

# bench_index compares against hnswlib (Debian libhnswlib-dev, header-only C++) through
# a small shim compiled for this bench only
$(BUILD)/obj/bench/hnswlib_shim.o: bench/hnswlib_shim.cpp
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	@$(CXX) -O3 -mavx2 -mfma -std=c++11 -fPIC -Wall -Wextra -Werror -c $< -o $@
$(BUILD)/bench/bench_index: bench/bench_index.c $(BUILD)/obj/bench/hnswlib_shim.o $(BUILD)/libmmrag.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/bench/hnswlib_shim.o $(BUILD)/libmmrag.a $(LDLIBS)

# The engine's second test model (a tiny random llama) is generated, not committed: numpy's
# RandomState is stable across versions, and the sha256 pin proves the bytes are the ones the
# golden logits in tests/data/golden/llama_tiny.json were computed on.
$(BUILD)/golden/tiny_llama.gguf: scripts/golden_llama.py tests/data/golden/tiny_llama.gguf.sha256
	@mkdir -p $(dir $@)
	@/usr/bin/python3 scripts/golden_llama.py tiny-gguf $(dir $@) >/dev/null
	@cd $(dir $@) && sha256sum -c --quiet $(abspath tests/data/golden/tiny_llama.gguf.sha256) \
	  || { rm -f $@; echo "tiny_llama.gguf differs from its pinned sha256" >&2; exit 1; }

# Dequantization reference for tests/test_kquants.c: random blocks of every quantized type
# and what PyPI gguf's numpy dequantizers make of them (gguf lives in a cached venv made by
# scripts/gguf-venv.sh; a test-time reference only, never a runtime dependency)
$(BUILD)/golden/kquants.bin: scripts/golden_kquants.py scripts/gguf-venv.sh
	@mkdir -p $(dir $@)
	@PY=$$(scripts/gguf-venv.sh) && $$PY scripts/golden_kquants.py $@.tmp && mv $@.tmp $@

# Tiny random llama3/qwen2/qwen3/gemma3 models (numpy, sha256-pinned like tiny_llama.gguf);
# their PyTorch reference logits are committed in tests/data/golden/archs.json
# (`scripts/golden_archs.py golden build/golden tests/data/golden/archs.json` remakes both)
$(BUILD)/golden/.archs: scripts/golden_archs.py scripts/golden_llama.py tests/data/golden/tiny_archs.sha256
	@mkdir -p $(dir $@)
	@/usr/bin/python3 scripts/golden_archs.py gguf $(dir $@) >/dev/null
	@cd $(dir $@) && sha256sum -c --quiet $(abspath tests/data/golden/tiny_archs.sha256) \
	  || { echo "tiny architecture models differ from their pinned sha256" >&2; exit 1; }
	@touch $@

GOLDEN := $(BUILD)/golden/tiny_llama.gguf $(BUILD)/golden/kquants.bin $(BUILD)/golden/.archs

# `make test` = deps + models + build + every tests/test_* binary; ends "N passed, N failed"
test: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(TEST_BIN) $(TOOL_BIN) $(FAULT_BIN) $(FUZZ_BIN) $(GOLDEN)
	@scripts/run-tests.sh $(BUILD) $(MODELS) $(TEST_BIN) $(TEST_SH)

demo: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
	@scripts/demo.sh $(BUILD) $(MODELS)

bench: deps-dev
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(BENCH_BIN) $(TOOL_BIN)
	@scripts/build-llamacpp.sh >/dev/null || echo "bench: llama.cpp baseline could not be built"
	@scripts/run-bench.sh $(BUILD) $(MODELS) $(BENCH_BIN)

# `make bench-pg [BENCH_PG_N=1000000]` = the shared store alone: pgvector HNSW vs FAISS
# HNSW on the same 100k (or 1M) vectors, then search throughput with 1/2/4 servers on one
# PostgreSQL collection (bench/bench_pgvector.c; a throwaway server, torn down after)
.PHONY: bench-pg
bench-pg: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/mmrag $(BUILD)/bench/bench_pgvector $(BUILD)/tests/tool_gencorpus
	@scripts/run-bench.sh $(BUILD) $(MODELS) $(BUILD)/bench/bench_pgvector

# `make bench-index [BENCH_BASE=rev] [ROUNDS=2]` = mmrag index with embeddings of R-intro +
# R-admin, this tree vs BENCH_BASE built in a worktree, alternating (scripts/bench-index.sh).
# The default base is the last commit before issue 14's work.
BENCH_BASE ?= ebddd14
ROUNDS ?= 2
.PHONY: bench-index
bench-index: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/mmrag
	@dir=$$(scripts/fetch-debian-docs.sh) || { echo "bench-index: Debian PDFs unavailable"; exit 1; }; \
	  base=$${XDG_CACHE_HOME:-$$HOME/.cache}/mmrag/bench-base-$(BENCH_BASE); \
	  if [ ! -x "$$base/build/mmrag" ]; then rm -rf "$$base"; git worktree add --detach "$$base" $(BENCH_BASE) >/dev/null && \
	    $(MAKE) --no-print-directory -C "$$base" build/mmrag >/dev/null || { echo "bench-index: cannot build $(BENCH_BASE)"; exit 1; }; fi; \
	  scripts/bench-index.sh "$$base/build/mmrag" $(BUILD)/mmrag $(MODELS) $(ROUNDS) "$$dir/R-intro.pdf" "$$dir/R-admin.pdf"

# `make bench-textenc [TEXTS=300]` = the text encoder (fp32, int8) against PyTorch and ONNX Runtime
# on the first TEXTS real chunks of R-admin + R-intro, 1 and 2 threads (scripts/bench-textenc.sh)
TEXTS ?= 300
.PHONY: bench-textenc
bench-textenc: deps-dev
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/mmrag $(BUILD)/bench/bench_textenc
	@dir=$$(scripts/fetch-debian-docs.sh) || { echo "bench-textenc: Debian PDFs unavailable"; exit 1; }; \
	  scripts/bench-textenc.sh $(BUILD) $(MODELS) "$$dir" $(TEXTS)

# `make bench-locate` = `mmrag locate` latency on the Debian manuals joined into one
# ~1,200-page PDF, with and without --page (issue 13's targets; scripts/bench-locate.sh)
.PHONY: bench-locate
bench-locate: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/mmrag
	@dir=$$(scripts/fetch-debian-docs.sh) || { echo "bench-locate: Debian PDFs unavailable"; exit 1; }; \
	  scripts/bench-locate.sh $(BUILD)/mmrag $(MODELS) "$$dir" $(ROUNDS)

# `make eval` = retrieval quality (recall, MRR, nDCG, ablation) on the generated corpus and
# on real Debian documentation PDFs, then answer quality on those PDFs (`mmrag eval answers`:
# key in answer, cited page, grounded sentences, abstention; scripts/eval-retrieval.sh)
eval: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(TOOL_BIN)
	@MMRAG_EVAL_LLMS="$${MMRAG_EVAL_LLMS-$$(ls $(MODELS)/gemma3/*.gguf 2>/dev/null; \
	  scripts/quantize-smollm2.sh $(BUILD) $(MODELS) Q4_K_M Q8_0 2>/dev/null)}" \
	  scripts/eval-retrieval.sh $(BUILD) $(MODELS)

# `make crash-trials [TRIALS=N]` = kill -9 `mmrag index` at random moments N times (default
# 100), checking after each that the collection is whole (scripts/crash-trials.sh); not in
# `make test`
TRIALS ?= 100
.PHONY: crash-trials
crash-trials: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(BUILD)/tests/tool_gencorpus
	@scripts/crash-trials.sh $(BUILD) $(TRIALS) $(MODELS)

# `make soak [SOAK_S=600] [SOAK_CLIENTS=64]` = loopback soak of `mmrag serve` mixing search,
# ask, uploads, deletes, listings and page renders: 0 5xx, RSS growth <= 5% after warm-up,
# open descriptors flat; p50/p99 per route (scripts/soak.py; a bench, not `make test`)
SOAK_S ?= 600
SOAK_CLIENTS ?= 64
# seconds a soak client waits between requests (a user reading); 0 = as fast as it can,
# which on 2 cores is an overload test: the server sheds with 503 + Retry-After
SOAK_THINK ?= 10
.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(BUILD)/tests/tool_gencorpus
	@/usr/bin/python3 scripts/soak.py $(BUILD) $(MODELS) --clients $(SOAK_CLIENTS) --seconds $(SOAK_S) --think $(SOAK_THINK)

# the same for `mmrag serve` during uploads and deletes, plus the durable queue: every
# acknowledged upload is indexed after the restart (scripts/crash-trials-server.sh)
.PHONY: crash-trials-server
crash-trials-server: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory all $(BUILD)/tests/tool_gencorpus
	@scripts/crash-trials-server.sh $(BUILD) $(TRIALS) $(MODELS)

# `make fuzz [FUZZ_S=seconds per target] [FUZZ_TARGETS="pdf gguf ..."]` = libFuzzer
# campaigns (clang, ASan+UBSan, build-fuzz/): new crashers land in build-fuzz/crashes/T/ to
# be minimized into tests/fuzz/regressions/T/ (scripts/fuzz.sh); not in `make test`
FUZZ_S ?= 60
.PHONY: fuzz
fuzz: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/tests/tool_gencorpus $(GOLDEN)
	@scripts/fuzz.sh $(BUILD) $(MODELS) $(FUZZ_S) $(FUZZ_TARGETS)

# `make check-api` = Schemathesis (PyPI, in a cached venv) against /openapi.json: no 5xx
check-api: deps
	@$(MAKE) --no-print-directory models
	@$(MAKE) --no-print-directory $(BUILD)/mmrag $(BUILD)/tests/tool_gencorpus
	@scripts/check-api.sh $(BUILD) $(MODELS)

clean:
	rm -rf build build-san build-cuda build-san-cuda

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
