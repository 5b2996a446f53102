/*
 * The CUDA runtime opened with dlopen (cuda_rt.h). The headers give the
 * layout of cudaPointerAttributes and the constants; nothing is linked,
 * so a host without CUDA runs the same binary.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "util/cuda_rt.h"
#include "util/dl_table.h"
#include "util/error.h"

#ifdef TNT_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Sonames tried in order: the one a framework (torch's wheel) has loaded
 * already is found by its soname; then the toolkit's. */
static const char *const k_rt_names[] = {
    "libcudart.so.13", "libcudart.so.12", "libcudart.so", NULL};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tnt_cuda_rt_t g_rt;
static int g_rt_ok;
static char g_rt_why[300];

static void open_rt(void)
{
    void *h = NULL;
    const char *name = NULL;
    for (int i = 0; k_rt_names[i] && !h; i++) {
        name = k_rt_names[i];
        h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        snprintf(g_rt_why, sizeof g_rt_why, "the CUDA runtime could not be "
                 "opened (libcudart.so.13, .so.12, .so: %s)", dlerror());
        return;
    }
    const tnt_dl_sym_t syms[] = {
        {(void **)&g_rt.pointer_get_attributes, "cudaPointerGetAttributes"},
        {(void **)&g_rt.get_device, "cudaGetDevice"},
        {(void **)&g_rt.set_device, "cudaSetDevice"},
        {(void **)&g_rt.stream_create_with_flags,
         "cudaStreamCreateWithFlags"},
        {(void **)&g_rt.stream_destroy, "cudaStreamDestroy"},
        {(void **)&g_rt.stream_synchronize, "cudaStreamSynchronize"},
        {(void **)&g_rt.event_create_with_flags, "cudaEventCreateWithFlags"},
        {(void **)&g_rt.event_record, "cudaEventRecord"},
        {(void **)&g_rt.event_synchronize, "cudaEventSynchronize"},
        {(void **)&g_rt.event_destroy, "cudaEventDestroy"},
        {(void **)&g_rt.memcpy_async, "cudaMemcpyAsync"},
        {(void **)&g_rt.host_alloc, "cudaHostAlloc"},
        {(void **)&g_rt.free_host, "cudaFreeHost"},
        {(void **)&g_rt.get_error_string, "cudaGetErrorString"},
        {(void **)&g_rt.get_last_error, "cudaGetLastError"},
        {(void **)&g_rt.malloc_device, "cudaMalloc"},
        {(void **)&g_rt.free_device, "cudaFree"},
        {(void **)&g_rt.memcpy_sync, "cudaMemcpy"},
    };
    /* h stays open on failure too: a loaded runtime is never unloaded */
    if (tnt__dl_resolve(h, name, syms, sizeof syms / sizeof syms[0],
                        g_rt_why, sizeof g_rt_why) != 0)
        return;
    g_rt_ok = 1;
}

const tnt_cuda_rt_t *tnt__cuda_rt(void)
{
    pthread_once(&g_once, open_rt);
    if (!g_rt_ok) {
        tnt__error(TNT_ERR_UNSUPPORTED, "%s", g_rt_why);
        return NULL;
    }
    return &g_rt;
}

const char *tnt__cuda_strerror(int err)
{
    const tnt_cuda_rt_t *rt = g_rt_ok ? &g_rt : NULL;
    return rt ? rt->get_error_string(err) : "CUDA runtime not loaded";
}

/* ---- is the driver in this process? ---------------------------------- */

/* The loader's count of objects loaded so far (glibc's dlpi_adds): read
 * from the first object, then the walk stops. */
static int first_adds(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    *(unsigned long long *)out = info->dlpi_adds;
    return 1;
}

/* The answer and the count it was taken at; 0 = not asked yet (the count
 * is at least 1: the program itself). */
static unsigned long long g_adds_seen;
static int g_driver_loaded;
static void *g_driver; /* libcuda.so.1's handle, once seen */
static pthread_mutex_t g_probe_lock = PTHREAD_MUTEX_INITIALIZER;

int tnt__cuda_in_process(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(first_adds, &adds);
    if (__atomic_load_n(&g_adds_seen, __ATOMIC_ACQUIRE) == adds)
        return __atomic_load_n(&g_driver_loaded, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_probe_lock);
    if (!g_driver) /* RTLD_NOLOAD: only if it is loaded already */
        g_driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    __atomic_store_n(&g_driver_loaded, g_driver != NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&g_adds_seen, adds, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_probe_lock);
    return g_driver != NULL;
}

/* Without the runtime the driver can still tell (cuPointerGetAttribute,
 * CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_MEMORYTYPE_DEVICE = 2); the
 * staging then fails with the runtime's absence as its reason. */
static int driver_is_device(const void *ptr)
{
    int (*get)(void *, int, unsigned long long) =
        (int (*)(void *, int, unsigned long long))dlsym(
            g_driver, "cuPointerGetAttribute");
    if (!get)
        return tnt__error(TNT_ERR_UNSUPPORTED, "libcuda.so.1 is loaded but "
                          "has no cuPointerGetAttribute: cannot tell device "
                          "pointers from host pointers");
    unsigned int type = 0;
    if (get(&type, 2, (unsigned long long)(uintptr_t)ptr) != 0)
        return 0; /* not known to CUDA: host memory */
    int dev = 0; /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9 */
    if (type == 2 && get(&dev, 9, (unsigned long long)(uintptr_t)ptr) != 0)
        dev = 0;
    return type == 2 ? dev + 1 : 0;
}

int tnt__cuda_is_device(const void *ptr)
{
    if (!ptr || !tnt__cuda_in_process())
        return 0;
    pthread_once(&g_once, open_rt);
    if (!g_rt_ok)
        return driver_is_device(ptr);
    struct cudaPointerAttributes a;
    int err = g_rt.pointer_get_attributes(&a, ptr);
    if (err != cudaSuccess) {
        g_rt.get_last_error(); /* the runtime keeps it sticky otherwise */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice ? a.device + 1 : 0;
}

#else /* !TNT_HAVE_CUDA */

int tnt__cuda_in_process(void) { return 0; }

int tnt__cuda_is_device(const void *ptr)
{
    (void)ptr;
    return 0;
}

const tnt_cuda_rt_t *tnt__cuda_rt(void)
{
    tnt__error(TNT_ERR_UNSUPPORTED, "this libtntcomm was built without "
               "CUDA (meson option cuda)");
    return NULL;
}

const char *tnt__cuda_strerror(int err)
{
    (void)err;
    return "CUDA not built in";
}

#endif
