/*
 * The CUDA driver API opened with dlopen (cuda_drv.h). Only a driver
 * loaded already is used (RTLD_NOLOAD): a process reaches this with a
 * device buffer, so the CUDA runtime or the framework loaded the driver
 * before; a process without one never loads it here.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "util/cuda_drv.h"
#include "util/dl_table.h"
#include "util/error.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tnt_cuda_drv_t g_drv;
static int g_ok;
static char g_why[300];

static void open_drv(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) {
        snprintf(g_why, sizeof g_why, "the CUDA driver (libcuda.so.1) is "
                 "not loaded in this process");
        return;
    }
    /* The _v2 names are those cuda.h maps the plain ones to. */
    const tnt_dl_sym_t syms[] = {
        {(void **)&g_drv.init, "cuInit"},
        {(void **)&g_drv.device_get, "cuDeviceGet"},
        {(void **)&g_drv.device_get_attribute, "cuDeviceGetAttribute"},
        {(void **)&g_drv.device_get_pci_bus_id, "cuDeviceGetPCIBusId"},
        {(void **)&g_drv.device_get_by_pci_bus_id,
         "cuDeviceGetByPCIBusId"},
        {(void **)&g_drv.device_can_access_peer, "cuDeviceCanAccessPeer"},
        {(void **)&g_drv.primary_ctx_retain, "cuDevicePrimaryCtxRetain"},
        {(void **)&g_drv.ctx_push, "cuCtxPushCurrent_v2"},
        {(void **)&g_drv.ctx_pop, "cuCtxPopCurrent_v2"},
        {(void **)&g_drv.mem_get_address_range, "cuMemGetAddressRange_v2"},
        {(void **)&g_drv.ipc_get_mem_handle, "cuIpcGetMemHandle"},
        {(void **)&g_drv.ipc_open_mem_handle, "cuIpcOpenMemHandle_v2"},
        {(void **)&g_drv.ipc_close_mem_handle, "cuIpcCloseMemHandle"},
        {(void **)&g_drv.module_load_data, "cuModuleLoadData"},
        {(void **)&g_drv.module_get_function, "cuModuleGetFunction"},
        {(void **)&g_drv.launch_kernel, "cuLaunchKernel"},
        {(void **)&g_drv.stream_create, "cuStreamCreate"},
        {(void **)&g_drv.stream_synchronize, "cuStreamSynchronize"},
        {(void **)&g_drv.get_error_name, "cuGetErrorName"},
        {(void **)&g_drv.get_error_string, "cuGetErrorString"},
    };
    /* h stays open on failure too: a loaded driver is never unloaded */
    if (tnt__dl_resolve(h, "libcuda.so.1", syms, sizeof syms / sizeof syms[0],
                        g_why, sizeof g_why) != 0)
        return;
    int err = g_drv.init(0);
    if (err) {
        const char *s = "?";
        g_drv.get_error_name(err, &s);
        snprintf(g_why, sizeof g_why, "cuInit failed: %s", s);
        return;
    }
    g_ok = 1;
}

const tnt_cuda_drv_t *tnt__cuda_drv(void)
{
    pthread_once(&g_once, open_drv);
    if (!g_ok) {
        tnt__error(TNT_ERR_UNSUPPORTED, "%s", g_why);
        return NULL;
    }
    return &g_drv;
}

const char *tnt__cuda_drv_strerror(int err)
{
    static __thread char buf[160];
    const char *name = NULL, *text = NULL;
    if (!g_ok)
        return "CUDA driver not loaded";
    if (g_drv.get_error_name(err, &name) != 0 || !name)
        name = "CUDA_ERROR_?";
    if (g_drv.get_error_string(err, &text) != 0 || !text)
        text = "unknown error";
    snprintf(buf, sizeof buf, "%s (%d): %s", name, err, text);
    return buf;
}
