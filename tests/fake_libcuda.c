/*
 * A stand-in for the CUDA driver (libcuda.so.1) on a machine without a
 * GPU, for the tests of device buffers (test_devmem, test_devmem_ipc).
 *
 * "Device memory" is shared memory (a memfd per cuMemAlloc, mapped
 * here); an IPC handle names the owner's process and the memfd, and
 * cuIpcOpenMemHandle in another process maps the same memory through
 * /proc/PID/fd/N, so forked ranks read and write each other's "device"
 * buffers as CUDA IPC lets them. cuModuleLoadData takes the library's
 * PTX (its .entry names are checked) and cuLaunchKernel runs the
 * kernel's own element code (lib/core/devmem_kernel.h) on the CPU,
 * after checking that every pointer it got is device memory of this
 * process (its own or an opened handle) over the whole chunk. Streams
 * run everything at once.
 *
 * Host pointers are unknown to it (cuPointerGetAttribute fails, as the
 * real driver does for unregistered memory): test_devmem's "driver
 * loaded later" case loads it alone. fake_libcudart.c is the runtime on
 * top of it.
 *
 * Faults to order, read at each call from the environment:
 *   FAKE_CUDA_IPC_GET_FAIL=1   cuIpcGetMemHandle refuses
 *   FAKE_CUDA_IPC_OPEN_FAIL=1  cuIpcOpenMemHandle refuses
 *   FAKE_CUDA_NO_P2P=1         no peer access between devices
 *   FAKE_CUDA_LAUNCH_FAIL=1    cuLaunchKernel fails
 * Counters for the tests: fake_cuda_counts().
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/devmem_kernel.h"

#define API __attribute__((visibility("default")))
typedef unsigned long long dptr_t;

enum { OK = 0, E_INVALID_VALUE = 1, E_INVALID_CONTEXT = 201,
       E_INVALID_PTX = 218, E_NOT_FOUND = 500, E_ILLEGAL_ADDRESS = 700,
       E_LAUNCH_FAILED = 719 };

#define NDEV 2
#define MAXMEM 512

typedef struct mem {
    dptr_t base;
    size_t size;
    int fd;          /* own allocation's memfd; -1 for an opened handle */
    int dev;
    uint64_t id;
} mem_t;

typedef struct handle {
    char magic[8];
    int32_t pid, fd;
    uint64_t size, id;
} handle_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_t g_mem[MAXMEM];
static int g_nmem;
static uint64_t g_next_id = 1;
static __thread int t_dev;           /* the current device */
static __thread int t_stack[16], t_depth;
static int g_ctx[NDEV];              /* primary contexts: &g_ctx[d] */
static unsigned long g_opens, g_closes, g_launches;

static int fault(const char *name)
{
    const char *v = getenv(name);
    return v && *v == '1';
}

API void fake_cuda_counts(unsigned long *opens, unsigned long *closes,
                          unsigned long *launches)
{
    pthread_mutex_lock(&g_lock);
    *opens = g_opens, *closes = g_closes, *launches = g_launches;
    pthread_mutex_unlock(&g_lock);
}

/* The runtime's device (fake_libcudart.c): set >= 0 sets it. */
API int fake_cuda_device(int set)
{
    if (set >= 0)
        t_dev = set;
    return t_dev;
}

/* The entry holding [p, p + n); NULL if none (lock held). */
static mem_t *find(dptr_t p, size_t n)
{
    for (int i = 0; i < g_nmem; i++)
        if (p >= g_mem[i].base && p - g_mem[i].base < g_mem[i].size &&
            n <= g_mem[i].size - (p - g_mem[i].base))
            return &g_mem[i];
    return NULL;
}

static void drop(mem_t *m)
{
    *m = g_mem[--g_nmem];
}

API int cuInit(unsigned flags) { return flags ? E_INVALID_VALUE : OK; }

API int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= NDEV)
        return E_INVALID_VALUE;
    *dev = ordinal;
    return OK;
}

API int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    *v = attr == 16 ? 4 : 0; /* 4 multiprocessors */
    return OK;
}

API int cuDeviceGetPCIBusId(char *id, int len, int dev)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return OK;
}

API int cuDeviceGetByPCIBusId(int *dev, const char *id)
{
    unsigned bus;
    if (sscanf(id, "0000:%x:00.0", &bus) != 1 || bus < 0x10 ||
        bus >= 0x10 + NDEV)
        return E_INVALID_VALUE;
    *dev = (int)bus - 0x10;
    return OK;
}

