/* A minimal NVTX injection library for the test of -p/--profile
 * (gpu/profile_test.go): loaded through NVTX_INJECTION64_PATH, it records
 * every range push and pop of the process, one line each, to the file
 * $EPBENCH_NVTX_LOG.<pid>: "push <depth> <name>" and "pop <depth>". */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

static FILE* out;
static int depth;

static int record_push(const char* name) {
    fprintf(out, "push %d %s\n", depth, name);
    fflush(out);
    return depth++;
}

static int record_pop(void) {
    --depth;
    fprintf(out, "pop %d\n", depth);
    fflush(out);
    return depth;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
    const char* base = getenv("EPBENCH_NVTX_LOG");
    char path[4096];
    if (base == NULL) return 0;
    snprintf(path, sizeof path, "%s.%d", base, (int)getpid());
    out = fopen(path, "w");
    if (out == NULL) return 0;
    const NvtxExportTableCallbacks* cb = (const NvtxExportTableCallbacks*)get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int last = 0; /* the last valid index */
    if (cb == NULL || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &last) || last < NVTX_CBID_CORE_RangePop)
        return 0;
    *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)record_push;
    *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)record_pop;
    return 1;
}
