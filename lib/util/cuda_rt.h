/*
 * The CUDA runtime, opened at run time (dlopen) so that one build of the
 * library serves hosts with and without GPUs. Built only with the meson
 * option cuda (TNT_HAVE_CUDA: the runtime's headers were found; nothing
 * is linked). Device memory in a process needs the driver (libcuda.so.1)
 * loaded in it; tnt__cuda_in_process answers that for the cost of one
 * look at the loader's counter of loaded objects, re-probing only when
 * that counter moved (a framework may load CUDA after the first
 * collective), so host-only processes pay nothing measurable.
 */
#ifndef TNT_UTIL_CUDA_RT_H
#define TNT_UTIL_CUDA_RT_H

#include <stddef.h>

#include "tnt/tnt.h"

/** The entry points of libcudart the library uses; int is cudaError_t,
 *  void * stands for cudaStream_t and cudaEvent_t. */
typedef struct tnt_cuda_rt {
    int (*pointer_get_attributes)(void *attr, const void *ptr);
    int (*get_device)(int *dev);
    int (*set_device)(int dev);
    int (*stream_create_with_flags)(void **stream, unsigned flags);
    int (*stream_destroy)(void *stream);
    int (*stream_synchronize)(void *stream);
    int (*event_create_with_flags)(void **event, unsigned flags);
    int (*event_record)(void *event, void *stream);
    int (*event_synchronize)(void *event);
    int (*event_destroy)(void *event);
    int (*memcpy_async)(void *dst, const void *src, size_t n, int kind,
                        void *stream);
    int (*host_alloc)(void **p, size_t n, unsigned flags);
    int (*free_host)(void *p);
    const char *(*get_error_string)(int err);
    int (*get_last_error)(void);
    /* For the tests and the GPU benchmark: device memory and a copy that
     * waits. */
    int (*malloc_device)(void **p, size_t n);
    int (*free_device)(void *p);
    int (*memcpy_sync)(void *dst, const void *src, size_t n, int kind);
} tnt_cuda_rt_t;

/** 1 if the CUDA driver is loaded in this process (device pointers can
 *  exist), else 0; 0 always in a build without CUDA. Thread-safe. */
int tnt__cuda_in_process(void);

/** 1 + its device index if ptr is CUDA device memory, 0 if host memory
 *  (unregistered, pinned or managed: the CPU reads those), a negative
 *  TNT_ERR_* with tnt_last_error set when the driver is loaded but
 *  cannot say. */
int tnt__cuda_is_device(const void *ptr);

/** The runtime's table (opened once), or NULL with TNT_ERR_UNSUPPORTED
 *  set as the last error saying why (no CUDA in this build, libcudart not
 *  found). */
const tnt_cuda_rt_t *tnt__cuda_rt(void);

/** "cudaErrorX: text" of a runtime error code, for messages. */
const char *tnt__cuda_strerror(int err);

#endif /* TNT_UTIL_CUDA_RT_H */
