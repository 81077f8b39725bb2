/* Runs a glowviz AOT bundle from C: loads the weights, fills every input from a .npy or raw
 * file, calls the entry, prints every output. Generic over the model: it reads the regions,
 * inputs and outputs from <NAME>_config, so one source serves every bundle.
 *
 *   make BUNDLE_DIR=out NAME=lenet            (see the Makefile and README.md)
 *   out/lenet_example --weights out/lenet.weights.bin input.npy
 *   out/lenet_example --weights out/lenet.weights.bin --repeat 1000 input.npy   (latency)
 *
 * Needs only the C99 library (and clock_gettime for --repeat). Assumes a little-endian target,
 * as .npy files written on x86 and ARM are.
 */
#define _POSIX_C_SOURCE 200112L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(BUNDLE_NAME) || !defined(BUNDLE_HEADER)
#error "build with -DBUNDLE_NAME=lenet -DBUNDLE_HEADER='\"lenet.h\"' (the Makefile does)"
#endif
#include BUNDLE_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define ENTRY BUNDLE_NAME
#define CONFIG CAT(BUNDLE_NAME, _config)

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bundle example: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* malloc'ed memory aligned to `align` (a power of two); `*base` is what to free. */
static uint8_t *aligned_alloc_bytes(size_t size, size_t align, void **base) {
    uintptr_t p;
    *base = malloc(size + align);
    if (!*base) die("out of memory", NULL);
    p = ((uintptr_t)*base + align - 1) & ~(uintptr_t)(align - 1);
    return (uint8_t *)p;
}