API int cuDeviceCanAccessPeer(int *can, int dev, int peer)
{
    *can = dev != peer && !fault("FAKE_CUDA_NO_P2P");
    return OK;
}

API int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (dev < 0 || dev >= NDEV)
        return E_INVALID_VALUE;
    *ctx = &g_ctx[dev];
    return OK;
}

API int cuCtxPushCurrent_v2(void *ctx)
{
    int *c = ctx;
    if (c < g_ctx || c >= g_ctx + NDEV || t_depth == 16)
        return E_INVALID_CONTEXT;
    t_stack[t_depth++] = t_dev;
    t_dev = (int)(c - g_ctx);
    return OK;
}

API int cuCtxPopCurrent_v2(void **ctx)
{
    if (t_depth == 0)
        return E_INVALID_CONTEXT;
    if (ctx)
        *ctx = &g_ctx[t_dev];
    t_dev = t_stack[--t_depth];
    return OK;
}

API int cuMemAlloc_v2(dptr_t *p, size_t n)
{
    int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
    if (fd < 0)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    if (n == 0 || ftruncate(fd, (off_t)n) != 0) {
        close(fd);
        return n ? 2 : E_INVALID_VALUE;
    }
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return 2;
    }
    pthread_mutex_lock(&g_lock);
    if (g_nmem == MAXMEM) {
        pthread_mutex_unlock(&g_lock);
        munmap(m, n);
        close(fd);
        return 2;
    }
    g_mem[g_nmem++] = (mem_t){(dptr_t)(uintptr_t)m, n, fd, t_dev,
                              g_next_id++};
    pthread_mutex_unlock(&g_lock);
    *p = (dptr_t)(uintptr_t)m;
    return OK;
}

API int cuMemFree_v2(dptr_t p)
{
    pthread_mutex_lock(&g_lock);
    mem_t *m = find(p, 1);
    if (!m || m->base != p || m->fd < 0) {
        pthread_mutex_unlock(&g_lock);
        return E_INVALID_VALUE;
    }
    munmap((void *)(uintptr_t)m->base, m->size);
    close(m->fd);
    drop(m);
    pthread_mutex_unlock(&g_lock);
    return OK;
}

API int cuPointerGetAttribute(void *data, int attribute, dptr_t ptr)
{
    pthread_mutex_lock(&g_lock);
    mem_t *m = find(ptr, 1);
    int dev = m ? m->dev : 0;
    pthread_mutex_unlock(&g_lock);
    if (!m)
        return E_INVALID_VALUE; /* not CUDA memory */
    if (attribute == 2) /* MEMORY_TYPE: device */
        *(unsigned *)data = 2;
    else if (attribute == 9) /* DEVICE_ORDINAL */
        *(int *)data = dev;
    else
        return E_INVALID_VALUE;
    return OK;
}

API int cuMemGetAddressRange_v2(dptr_t *base, size_t *size, dptr_t p)
{
    pthread_mutex_lock(&g_lock);
    mem_t *m = find(p, 1);
    if (m)
        *base = m->base, *size = m->size;
    pthread_mutex_unlock(&g_lock);
    return m ? OK : E_INVALID_VALUE;
}

API int cuIpcGetMemHandle(void *out, dptr_t p)
{
    if (fault("FAKE_CUDA_IPC_GET_FAIL"))
        return E_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    mem_t *m = find(p, 1);
    int ok = m && m->base == p && m->fd >= 0;
    handle_t h = {"FAKECUD", (int32_t)getpid(), ok ? m->fd : -1,
                  ok ? m->size : 0, ok ? m->id : 0};
    pthread_mutex_unlock(&g_lock);
    if (!ok)
        return E_INVALID_VALUE;
    memset(out, 0, 64);
    memcpy(out, &h, sizeof h);
    return OK;
}

typedef struct { char reserved[64]; } ipc_handle_t;

API int cuIpcOpenMemHandle_v2(dptr_t *p, ipc_handle_t hv, unsigned flags)
{
    handle_t h;
    memcpy(&h, hv.reserved, sizeof h);
    if (flags != 1 || memcmp(h.magic, "FAKECUD", 8) != 0)
        return E_INVALID_VALUE; /* the driver wants LAZY_ENABLE_PEER_ACCESS */
    if (h.pid == getpid())
        return E_INVALID_CONTEXT; /* one's own handle cannot be opened */
    if (fault("FAKE_CUDA_IPC_OPEN_FAIL"))
        return E_INVALID_VALUE;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return E_INVALID_VALUE;
    void *m = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    if (g_nmem == MAXMEM) {
        pthread_mutex_unlock(&g_lock);
        munmap(m, h.size);
        return E_INVALID_VALUE;
    }
    g_mem[g_nmem++] = (mem_t){(dptr_t)(uintptr_t)m, h.size, -1, t_dev, h.id};
    g_opens++;
    pthread_mutex_unlock(&g_lock);
    *p = (dptr_t)(uintptr_t)m;
    return OK;
}

