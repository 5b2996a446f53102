/*
 * tnt-info: the version and what this build has. Which optional parts
 * were compiled in comes from the same meson tests that decided the
 * library's (tools/meson.build passes the same TNT_HAVE_* defines), the
 * SIMD levels from the reduction kernels' own detection.
 */
#include <sodium.h>

#include "collectives/reduce.h"
#include "tnt-info.h"
#include "tnt/plugin.h"
#include "tnt/tnt.h"
#include "tnt/transport.h"
#include "tnt/version.h"

#ifndef TNT_INFO_SOVERSION
#error "tools/meson.build defines TNT_INFO_SOVERSION (the library's)"
#endif

#ifdef TNT_HAVE_VERBS
#define HAVE_VERBS 1
#else
#define HAVE_VERBS 0
#endif
#ifdef TNT_HAVE_PMIX
#define HAVE_PMIX 1
#else
#define HAVE_PMIX 0
#endif

void info_build(info_out_t *o)
{
    int major, minor, patch;
    char v[64];
    tnt_get_version(&major, &minor, &patch);
    snprintf(v, sizeof(v), "%d.%d.%d", major, minor, patch);
    info_str(o, "version", v);
    info_obj(o, "abi");
    info_str(o, "soname", "libtntcomm.so." TNT_INFO_SOVERSION);
    info_int(o, "transport_interface", TNT_TRANSPORT_VERSION);
    info_int(o, "transport_interface_min", TNT_TRANSPORT_VERSION_MIN);
    info_int(o, "tensor_desc", TNT_TENSOR_DESC_VERSION);
    info_close(o);

    info_obj(o, "build");
    info_obj(o, "transports");
    info_bool(o, "tcp", 1);
    info_bool(o, "shm", 1);
    info_bool(o, "verbs", HAVE_VERBS);
    info_bool(o, "plugins", 1); /* TNT_TRANSPORT_PLUGIN, dlopen */
    info_close(o);
    info_obj(o, "launchers");
    info_bool(o, "tnt-run", 1);
    info_bool(o, "pmix", HAVE_PMIX);
    /* Open MPI's, Slurm's and torchrun's variables: always read
     * (boot/launch_env.c); without PMIx, srun --mpi=none only. */
    info_bool(o, "ompi", 1);
    info_bool(o, "slurm", 1);
    info_bool(o, "torchrun", 1);
    info_close(o);
    info_str(o, "libsodium", sodium_version_string());
    info_close(o);

    info_obj(o, "simd");
    info_arr(o, "levels");
    for (int l = 0; l < TNT__SIMD_COUNT; l++) {
        info_row(o);
        info_str(o, "name", tnt__simd_name(l));
        info_bool(o, "supported", tnt__simd_supported(l));
        info_close(o);
    }
    info_close(o);
    /* The level the kernels use in this process: TNT_SIMD or the best
     * this CPU has (collectives/reduce.c). */
    info_str(o, "chosen", tnt__simd_name(tnt__simd_active()));
    info_close(o);
}
