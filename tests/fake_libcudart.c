/*
 * A stand-in for the CUDA runtime (libcudart.so.13) on top of the
 * stand-in driver (fake_libcuda.c), for test_devmem_ipc: the library's
 * own CUDA copy engine (core/devmem.c) and pointer check run on it
 * unchanged. Memory from cudaMalloc is the driver's shared "device"
 * memory; copies and streams run at once; pinned memory is malloc's.
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

int cuPointerGetAttribute(void *data, int attribute, unsigned long long p);
int cuMemAlloc_v2(unsigned long long *p, size_t n);
int cuMemFree_v2(unsigned long long p);
int fake_cuda_device(int set);

API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a,
                                         const void *p)
{
    unsigned type = 0;
    int dev = 0;
    memset(a, 0, sizeof *a);
    if (cuPointerGetAttribute(&type, 2, (unsigned long long)(size_t)p) ==
            0 &&
        cuPointerGetAttribute(&dev, 9, (unsigned long long)(size_t)p) == 0) {
        a->type = cudaMemoryTypeDevice;
        a->device = dev;
        a->devicePointer = (void *)p;
    } else {
        a->type = cudaMemoryTypeUnregistered;
        a->hostPointer = (void *)p;
    }
    return cudaSuccess;
}

API cudaError_t cudaGetDevice(int *dev)
{
    *dev = fake_cuda_device(-1);
    return cudaSuccess;
}

API cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev > 1)
        return cudaErrorInvalidDevice;
    fake_cuda_device(dev);
    return cudaSuccess;
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = malloc(1);
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}

API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = malloc(1);
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e, (void)s;
    return cudaSuccess;
}

API cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind, (void)s;
    if (n)
        memmove(dst, src, n);
    return cudaSuccess;
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                           enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, n, kind, NULL);
}

API cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

API cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

API const char *cudaGetErrorString(cudaError_t err)
{
    return err == cudaSuccess ? "no error" : "stand-in runtime error";
}

API cudaError_t cudaGetLastError(void) { return cudaSuccess; }

API cudaError_t cudaMalloc(void **p, size_t n)
{
    unsigned long long d = 0;
    if (cuMemAlloc_v2(&d, n) != 0)
        return cudaErrorMemoryAllocation;
    *p = (void *)(size_t)d;
    return cudaSuccess;
}

API cudaError_t cudaFree(void *p)
{
    return cuMemFree_v2((unsigned long long)(size_t)p) == 0
               ? cudaSuccess : cudaErrorInvalidValue;
}
