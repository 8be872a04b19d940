/* Tack from C: arrays, a kernel on the CPU, and DLPack both ways.
 *
 *   1. allocate x = 0, 1, 2, ... and y = 0 on the host;
 *   2. compile saxpy (the system C compiler, cached) and run y = 2x + y;
 *   3. export y as a DLPack tensor, as a consumer library would receive it,
 *      and read it there: the same memory, no copy;
 *   4. take a tensor that another library made (here: a malloc'd buffer
 *      with a deleter) without a copy, run saxpy on it in place, and see its
 *      deleter called once when Tack lets go;
 *   5. hand the exported tensor back to Tack: again the same memory.
 *
 * Build it against an installed Tack (make install-c PREFIX=...):
 *
 *   cc -std=c11 exchange.c $(pkg-config --cflags --libs tack) -o exchange
 *
 * or with CMake (CMakeLists.txt beside this file). It prints what it did
 * and exits 0 when every value is right. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tack/tack.h>

#define N 1000

/* Every Tack call returns a status; on failure tack_last_error() says why. */
#define TRY(call)                                                                                            \
    do {                                                                                                     \
        tack_status st_ = (call);                                                                            \
        if (st_ != TACK_OK) {                                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tack_status_name(st_), tack_last_error()); \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

#define EXPECT(cond)                                                                                         \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                              \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

static const char *saxpy_source =
    "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }\n";

/* Another library's tensor: memory it owns, released by its deleter. */
struct foreign {
    DLManagedTensorVersioned tensor;
    int64_t shape[1];
    int64_t strides[1];
    float *data;
    int *deleted;
};

static void foreign_deleter(DLManagedTensorVersioned *self)
{
    struct foreign *f = (struct foreign *)self->manager_ctx;
    (*f->deleted)++;
    free(f->data);
    free(f);
}

static DLManagedTensorVersioned *foreign_tensor(int *deleted)
{
    struct foreign *f = (struct foreign *)calloc(1, sizeof *f);
    float *data = (float *)malloc(N * sizeof(float));
    EXPECT(f && data);
    for (int i = 0; i < N; i++)
        data[i] = 1.0f;
    f->data = data;
    f->deleted = deleted;
    f->shape[0] = N;
    f->strides[0] = 1;
    DLManagedTensorVersioned *t = &f->tensor;
    t->version.major = DLPACK_MAJOR_VERSION;
    t->version.minor = DLPACK_MINOR_VERSION;
    t->manager_ctx = f;
    t->deleter = foreign_deleter;
    t->flags = 0;
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.device.device_id = 0;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLFloat;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = f->shape;
    t->dl_tensor.strides = f->strides;
    t->dl_tensor.byte_offset = 0;
    return t;
}

int main(void)
{
    printf("Tack %s, DLPack %d.%d\n", TACK_VERSION_STRING, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);

    /* 1. Arrays on the host; every allocation starts zeroed. */
    tack_device *cpu = NULL;
    TRY(tack_device_open("cpu", NULL, 0, &cpu));
    int64_t shape[1] = {N};
    tack_array *x = NULL, *y = NULL;
    TRY(tack_array_empty(cpu, TACK_F32, 1, shape, 0, &x));
    TRY(tack_array_empty(cpu, TACK_F32, 1, shape, 0, &y));
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    TRY(tack_array_copy_from_host(x, host, sizeof host));

    /* 2. y = 2x + y over i in [0, N). */
    tack_kernel *saxpy = NULL;
    TRY(tack_kernel_compile(saxpy_source, NULL, cpu, &saxpy));
    tack_arg args[3] = {tack_arg_f32(2.0f), tack_arg_array(x), tack_arg_array(y)};
    TRY(tack_kernel_launch(saxpy, cpu, N, args, 3));
    printf("saxpy over %d elements on %s\n", N, tack_device_name(cpu));

    /* 3. Export: the consumer reads y's own memory. */
    DLManagedTensorVersioned *out = NULL;
    TRY(tack_array_to_dlpack_versioned(y, &out));
    EXPECT(out->dl_tensor.data == tack_array_data(y));
    EXPECT(out->dl_tensor.dtype.code == kDLFloat && out->dl_tensor.dtype.bits == 32);
    EXPECT(out->dl_tensor.ndim == 1 && out->dl_tensor.shape[0] == N);
    const float *seen = (const float *)out->dl_tensor.data;
    for (int i = 0; i < N; i++)
        EXPECT(seen[i] == 2.0f * (float)i);
    printf("exported y: a DLPack %u.%u tensor over the array's memory, 2x as computed\n", out->version.major,
           out->version.minor);

    /* 4. Import another library's tensor and compute on it in place. */
    int deleted = 0;
    DLManagedTensorVersioned *theirs = foreign_tensor(&deleted);
    float *their_data = (float *)theirs->dl_tensor.data;
    tack_array *z = NULL;
    TRY(tack_array_from_dlpack_versioned(theirs, NULL, NULL, &z, NULL));
    EXPECT(tack_array_data(z) == their_data);
    tack_arg args_z[3] = {tack_arg_f32(1.0f), tack_arg_array(x), tack_arg_array(z)};
    TRY(tack_kernel_launch(saxpy, NULL, N, args_z, 3));
    for (int i = 0; i < N; i++)
        EXPECT(their_data[i] == (float)i + 1.0f);
    EXPECT(deleted == 0);
    tack_array_release(z); /* the last array over it: the producer's deleter runs now */
    EXPECT(deleted == 1);
    printf("imported a foreign tensor without a copy, ran saxpy in place, deleter called once\n");

    /* 5. The exported tensor comes back: Tack adopts it, the same memory. */
    tack_array *back = NULL;
    TRY(tack_array_from_dlpack_versioned(out, NULL, NULL, &back, NULL));
    EXPECT(tack_array_data(back) == tack_array_data(y));
    float check[N];
    TRY(tack_array_copy_to_host(back, check, sizeof check));
    EXPECT(check[N - 1] == 2.0f * (float)(N - 1));
    tack_array_release(back);
    printf("re-imported the export: the same memory as y\n");

    tack_kernel_release(saxpy);
    tack_array_release(x);
    tack_array_release(y);
    tack_device_release(cpu);
    /* Every export's deleter has run and no array is left. */
    EXPECT(tack_dlpack_live_exports() == 0 && tack_array_live_count() == 0);
    printf("ok\n");
    return 0;
}
