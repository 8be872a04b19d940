/*
 * The Level Zero backend's part of tack_report: the loader, the first
 * driver's devices, and libocloc. See src/backend/level_zero/level_zero.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "level_zero.h"

/* The first driver's devices, which level_zero:<n> names; a note on why
 * there are none. */
static void ze_describe_devices(const struct tack_ze_api *ze, tack_backend_report *out)
{
    tack_ze_result r = ze->zeInit(TACK_ZE_INIT_FLAG_GPU_ONLY);
    uint32_t count = 1;
    tack_ze_driver driver = NULL;
    if (r == TACK_ZE_SUCCESS)
        r = ze->zeDriverGet(&count, &driver);
    if (r != TACK_ZE_SUCCESS || count == 0 || !driver) {
        snprintf(out->driver.note, sizeof out->driver.note, "no GPU driver behind the loader (%s)",
                 r != TACK_ZE_SUCCESS ? tack_ze_result_name(r) : "zeDriverGet found none");
        return;
    }
    tack_ze_driver_properties props;
    memset(&props, 0, sizeof props);
    props.stype = TACK_ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    if (ze->zeDriverGetProperties(driver, &props) == TACK_ZE_SUCCESS)
        snprintf(out->driver.version, sizeof out->driver.version, "driverVersion %" PRIu32, props.driverVersion);
    count = 0;
    if (ze->zeDeviceGet(driver, &count, NULL) != TACK_ZE_SUCCESS || count > 4096)
        return;
    tack_ze_device *all = calloc(count ? count : 1, sizeof *all);
    if (!all || ze->zeDeviceGet(driver, &count, all) != TACK_ZE_SUCCESS) {
        free(all);
        return;
    }
    out->device_count = (int)count;
    for (uint32_t i = 0; i < count && i < TACK_REPORT_DEVICES; i++) {
        tack_ze_device_properties dp;
        memset(&dp, 0, sizeof dp);
        dp.stype = TACK_ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        if (ze->zeDeviceGetProperties(all[i], &dp) == TACK_ZE_SUCCESS) {
            dp.name[sizeof dp.name - 1] = 0;
            snprintf(out->devices[i], sizeof out->devices[i], "%.96s, device id 0x%04" PRIx32, dp.name,
                     dp.deviceId);
        } else {
            snprintf(out->devices[i], sizeof out->devices[i], "(no properties)");
        }
    }
    free(all);
}

void ze_describe(tack_backend_report *out)
{
    const struct tack_ze_api *ze;
    tack_status st = tack_ze_load(&ze);
    tack_report_component(&out->driver, "driver", st, st == TACK_OK ? tack_library_path(&ze->library) : NULL, "");
    if (st == TACK_OK)
        ze_describe_devices(ze, out);
    const struct tack_ocloc_api *ocloc;
    char version[sizeof out->compiler.version] = "";
    st = tack_ocloc_load(&ocloc);
    if (st == TACK_OK)
        ze_loaded_ocloc_version(ocloc, version, sizeof version);
    tack_report_component(&out->compiler, "ocloc", st, st == TACK_OK ? tack_library_path(&ocloc->library) : NULL,
                          version);
}
