/* The toolkit's half of test_cuda_abi.c: compiled against the CUDA
 * toolkit's cuda.h, with Tack's entry-point list read through the toolkit's
 * own types. */
#include <cuda.h>

#define TACK_CUDA_SDK_TYPES
#include "../../src/driver/cuda.h"
#include "test_cuda_abi_facts.h"

const struct cuda_abi_fact cuda_abi_sdk[] = {
    CUDA_ABI_FACTS(CUDA_ABI_SIZE, CUDA_ABI_OFFSET, CUDA_ABI_VALUE){NULL, 0},
};

/* Each entry point's parameter list, as Tack declares it, must be the one
 * cuda.h declares for the symbol Tack resolves. A mismatch fails the build
 * of this test, naming the symbol. */
#define CHECK_SIGNATURE(ret, field, symbol, required, params)                                                  \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), ret(*) params),                           \
                   #symbol " is declared differently in cuda.h");
TACK_CUDA_SYMBOLS(CHECK_SIGNATURE)
