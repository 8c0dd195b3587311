// Times llama.cpp's CPU matrix multiply (ggml_mul_mat) for one weight type, as llama.cpp runs a model's weights:
// the CPU backend with a chosen thread count, weights placed in the repacking buffer when the CPU backend offers
// one for the type (what llama.cpp's model loader does, src/llama-model.cpp weight_buft_supported), activations F32.
//
//   matmul-bench TYPE K M N THREADS COPIES REPS
//
// TYPE is a ggml type name (f32, f16, q8_0, q5_0, q4_K, q6_K, ...). The graph multiplies COPIES distinct K x M
// weight matrices by the same K x N activations, one after another, like the layers of a model: with enough copies
// the weights stream from memory, with one small copy they stay in cache. Prints one JSON line: the settings, whether
// the weights were repacked, and the seconds of each of REPS timed graph runs (after one warm-up run).
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static enum ggml_type type_by_name(const char * name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * n = ggml_type_name((enum ggml_type) t);
        if (n && strcmp(n, name) == 0 && ggml_type_size((enum ggml_type) t) > 0) {
            return (enum ggml_type) t;
        }
    }
    fprintf(stderr, "unknown type '%s'\n", name);
    exit(2);
}

static float frand(unsigned * s) {            // uniform in [-1, 1): a deterministic LCG, no libc state
    *s = *s * 1664525u + 1013904223u;
    return (float) ((*s >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

// The buffer type llama.cpp would place this weight in: the first extra (repacking) buffer type of the CPU device
// that supports a MUL_MAT with it, else the plain CPU buffer.
static ggml_backend_buffer_type_t weight_buft(ggml_backend_dev_t dev, enum ggml_type type, int64_t k, int64_t m,
                                              int64_t n, int * repacked) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    *repacked = 0;
    if (get_extra) {
        for (ggml_backend_buffer_type_t * b = get_extra(dev); b && *b; b++) {
            struct ggml_init_params ip = { 4 * ggml_tensor_overhead(), NULL, true };
            struct ggml_context * ctx = ggml_init(ip);
            struct ggml_tensor * w = ggml_new_tensor_2d(ctx, type, k, m);
            struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
            struct ggml_tensor * y = ggml_mul_mat(ctx, w, x);
            ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(*b, 0);
            w->buffer = probe;
            int ok = ggml_backend_dev_supports_op(dev, y);
            ggml_backend_buffer_free(probe);
            ggml_free(ctx);
            if (ok) {
                *repacked = 1;
                return *b;
            }
        }
    }
    return ggml_backend_cpu_buffer_type();
}

int main(int argc, char ** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s TYPE K M N THREADS COPIES REPS\n", argv[0]);
        return 2;
    }
    const enum ggml_type type = type_by_name(argv[1]);
    const int64_t k = atoll(argv[2]), m = atoll(argv[3]), n = atoll(argv[4]);
    const int threads = atoi(argv[5]), copies = atoi(argv[6]), reps = atoi(argv[7]);
    if (k <= 0 || m <= 0 || n <= 0 || threads <= 0 || copies <= 0 || reps <= 0 || k % ggml_blck_size(type)) {
        fprintf(stderr, "K, M, N, THREADS, COPIES, REPS must be positive and K a multiple of the block size %lld\n",
                (long long) ggml_blck_size(type));
        return 2;
    }

    ggml_backend_t backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, threads);
    ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    int repacked = 0;
    ggml_backend_buffer_type_t buft = weight_buft(dev, type, k, m, n, &repacked);

    // weights: COPIES tensors in one buffer of the chosen type
    struct ggml_init_params wp = { (size_t) (copies + 1) * ggml_tensor_overhead(), NULL, true };
    struct ggml_context * ctx_w = ggml_init(wp);
    struct ggml_tensor ** w = malloc(sizeof(*w) * copies);
    for (int c = 0; c < copies; c++) {
        w[c] = ggml_new_tensor_2d(ctx_w, type, k, m);
    }
    ggml_backend_buffer_t buf_w = ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, buft);
    if (!buf_w) {
        fprintf(stderr, "could not allocate the weights\n");
        return 1;
    }
    // one matrix of random values in the weight type (ggml's own quantizer), copied into every tensor
    unsigned seed = 1234;
    float * src = malloc(sizeof(float) * k * m);
    for (int64_t i = 0; i < k * m; i++) {
        src[i] = frand(&seed);
    }
    const size_t nbytes = ggml_nbytes(w[0]);
    void * q = malloc(nbytes);
    ggml_quantize_chunk(type, src, q, 0, m, k, NULL);
    for (int c = 0; c < copies; c++) {
        ggml_backend_tensor_set(w[c], q, 0, nbytes);
    }

    // activations and outputs
    struct ggml_init_params gp = { (size_t) (2 * copies + 8) * ggml_tensor_overhead() + ggml_graph_overhead_custom(2 * copies + 8, false),
                                   NULL, true };
    struct ggml_context * ctx = ggml_init(gp);
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    struct ggml_cgraph * gf = ggml_new_graph_custom(ctx, 2 * copies + 8, false);
    for (int c = 0; c < copies; c++) {
        ggml_build_forward_expand(gf, ggml_mul_mat(ctx, w[c], x));
    }
    ggml_backend_buffer_t buf_a = ggml_backend_alloc_ctx_tensors(ctx, backend);
    float * xs = malloc(sizeof(float) * k * n);
    for (int64_t i = 0; i < k * n; i++) {
        xs[i] = frand(&seed);
    }
    ggml_backend_tensor_set(x, xs, 0, sizeof(float) * k * n);

    ggml_backend_graph_compute(backend, gf);   // warm-up
    printf("{\"type\": \"%s\", \"k\": %lld, \"m\": %lld, \"n\": %lld, \"threads\": %d, \"copies\": %d, "
           "\"repacked\": %s, \"weight_bytes\": %zu, \"seconds\": [",
           ggml_type_name(type), (long long) k, (long long) m, (long long) n, threads, copies,
           repacked ? "true" : "false", nbytes * copies);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        ggml_backend_graph_compute(backend, gf);
        printf("%s%.9f", r ? ", " : "", now_s() - t0);
    }
    printf("]}\n");

    ggml_backend_buffer_free(buf_a);
    ggml_backend_buffer_free(buf_w);
    ggml_free(ctx);
    ggml_free(ctx_w);
    ggml_backend_free(backend);
    free(src); free(q); free(xs); free(w);
    return 0;
}