API int cuIpcCloseMemHandle(dptr_t p)
{
    pthread_mutex_lock(&g_lock);
    mem_t *m = find(p, 1);
    if (!m || m->base != p || m->fd >= 0) {
        pthread_mutex_unlock(&g_lock);
        return E_INVALID_VALUE;
    }
    munmap((void *)(uintptr_t)m->base, m->size);
    drop(m);
    g_closes++;
    pthread_mutex_unlock(&g_lock);
    return OK;
}

/* ---- the module and the kernel ------------------------------------------ */

typedef void (*elem_fn)(const tnt_gk_args_t *, unsigned long long);
typedef struct fn {
    const char *name;
    elem_fn elem;
    size_t es;
} fn_t;
static const fn_t k_fns[] = {
    {TNT_GK_F32, tnt_gk_f32, 4}, {TNT_GK_F64, tnt_gk_f64, 8},
    {TNT_GK_F16, tnt_gk_f16, 2}, {TNT_GK_BF16, tnt_gk_bf16, 2}};

API int cuModuleLoadData(void **mod, const void *image)
{
    const char *s = image;
    if (!s || !strstr(s, ".version") || !strstr(s, ".entry"))
        return E_INVALID_PTX;
    *mod = (void *)(uintptr_t)s;
    return OK;
}

API int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    char entry[96];
    snprintf(entry, sizeof entry, ".entry %s(", name);
    if (!strstr((const char *)mod, entry))
        return E_NOT_FOUND; /* the PTX lacks it */
    for (size_t i = 0; i < sizeof k_fns / sizeof k_fns[0]; i++) {
        if (strcmp(k_fns[i].name, name) == 0) {
            *fn = (void *)(uintptr_t)&k_fns[i];
            return OK;
        }
    }
    return E_NOT_FOUND;
}

API int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                       void *stream, void **params, void **extra)
{
    (void)shmem, (void)stream;
    const fn_t *fn = f;
    if (fault("FAKE_CUDA_LAUNCH_FAIL"))
        return E_LAUNCH_FAILED;
    if (!fn || gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx > 1024 ||
        by != 1 || bz != 1 || !params || extra)
        return E_INVALID_VALUE;
    tnt_gk_args_t a;
    memcpy(&a, params[0], sizeof a);
    if (a.nin < 1 || a.nin > TNT_GPU_IPC_MAX || a.nout < 0 ||
        a.nout > TNT_GPU_IPC_MAX)
        return E_INVALID_VALUE;
    size_t bytes = (size_t)a.n * fn->es;
    pthread_mutex_lock(&g_lock);
    int bad = 0;
    for (int q = 0; q < a.nin; q++)
        bad |= !find((dptr_t)(uintptr_t)a.in[q], bytes ? bytes : 1);
    for (int q = 0; q < a.nout; q++)
        bad |= !find((dptr_t)(uintptr_t)a.out[q], bytes ? bytes : 1);
    g_launches++;
    pthread_mutex_unlock(&g_lock);
    if (bad)
        return E_ILLEGAL_ADDRESS; /* a host pointer, or past the end */
    /* The kernel's grid-stride loop, thread by thread. */
    unsigned long long step = (unsigned long long)gx * bx;
    for (unsigned long long t = 0; t < step; t++)
        for (unsigned long long i = t; i < a.n; i += step)
            fn->elem(&a, i);
    return OK;
}

API int cuStreamCreate(void **stream, unsigned flags)
{
    (void)flags;
    *stream = malloc(1);
    return *stream ? OK : 2;
}

API int cuStreamSynchronize(void *stream)
{
    (void)stream; /* everything ran when queued */
    return OK;
}

API int cuGetErrorName(int err, const char **s)
{
    switch (err) {
    case OK: *s = "CUDA_SUCCESS"; break;
    case E_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case E_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case E_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
    case E_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case E_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case E_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *s = "CUDA_ERROR_UNKNOWN";
    }
    return OK;
}

API int cuGetErrorString(int err, const char **s)
{
    (void)err;
    *s = "(the test's stand-in driver)";
    return OK;
}
