/* Tack's CUDA declarations (src/driver/cuda.h) agree with the CUDA
 * toolkit's cuda.h: the same sizes, offsets and enum values, and (checked
 * at compile time in test_cuda_abi_sdk.c) the same entry-point signatures.
 * Built only where a toolkit is installed; the build itself never needs
 * one. */
#include <stdio.h>
#include <string.h>

#include "../../src/driver/cuda.h"
#include "check.h"
#include "test_cuda_abi_facts.h"

extern const struct cuda_abi_fact cuda_abi_sdk[];

static const struct cuda_abi_fact cuda_abi_ours[] = {
    CUDA_ABI_FACTS(CUDA_ABI_SIZE, CUDA_ABI_OFFSET, CUDA_ABI_VALUE){NULL, 0},
};

static void test_facts_agree(void)
{
    int n = 0;
    for (; cuda_abi_ours[n].name; n++) {
        const struct cuda_abi_fact *a = &cuda_abi_ours[n], *b = &cuda_abi_sdk[n];
        CHECK(b->name && !strcmp(a->name, b->name));
        if (a->value != b->value) {
            fprintf(stderr, "%s: Tack has %lld, cuda.h has %lld\n", a->name, a->value, b->value);
            CHECK(a->value == b->value);
        }
    }
    CHECK(cuda_abi_sdk[n].name == NULL);
    /* The list is not empty: a test over nothing passes for the wrong reason. */
    CHECK(n > 60);
}

int main(void)
{
    RUN(test_facts_agree);
    CHECK_DONE();
}
