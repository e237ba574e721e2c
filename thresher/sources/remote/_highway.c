/* HighwayHash-64 for thresher: the checksum of Riegeli chunk data, in portable C.
 *
 * The same algorithm as highway.py (a state of four 64-bit lanes each of v0, v1, mul0,
 * mul1; every 32-byte packet added and mixed with 32x32-bit multiplies and a byte
 * "zipper merge"; a last partial packet padded; four permute-and-update rounds), written
 * for a C compiler: about a thousand times faster than Python integers. Built as the
 * extension module thresher.sources.remote._highway by `pip install` (setup.py, optional)
 * or, in a source checkout, on first use (highway.py); the GIL is released while it hashes.
 *
 *   hash64(buffer, k0, k1, k2, k3) -> int
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t v0[4], v1[4], mul0[4], mul1[4];
} State;

static const uint64_t INIT0[4] = {0xdbe6d5d5fe4cce2fULL, 0xa4093822299f31d0ULL,
                                  0x13198a2e03707344ULL, 0x243f6a8885a308d3ULL};
static const uint64_t INIT1[4] = {0x3bd39e10cb0ef593ULL, 0xc0acf169b5f18a8cULL,
                                  0xbe5466cf34e90c6cULL, 0x452821e638d01377ULL};

static uint64_t load64(const unsigned char *p) {
    uint64_t x = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&x, p, 8);
#else
    for (int i = 7; i >= 0; --i) x = (x << 8) | p[i]; /* little-endian on any host */
#endif
    return x;
}

static uint64_t rot32(uint64_t x) { return (x >> 32) | (x << 32); }

static void init(State *s, const uint64_t key[4]) {
    for (int i = 0; i < 4; ++i) {
        s->mul0[i] = INIT0[i];
        s->mul1[i] = INIT1[i];
        s->v0[i] = INIT0[i] ^ key[i];
        s->v1[i] = INIT1[i] ^ rot32(key[i]);
    }
}

/* Adds the byte-interleaved words of the lane pair (v1, v0) to (*add1, *add0). */
static void zipper(uint64_t v1, uint64_t v0, uint64_t *add1, uint64_t *add0) {
    *add0 += (((v0 & 0xff000000ULL) | (v1 & 0xff00000000ULL)) >> 24)
           | (((v0 & 0xff0000000000ULL) | (v1 & 0xff000000000000ULL)) >> 16)
           | (v0 & 0xff0000ULL) | ((v0 & 0xff00ULL) << 32)
           | ((v1 & 0xff00000000000000ULL) >> 8) | (v0 << 56);
    *add1 += (((v1 & 0xff000000ULL) | (v0 & 0xff00000000ULL)) >> 24)
           | (v1 & 0xff0000ULL) | ((v1 & 0xff0000000000ULL) >> 16)
           | ((v1 & 0xff00ULL) << 24) | ((v0 & 0xff000000000000ULL) >> 8)
           | ((v1 & 0xffULL) << 48) | (v0 & 0xff00000000000000ULL);
}

static void update(State *s, const uint64_t lanes[4]) {
    for (int i = 0; i < 4; ++i) {
        s->v1[i] += s->mul0[i] + lanes[i];
        s->mul0[i] ^= (s->v1[i] & 0xffffffffULL) * (s->v0[i] >> 32);
        s->v0[i] += s->mul1[i];
        s->mul1[i] ^= (s->v0[i] & 0xffffffffULL) * (s->v1[i] >> 32);
    }
    zipper(s->v1[1], s->v1[0], &s->v0[1], &s->v0[0]);
    zipper(s->v1[3], s->v1[2], &s->v0[3], &s->v0[2]);
    zipper(s->v0[1], s->v0[0], &s->v1[1], &s->v1[0]);
    zipper(s->v0[3], s->v0[2], &s->v1[3], &s->v1[2]);
}

static void update_packet(State *s, const unsigned char *p) {
    uint64_t lanes[4];
    for (int i = 0; i < 4; ++i) lanes[i] = load64(p + 8 * i);
    update(s, lanes);
}

static uint32_t rotl32(uint32_t x, unsigned n) { return (x << n) | (x >> (32 - n)); }

/* The last n (1..31) bytes, padded into one packet. */
static void remainder_(State *s, const unsigned char *tail, size_t n) {
    unsigned char packet[32] = {0};
    size_t whole = n & ~(size_t)3, mod4 = n & 3;
    for (int i = 0; i < 4; ++i) {
        s->v0[i] += ((uint64_t)n << 32) + n;
        uint32_t lo = rotl32((uint32_t)s->v1[i], (unsigned)n);
        uint32_t hi = rotl32((uint32_t)(s->v1[i] >> 32), (unsigned)n);
        s->v1[i] = (uint64_t)lo | ((uint64_t)hi << 32);
    }
    memcpy(packet, tail, whole);
    if (n & 16) {
        memcpy(packet + 28, tail + whole + mod4 - 4, 4);
    } else if (mod4) {
        const unsigned char *rest = tail + whole;
        packet[16] = rest[0];
        packet[17] = rest[mod4 >> 1];
        packet[18] = rest[mod4 - 1];
    }
    update_packet(s, packet);
}

static uint64_t finish(State *s) {
    for (int r = 0; r < 4; ++r) {
        uint64_t lanes[4] = {rot32(s->v0[2]), rot32(s->v0[3]), rot32(s->v0[0]), rot32(s->v0[1])};
        update(s, lanes);
    }
    return s->v0[0] + s->v1[0] + s->mul0[0] + s->mul1[0];
}

static uint64_t hash64(const unsigned char *data, size_t size, const uint64_t key[4]) {
    State s;
    size_t whole = size - size % 32;
    init(&s, key);
    for (size_t pos = 0; pos < whole; pos += 32) update_packet(&s, data + pos);
    if (whole != size) remainder_(&s, data + whole, size - whole);
    return finish(&s);
}

static PyObject *py_hash64(PyObject *self, PyObject *args) {
    Py_buffer view;
    uint64_t key[4];
    uint64_t out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*KKKK", &view, &key[0], &key[1], &key[2], &key[3])) return NULL;
    if (view.len >= 4096) {
        Py_BEGIN_ALLOW_THREADS
        out = hash64((const unsigned char *)view.buf, (size_t)view.len, key);
        Py_END_ALLOW_THREADS
    } else {
        out = hash64((const unsigned char *)view.buf, (size_t)view.len, key);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(out);
}

static PyMethodDef methods[] = {
    {"hash64", py_hash64, METH_VARARGS,
     "hash64(data, k0, k1, k2, k3) -> the 64-bit HighwayHash of a bytes-like object."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_highway",
                                    "HighwayHash-64 in C (see highway.py).", -1, methods};

PyMODINIT_FUNC PyInit__highway(void) { return PyModule_Create(&module); }
