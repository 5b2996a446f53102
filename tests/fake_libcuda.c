/*
 * A stand-in for the CUDA driver, built as libcuda.so.1 for
 * test_devmem's "driver loaded" case: it has cuPointerGetAttribute only
 * (every pointer unknown to it), so the CUDA runtime cannot start on it.
 * Loading it must flip tnt__cuda_in_process from 0 to 1 (the loader's
 * count moved), and host buffers must still be taken as host memory.
 */
__attribute__((visibility("default"))) int cuPointerGetAttribute(
    void *data, int attribute, unsigned long long ptr)
{
    (void)data, (void)attribute, (void)ptr;
    return 1; /* CUDA_ERROR_INVALID_VALUE: not CUDA memory */
}