static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long n;
    if (!f) die("cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        die("cannot read", path);
    data = malloc((size_t)n + 1);
    if (!data) die("out of memory", NULL);
    if (fread(data, 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
    fclose(f);
    *size = (size_t)n;
    return data;
}

/* zlib's CRC-32, as the header's weights_crc32. */
static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    size_t i;
    int k;
    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static const char *npy_descr(uint32_t kind) {
    switch (kind) {
    case GLOWVIZ_ELEM_F32: return "<f4";
    case GLOWVIZ_ELEM_F16: return "<f2";
    case GLOWVIZ_ELEM_I64: return "<i8";
    case GLOWVIZ_ELEM_I32: return "<i4";
    case GLOWVIZ_ELEM_I8: return "|i1";
    case GLOWVIZ_ELEM_U8: return "|u1";
    case GLOWVIZ_ELEM_BOOL: return "|b1";
    default: return "?";
    }
}

/* Copies `path` (.npy of the tensor's dtype and shape, or raw bytes of its exact size) into
 * `dst`. */
static void load_input(const char *path, const glowviz_tensor_info *t, uint8_t *dst) {
    size_t n, hlen, start;
    uint8_t *data = read_file(path, &n);
    if (n >= 10 && memcmp(data, "\x93NUMPY", 6) == 0) {
        char *header, *p;
        uint32_t d;
        hlen = data[6] == 1 ? (size_t)(data[8] | data[9] << 8)
                            : (size_t)(data[8] | data[9] << 8 | (uint32_t)data[10] << 16 |
                                       (uint32_t)data[11] << 24);
        start = (data[6] == 1 ? 10 : 12) + hlen;
        if (start > n) die("truncated .npy file", path);
        data[start - 1] = '\0'; /* the header ends with '\n': make it a C string */
        header = (char *)data + (data[6] == 1 ? 10 : 12);
        if (!strstr(header, npy_descr(t->elem_kind))) die("wrong dtype in .npy file", path);
        if (strstr(header, "'fortran_order': True")) die("Fortran-order .npy file", path);
        p = strstr(header, "'shape':");
        p = p ? strchr(p, '(') : NULL;
        if (!p) die("no shape in .npy header", path);
        for (d = 0; d < t->rank; d++) {
            char *end;
            unsigned long long dim = strtoull(p + 1, &end, 10);
            if (end == p + 1 || dim != t->shape[d]) die("wrong shape in .npy file", path);
            p = end;
        }
        n -= start;
    } else {
        start = 0;
    }
    if (n != t->size) die("input file size does not match the input's size", path);
    memcpy(dst, data + start, n);
    free(data);
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023u, bits;
    float f;
    if (exp == 31) bits = sign | 0x7F800000u | man << 13;
    else if (exp) bits = sign | (exp + 112) << 23 | man << 13;
    else {
        f = (float)man / 16777216.0f; /* subnormal: man * 2^-24 */
        return sign ? -f : f;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void print_tensor(const char *role, uint32_t i, const glowviz_tensor_info *t,
                         const uint8_t *p) {
    uint64_t k, elems = 1;
    uint32_t d;
    printf("%s %u \"%s\" %s [", role, (unsigned)i, t->name, npy_descr(t->elem_kind));
    for (d = 0; d < t->rank; d++) {
        printf(d ? ", %llu" : "%llu", (unsigned long long)t->shape[d]);
        elems *= t->shape[d];
    }
    printf("]\n");
    for (k = 0; k < elems; k++) {
        switch (t->elem_kind) {
        case GLOWVIZ_ELEM_F32: { float v; memcpy(&v, p + 4 * k, 4); printf("%.9g\n", v); break; }
        case GLOWVIZ_ELEM_F16: {
            uint16_t h; memcpy(&h, p + 2 * k, 2); printf("%.9g\n", half_to_float(h)); break;
        }
        case GLOWVIZ_ELEM_I64: {
            int64_t v; memcpy(&v, p + 8 * k, 8); printf("%lld\n", (long long)v); break;
        }
        case GLOWVIZ_ELEM_I32: { int32_t v; memcpy(&v, p + 4 * k, 4); printf("%ld\n", (long)v); break; }
        case GLOWVIZ_ELEM_I8: printf("%d\n", (int)(int8_t)p[k]); break;
        default: printf("%u\n", (unsigned)p[k]); break; /* u8, bool */
        }
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const glowviz_bundle_config *cfg = &CONFIG;
    const char *weights_path = NULL;
    long repeat = 0;
    int a, first_input;
    uint32_t i;
    const uint8_t *constant;
    uint8_t *mutable_region, *activations, **inputs;
    void *constant_base = NULL, *mutable_base, *activations_base;

    for (a = 1; a < argc && argv[a][0] == '-' && argv[a][1] == '-'; a += 2) {
        if (a + 1 >= argc) die("missing value of", argv[a]);
        if (strcmp(argv[a], "--weights") == 0) weights_path = argv[a + 1];
        else if (strcmp(argv[a], "--repeat") == 0) repeat = strtol(argv[a + 1], NULL, 10);
        else die("unknown option", argv[a]);
    }
    first_input = a;
    if (argc - first_input != (int)cfg->num_inputs) {
        fprintf(stderr, "usage: %s [--weights FILE.weights.bin] [--repeat N] INPUT...\n"
                        "  one .npy or raw file per input, in order (%u inputs)\n",
                argv[0], (unsigned)cfg->num_inputs);
        return 2;
    }
    if (cfg->format_version != GLOWVIZ_BUNDLE_FORMAT_VERSION)
        die("the object and the header are of different bundle formats", NULL);

#ifdef BUNDLE_EMBEDDED
    (void)weights_path;
    constant = CAT(BUNDLE_NAME, _constant_weights);
    if (crc32_bytes(constant, cfg->constant_size) != cfg->weights_crc32)
        die("the linked weights are not this bundle's (CRC-32 differs)", NULL);
#else
    {
        size_t n;
        uint8_t *data, *region;
        if (!weights_path) die("--weights FILE is required (or build with make embedded)", NULL);
        data = read_file(weights_path, &n);
        if (n != cfg->constant_size) die("the weights file's size is not the constant region's", weights_path);
        if (crc32_bytes(data, n) != cfg->weights_crc32) die("the weights file is not this bundle's (CRC-32 differs)", weights_path);
        region = aligned_alloc_bytes(n, cfg->alignment, &constant_base);
        memcpy(region, data, n);
        free(data);
        constant = region;
    }
#endif
    mutable_region = aligned_alloc_bytes(cfg->mutable_size, cfg->alignment, &mutable_base);
    activations = aligned_alloc_bytes(cfg->activations_size, cfg->alignment, &activations_base);
    memset(mutable_region, 0, cfg->mutable_size);

    /* Inputs are kept aside and copied in before every call, as an application would. */
    inputs = malloc(sizeof *inputs * (cfg->num_inputs ? cfg->num_inputs : 1));
    if (!inputs) die("out of memory", NULL);
    for (i = 0; i < cfg->num_inputs; i++) {
        const glowviz_tensor_info *t = &cfg->inputs[i];
        inputs[i] = malloc(t->size ? t->size : 1);
        if (!inputs[i]) die("out of memory", NULL);
        load_input(argv[first_input + (int)i], t, inputs[i]);
    }

    {
        /* With --repeat: one warm-up call, then `repeat` timed calls. The median is the figure
         * to quote on a shared machine: the mean also counts the time other processes ran. */
        long r, calls = repeat > 0 ? repeat + 1 : 1;
        double *times = malloc(sizeof *times * (size_t)calls), total = 0.0;
        if (!times) die("out of memory", NULL);
        for (r = 0; r < calls; r++) {
            int rc;
            double t0 = now_seconds();
            for (i = 0; i < cfg->num_inputs; i++)
                memcpy(mutable_region + cfg->inputs[i].offset, inputs[i], cfg->inputs[i].size);
            rc = ENTRY(constant, mutable_region, activations);
            times[r] = now_seconds() - t0;
            if (rc != GLOWVIZ_BUNDLE_OK) {
                fprintf(stderr, "bundle example: the entry returned %d\n", rc);
                return 1;
            }
        }
        if (repeat > 0) {
            for (r = 1; r < calls; r++) total += times[r];
            qsort(times + 1, (size_t)repeat, sizeof *times, compare_doubles);
            fprintf(stderr, "latency: %.3f us per call (median of %ld calls; mean %.3f us)\n",
                    times[1 + repeat / 2] * 1e6, repeat, total * 1e6 / (double)repeat);
        }
        free(times);
    }
    for (i = 0; i < cfg->num_outputs; i++)
        print_tensor("output", i, &cfg->outputs[i], mutable_region + cfg->outputs[i].offset);

    for (i = 0; i < cfg->num_inputs; i++) free(inputs[i]);
    free(inputs);
    free(constant_base);
    free(mutable_base);
    free(activations_base);
    return 0;
}
