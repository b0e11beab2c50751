/* A stand-in for libcuda.so.1 on machines without a GPU: the few driver entry points the
   hot calls of tenferro_cuda._driver_fast reach, each printing its arguments to stderr,
   and cuGetProcAddress resolving names to them (cuda.bindings looks every entry point up
   through it). A launch with gridDimX == 0xDEAD fails with CUDA_ERROR_INVALID_VALUE (1);
   a pointer query of address 0xBAD with CUDA_ERROR_INVALID_VALUE as well; a stream query
   of stream 0xB05 answers CUDA_ERROR_NOT_READY (600), of stream 0xBAD
   CUDA_ERROR_INVALID_HANDLE (400). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef int CUresult;

CUresult cuInit(unsigned flags) { return 0; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return 0; }

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream,
                        void **params, void **extra) {
    fprintf(stderr, "launch %p %u %u %u %u %u %u %u %p %p %p\n", f, gx, gy, gz, bx, by, bz,
            shared, stream, (void *)params, (void *)extra);
    return gx == 0xDEAD ? 1 : 0;
}

CUresult cuCtxGetCurrent(void **ctx) { *ctx = (void *)0x5000; return 0; }

CUresult cuEventRecord(void *event, void *stream) {
    fprintf(stderr, "record %p %p\n", event, stream);
    return 0;
}

CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
    fprintf(stderr, "wait %p %p %u\n", stream, event, flags);
    return 0;
}

CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long address) {
    fprintf(stderr, "pointer %d %llx\n", attribute, address);
    if (address == 0xBAD) return 1;
    *(int *)data = 3;
    return 0;
}

CUresult cuStreamQuery(void *stream) {
    fprintf(stderr, "query %p\n", stream);
    if (stream == (void *)0xB05) return 600;
    if (stream == (void *)0xBAD) return 400;
    return 0;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                             int *status) {
    void *f = dlsym(RTLD_DEFAULT, symbol);
    *pfn = f;
    if (status) *status = f ? 0 : 1;
    return f ? 0 : 500;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
