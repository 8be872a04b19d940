/* What several backends' dialects share (prelude.h). */
#include "prelude.h"

#define NO_COMPLEX "CUDA and HIP kernels compile as C++, which has no C99 complex type; complex parameters work " \
                   "on the cpu backend"
const char *const tack_cxx_lacks[TACK_NDTYPES] = {
    [TACK_C64] = NO_COMPLEX,
    [TACK_C128] = NO_COMPLEX,
};
#undef NO_COMPLEX
