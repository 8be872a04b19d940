/* Our NVRTC declarations (src/driver/nvrtc.h) against NVIDIA's nvrtc.h,
 * where one is installed (the nvidia-cuda-nvrtc package ships it): every
 * entry point Tack resolves must have the parameter list nvrtc.h gives the
 * symbol, and the result codes Tack names their values there. A mismatch
 * fails the build of this test, naming the symbol. */
#include <nvrtc.h>
#include <stdio.h>

#define TACK_NVRTC_SDK_TYPES
#include "../../src/driver/nvrtc.h"

#define CHECK_SIGNATURE(ret, field, symbol, required, params)                                                  \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), ret(*) params),                           \
                   #symbol " is declared differently in nvrtc.h");
TACK_NVRTC_SYMBOLS(CHECK_SIGNATURE)

/* The values Tack's own declarations give the codes it names. */
_Static_assert(NVRTC_SUCCESS == 0 && NVRTC_ERROR_OUT_OF_MEMORY == 1 && NVRTC_ERROR_PROGRAM_CREATION_FAILURE == 2 &&
                   NVRTC_ERROR_INVALID_INPUT == 3 && NVRTC_ERROR_INVALID_PROGRAM == 4 &&
                   NVRTC_ERROR_INVALID_OPTION == 5 && NVRTC_ERROR_COMPILATION == 6,
               "an NVRTC result code differs from nvrtc.h");
_Static_assert(sizeof(nvrtcResult) == sizeof(int), "nvrtcResult is not int-sized");

int main(void)
{
    int n = 0;
#define COUNT(ret, field, symbol, required, params) n++;
    TACK_NVRTC_SYMBOLS(COUNT)
    printf("%d NVRTC entry points agree with nvrtc.h\n", n);
    return 0;
}
