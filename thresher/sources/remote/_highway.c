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
 *   chunk_records(buffer, base, begin, limit, verify) -> tuple or None (see py_chunk_records)
 *   simd([on]) -> bool (whether whole packets are hashed with AVX2, where the CPU has it)
 *   small_chunks(buffer, base, begins, limits, verify) -> list (per chunk: bytes, a tuple or None)
 *   gather_binary(specs, col, slots, rows, text, wide) -> list; gather_fixed(...) -> (bytes, nulls)
 *     (rows of Arrow columns read from their buffers, for ParquetSource: see below)
 *
 * small_chunks checks many chunks of one record each (a block of a group_size-1 file) in one
 * call, as format.small_chunk_records does one: see that function for what each field is.
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
/* The same updates on whole 32-byte packets, the four lanes in one AVX2 register each (about
 * five times the portable loop). _mm256_mul_epu32 multiplies the low 32 bits of each 64-bit
 * lane, which is (v1 & 0xffffffff) * (v0 >> 32) once v0 is shifted; the zipper merge is one
 * byte shuffle within each 128-bit half (the mask is zipper()'s byte map; a test compares
 * both paths). Called only where the CPU says it has AVX2 (avx2_ok). */
__attribute__((target("avx2"))) static void update_packets_avx2(State *s, const unsigned char *p,
                                                                size_t packets) {
    __m256i v0 = _mm256_loadu_si256((const __m256i *)s->v0), v1 = _mm256_loadu_si256((const __m256i *)s->v1);
    __m256i mul0 = _mm256_loadu_si256((const __m256i *)s->mul0);
    __m256i mul1 = _mm256_loadu_si256((const __m256i *)s->mul1);
    const __m256i zip = _mm256_set_epi64x(0x070806090D0A040BLL, 0x000F010E05020C03LL,
                                          0x070806090D0A040BLL, 0x000F010E05020C03LL);
    for (size_t i = 0; i < packets; ++i) {
        __m256i lanes = _mm256_loadu_si256((const __m256i *)(p + 32 * i));
        v1 = _mm256_add_epi64(v1, _mm256_add_epi64(mul0, lanes));
        mul0 = _mm256_xor_si256(mul0, _mm256_mul_epu32(v1, _mm256_srli_epi64(v0, 32)));
        v0 = _mm256_add_epi64(v0, mul1);
        mul1 = _mm256_xor_si256(mul1, _mm256_mul_epu32(v0, _mm256_srli_epi64(v1, 32)));
        v0 = _mm256_add_epi64(v0, _mm256_shuffle_epi8(v1, zip));
        v1 = _mm256_add_epi64(v1, _mm256_shuffle_epi8(v0, zip));
    }
    _mm256_storeu_si256((__m256i *)s->v0, v0);
    _mm256_storeu_si256((__m256i *)s->v1, v1);
    _mm256_storeu_si256((__m256i *)s->mul0, mul0);
    _mm256_storeu_si256((__m256i *)s->mul1, mul1);
}
#endif

/* 1 where update_packets_avx2 may run (set at import; 0 forces the portable loop: tests). */
static int avx2_ok = 0;

/* All whole packets of data[0:whole], whole a multiple of 32. */
static void update_packets(State *s, const unsigned char *data, size_t whole) {
#ifdef HAVE_AVX2_PATH
    if (avx2_ok && whole >= 256) {
        update_packets_avx2(s, data, whole / 32);
        return;
    }
#endif
    for (size_t pos = 0; pos < whole; pos += 32) update_packet(s, data + pos);
}

static uint64_t hash64(const unsigned char *data, size_t size, const uint64_t key[4]) {
    State s;
    size_t whole = size - size % 32;
    init(&s, key);
    update_packets(&s, data, whole);
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

/* Riegeli's key: the bytes of "Riegeli/records\n", twice. */
static const uint64_t RIEGELI[4] = {0x2f696c6567656952ULL, 0x0a7364726f636572ULL,
                                    0x2f696c6567656952ULL, 0x0a7364726f636572ULL};
#define BLOCK 65536
#define USABLE (65536 - 24)

static int64_t add_with_overhead(int64_t pos, int64_t size) {
    int64_t blocks = (size + (pos + USABLE - 1) % BLOCK) / USABLE;
    return pos + size + blocks * 24;
}

static int64_t round_up_to_chunk_boundary(int64_t pos) {
    int64_t remaining = (BLOCK - pos % BLOCK) % BLOCK;
    int64_t extra = remaining - (USABLE - 1);
    return pos + (extra > 0 ? extra : 0);
}

/* The varint at p[*pos:size] into *value (1) or 0 if it runs past size or 10 bytes. */
static int varint(const unsigned char *p, int64_t size, int64_t *pos, uint64_t *value) {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63 && *pos < size; shift += 7) {
        unsigned char byte = p[(*pos)++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (byte < 0x80) {
            *value = v;
            return 1;
        }
    }
    return 0;
}

/* A zstd frame p[0:n] made only of raw and RLE blocks (no dictionary, no checksum), whose
 * content is expect bytes: 1 (its content copied to dst unless dst is NULL), else 0 (a
 * compressed block or anything else: zstandard decides). Incompressible records (JPEG, audio,
 * random bytes) are stored so; their "decompression" is a copy. */
static int raw_frame(const unsigned char *p, int64_t n, int64_t expect, unsigned char *dst) {
    if (n < 5 || p[0] != 0x28 || p[1] != 0xb5 || p[2] != 0x2f || p[3] != 0xfd) return 0;
    unsigned fhd = p[4];
    int64_t pos = 5;
    int fcs_flag = fhd >> 6, single = (fhd >> 5) & 1;
    if (fhd & 0x0f) return 0; /* reserved bit, checksum, dictionary: left to zstandard */
    if (!single) pos += 1;    /* the window descriptor */
    int fcs_bytes = fcs_flag == 0 ? single : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
    if (pos + fcs_bytes > n) return 0;
    if (fcs_bytes) {
        uint64_t size = 0;
        for (int i = fcs_bytes - 1; i >= 0; --i) size = (size << 8) | p[pos + i];
        if (fcs_bytes == 2) size += 256;
        if (size != (uint64_t)expect) return 0;
        pos += fcs_bytes;
    }
    int64_t written = 0;
    for (;;) {
        if (pos + 3 > n) return 0;
        uint32_t header = (uint32_t)p[pos] | ((uint32_t)p[pos + 1] << 8) | ((uint32_t)p[pos + 2] << 16);
        int last = header & 1, type = (header >> 1) & 3;
        int64_t size = header >> 3;
        pos += 3;
        if (written + size > expect) return 0;
        if (type == 0) { /* raw */
            if (pos + size > n) return 0;
            if (dst) memcpy(dst + written, p + pos, (size_t)size);
            pos += size;
        } else if (type == 1) { /* RLE: one byte, size times */
            if (pos + 1 > n) return 0;
            if (dst) memset(dst + written, p[pos], (size_t)size);
            pos += 1;
        } else {
            return 0;
        }
        written += size;
        if (last) break;
    }
    return pos == n && written == expect;
}

/* One chunk of one record in buf (the file's bytes from base), [begin, limit) of its file:
 * out = {status, compression, sizes start, sizes end, values start, values end, sizes size,
 * values size} (positions in buf). Status 0: the Python code must decide; 1: hashes and
 * structure checked, zstd buffers to decompress; 2: uncompressed and every size checked; 3:
 * as 1, and both zstd frames are stored blocks whose sizes check (the values are a copy). */
static void small_chunk(const unsigned char *buf, int64_t len, int64_t base, int64_t begin,
                        int64_t limit, int verify, int64_t *out) {
    int64_t offset = begin % BLOCK, lo = begin - base;
    memset(out, 0, 8 * sizeof(int64_t));
    if (begin < 0 || !offset || lo < 0 || limit < begin + 40 || offset + (limit - begin) > BLOCK
        || limit - base > len) return;
    const unsigned char *h = buf + lo;
    uint64_t stored = load64(h), data_size = load64(h + 8), data_hash = load64(h + 16);
    uint64_t type_and_count = load64(h + 24), decoded = load64(h + 32);
    if ((type_and_count & 0xff) != 0x72 || (type_and_count >> 8) != 1 || data_size < 3
        || data_size > (uint64_t)(limit - begin - 40)) return;
    int64_t end = add_with_overhead(begin, 40 + (int64_t)data_size);
    int64_t boundary = round_up_to_chunk_boundary(begin + 1);
    if ((end > boundary ? end : boundary) > limit) return;
    if (verify && stored != hash64(h + 8, 32, RIEGELI)) return;
    const unsigned char *data = h + 40;
    int64_t n = (int64_t)data_size, start = lo + 40;
    if (hash64(data, (size_t)n, RIEGELI) != data_hash) return;
    int64_t sizes_len = data[1];
    if (sizes_len >= 0x80 || 2 + sizes_len > n) return;
    if (data[0] == 0x7a) { /* zstd: [varint sizes size][frame] of sizes_len, [varint values size][frame] */
        int64_t sizes_size = data[2], pos = 2 + sizes_len;
        uint64_t values_size;
        if (sizes_size >= 0x80 || !sizes_size || !varint(data, n, &pos, &values_size) || !values_size
            || values_size != decoded) return;
        int64_t fields[8] = {1, 0x7a, start + 3, start + 2 + sizes_len, start + pos, start + n,
                             sizes_size, (int64_t)values_size};
        unsigned char sizes[128];
        int64_t at = 0;
        uint64_t size;
        if (raw_frame(data + 3, sizes_len - 1, sizes_size, sizes) && varint(sizes, sizes_size, &at, &size)
            && at == sizes_size && size == decoded && raw_frame(data + pos, n - pos, (int64_t)values_size, NULL))
            fields[0] = 3; /* both frames are copies: the record is made in C */
        memcpy(out, fields, sizeof(fields));
    } else if (data[0] == 0) { /* uncompressed: the sizes (one varint), then the values */
        int64_t pos = 2;
        uint64_t size;
        if (!varint(data, 2 + sizes_len, &pos, &size) || pos != 2 + sizes_len || size != decoded
            || (uint64_t)(n - 2 - sizes_len) != decoded) return;
        int64_t fields[8] = {2, 0, start + 2, start + 2 + sizes_len, start + 2 + sizes_len, start + n,
                             sizes_len, n - 2 - sizes_len};
        memcpy(out, fields, sizeof(fields));
    }
}

/* small_chunks(buf, base, begins, limits, verify) -> a list, per chunk: the record (bytes) where
 * it is checked and made here, a tuple (sizes start, sizes end, values start, values end, sizes
 * size, values size) of zstd frames to decompress where the rest is checked, else None. */
static PyObject *py_small_chunks(PyObject *self, PyObject *args) {
    Py_buffer buf, begins, limits;
    long long base;
    int verify;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Ly*y*p", &buf, &base, &begins, &limits, &verify)) return NULL;
    Py_ssize_t count = begins.len / 8;
    PyObject *result = NULL;
    int64_t *info = NULL;
    if (begins.len % 8 || limits.len != begins.len) {
        PyErr_SetString(PyExc_ValueError, "begins and limits must be int64 arrays of one length");
        goto done;
    }
    info = (int64_t *)PyMem_Malloc((size_t)(count ? count : 1) * 8 * sizeof(int64_t));
    if (info == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *p = (const unsigned char *)buf.buf;
    const int64_t *b = (const int64_t *)begins.buf, *l = (const int64_t *)limits.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; ++i) {
        int64_t begin, limit;
        memcpy(&begin, b + i, 8);
        memcpy(&limit, l + i, 8);
        small_chunk(p, buf.len, base, begin, limit, verify, info + 8 * i);
    }
    Py_END_ALLOW_THREADS
    if ((result = PyList_New(count)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < count; ++i) {
        const int64_t *f = info + 8 * i;
        PyObject *item;
        if (f[0] == 2) {
            item = PyBytes_FromStringAndSize((const char *)p + f[4], f[5] - f[4]);
        } else if (f[0] == 3) {
            item = PyBytes_FromStringAndSize(NULL, f[7]);
            if (item != NULL) raw_frame(p + f[4], f[5] - f[4], f[7], (unsigned char *)PyBytes_AS_STRING(item));
        } else if (f[0] == 1) {
            item = Py_BuildValue("(LLLLLL)", (long long)f[2], (long long)f[3], (long long)f[4],
                                 (long long)f[5], (long long)f[6], (long long)f[7]);
        } else {
            Py_INCREF(Py_None);
            item = Py_None;
        }
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }
done:
    PyMem_Free(info);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&begins);
    PyBuffer_Release(&limits);
    return result;
}

/* --- a chunk of many records, stored blocks copied straight to the records ---------------------
 *
 * chunk_records(buf, base, begin, limit, verify) reads the simple chunk at physical position
 * begin (buf holds the file's bytes from base; the chunk must end by limit) without first
 * joining its data into one buffer: the Riegeli block headers inside it are checked (hash with
 * verify, and where they say the chunk starts and ends), the data is hashed as it is passed, and
 * where the values are uncompressed or one zstd frame of stored and RLE blocks (incompressible
 * records), they are copied from the file's bytes into the result once. It returns None for
 * anything else (a compressed block, another compression, any check that fails: the general path
 * in format.py then decides and names the error), else (num_records, sizes, sizes_frame, values):
 * sizes the record sizes' varints (sizes_frame 0), or the Riegeli buffer of their zstd frame to
 * decompress, its size prefix first (1). Nothing is returned unless the data hash matched. */

typedef struct {
    const unsigned char *buf;
    int64_t len, base, pos; /* pos: the physical position of the next logical byte */
    int hashing;
    State h;
    unsigned char pending[32];
    size_t npending;
} Logical;

static void feed(Logical *r, const unsigned char *p, size_t n) {
    if (!r->hashing || n == 0) return;
    if (r->npending) {
        size_t take = 32 - r->npending < n ? 32 - r->npending : n;
        memcpy(r->pending + r->npending, p, take);
        r->npending += take;
        p += take;
        n -= take;
        if (r->npending < 32) return;
        update_packet(&r->h, r->pending);
        r->npending = 0;
    }
    size_t whole = n - n % 32;
    update_packets(&r->h, p, whole);
    memcpy(r->pending, p + whole, n - whole);
    r->npending = n - whole;
}

/* n logical bytes (block headers skipped) to dst (NULL: passed over), hashed when hashing: 1, or
 * 0 where they run past the buffer. */
static int lread(Logical *r, unsigned char *dst, int64_t n) {
    while (n > 0) {
        if (r->pos % BLOCK == 0) r->pos += 24;
        int64_t room = BLOCK - r->pos % BLOCK, take = n < room ? n : room, lo = r->pos - r->base;
        if (lo < 0 || lo + take > r->len) return 0;
        feed(r, r->buf + lo, (size_t)take);
        if (dst) {
            memcpy(dst, r->buf + lo, (size_t)take);
            dst += take;
        }
        r->pos += take;
        n -= take;
    }
    return 1;
}

static int lvarint(Logical *r, uint64_t *value, int64_t *used) {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        unsigned char byte;
        if (!lread(r, &byte, 1)) return 0;
        ++*used;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (byte < 0x80) {
            *value = v;
            return 1;
        }
    }
    return 0;
}

/* The header of a zstd frame of raw and RLE blocks only (no dictionary, no checksum) whose content
 * is expect bytes, read from r: 1, or 0 (left to zstandard). */
static int lframe_header(Logical *r, uint64_t expect, int64_t *used) {
    unsigned char h[6];
    if (!lread(r, h, 5)) return 0;
    *used += 5;
    if (h[0] != 0x28 || h[1] != 0xb5 || h[2] != 0x2f || h[3] != 0xfd) return 0;
    unsigned fhd = h[4];
    int fcs_flag = fhd >> 6, single = (fhd >> 5) & 1;
    if (fhd & 0x0f) return 0;
    if (!single) {
        if (!lread(r, h, 1)) return 0; /* the window descriptor */
        ++*used;
    }
    int fcs_bytes = fcs_flag == 0 ? single : (fcs_flag == 1 ? 2 : (fcs_flag == 2 ? 4 : 8));
    if (fcs_bytes) {
        unsigned char f[8];
        uint64_t size = 0;
        if (!lread(r, f, fcs_bytes)) return 0;
        *used += fcs_bytes;
        for (int i = fcs_bytes - 1; i >= 0; --i) size = (size << 8) | f[i];
        if (fcs_bytes == 2) size += 256;
        if (size != expect) return 0;
    }
    return 1;
}

/* The blocks of that frame, content to dst (expect bytes), reading exactly avail bytes of r: 1 or 0. */
static int lframe_blocks(Logical *r, unsigned char *dst, int64_t expect, int64_t avail) {
    int64_t written = 0, used = 0;
    for (;;) {
        unsigned char b[3];
        if (used + 3 > avail || !lread(r, b, 3)) return 0;
        used += 3;
        uint32_t header = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16);
        int last = header & 1, type = (header >> 1) & 3;
        int64_t size = header >> 3;
        if (written + size > expect) return 0;
        if (type == 0) {
            if (used + size > avail || !lread(r, dst + written, size)) return 0;
            used += size;
        } else if (type == 1) {
            unsigned char byte;
            if (used + 1 > avail || !lread(r, &byte, 1)) return 0;
            used += 1;
            memset(dst + written, byte, (size_t)size);
        } else {
            return 0;
        }
        written += size;
        if (last) break;
    }
    return used == avail && written == expect;
}

static PyObject *py_chunk_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    long long base, begin, limit;
    int verify;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLLp", &view, &base, &begin, &limit, &verify)) return NULL;
    PyObject *result = NULL, *sizes = NULL, *values = NULL;
    unsigned char *frame = NULL;
    Logical r;
    memset(&r, 0, sizeof(r));
    r.buf = (const unsigned char *)view.buf;
    r.len = view.len;
    r.base = base;
    r.pos = begin;
    unsigned char h[40];
    if (begin < base || !lread(&r, h, 40)) goto none;
    uint64_t stored = load64(h), data_size = load64(h + 8), data_hash = load64(h + 16);
    uint64_t type_and_count = load64(h + 24), decoded = load64(h + 32);
    if (verify && stored != hash64(h + 8, 32, RIEGELI)) goto none;
    if ((type_and_count & 0xff) != 0x72 || data_size < 2 || data_size > (uint64_t)view.len) goto none;
    int64_t end = add_with_overhead(begin, 40 + (int64_t)data_size);
    if (end > limit || end - base > view.len) goto none;
    for (int64_t block = begin + (BLOCK - begin % BLOCK) % BLOCK; block < end; block += BLOCK) {
        if (block - base + 24 > view.len) goto none;
        const unsigned char *b = r.buf + (block - base);
        if (verify && load64(b) != hash64(b + 8, 16, RIEGELI)) goto none;
        if (load64(b + 8) != (uint64_t)(block - begin) || load64(b + 16) != (uint64_t)(end - block)) goto none;
    }
    init(&r.h, RIEGELI);
    r.hashing = 1;
    int64_t used = 0, n = (int64_t)data_size;
    unsigned char compression;
    uint64_t sizes_len, values_size;
    if (!lread(&r, &compression, 1)) goto none;
    used = 1;
    if (!lvarint(&r, &sizes_len, &used) || sizes_len > (uint64_t)(n - used)) goto none;
    int frame_kind = 0;
    if (compression == 0x00) { /* uncompressed: the sizes' varints, then the values */
        if ((sizes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizes_len)) == NULL) goto fail;
        if (!lread(&r, (unsigned char *)PyBytes_AS_STRING(sizes), (int64_t)sizes_len)) goto none;
        used += (int64_t)sizes_len;
        values_size = (uint64_t)(n - used);
        if (values_size != decoded) goto none;
        if ((values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)values_size)) == NULL) goto fail;
        int ok;
        Py_BEGIN_ALLOW_THREADS
        ok = lread(&r, (unsigned char *)PyBytes_AS_STRING(values), (int64_t)values_size);
        Py_END_ALLOW_THREADS
        if (!ok) goto none;
    } else if (compression == 0x7a) { /* zstd: [varint size][frame] of sizes_len, then [varint size][frame] */
        frame = (unsigned char *)PyMem_Malloc(sizes_len ? (size_t)sizes_len : 1);
        if (frame == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (!lread(&r, frame, (int64_t)sizes_len)) goto none;
        used += (int64_t)sizes_len;
        int64_t at = 0;
        uint64_t sizes_size;
        if (!varint(frame, (int64_t)sizes_len, &at, &sizes_size) || sizes_size > 10 * (type_and_count >> 8) + 10
            || sizes_size > ((uint64_t)sizes_len - (uint64_t)at) * 32768)
            goto none; /* bounds before the hash is checked: 10 bytes a size; RLE makes 32768x at most */
        if ((sizes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizes_size)) == NULL) goto fail;
        if (!raw_frame(frame + at, (int64_t)sizes_len - at, (int64_t)sizes_size,
                       (unsigned char *)PyBytes_AS_STRING(sizes))) {
            Py_DECREF(sizes); /* a compressed frame: the caller decompresses it, size prefix and all */
            sizes = PyBytes_FromStringAndSize((const char *)frame, (Py_ssize_t)sizes_len);
            if (sizes == NULL) goto fail;
            frame_kind = 1;
        }
        if (!lvarint(&r, &values_size, &used) || values_size != decoded || !lframe_header(&r, values_size, &used)
            || used > n || values_size > (uint64_t)(n - used) * 32768)
            goto none; /* the bound: an RLE block of 4 bytes makes at most 128 KiB (before the hash is checked) */
        Logical peek = r; /* the first block's type, before the values' room is allocated */
        unsigned char first[3];
        if (!lread(&peek, first, 3) || ((first[0] >> 1) & 3) > 1) goto none; /* compressed: zstandard's */
        if ((values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)values_size)) == NULL) goto fail;
        int ok;
        Py_BEGIN_ALLOW_THREADS
        ok = lframe_blocks(&r, (unsigned char *)PyBytes_AS_STRING(values), (int64_t)values_size, n - used);
        Py_END_ALLOW_THREADS
        if (!ok) goto none;
    } else {
        goto none;
    }
    if (r.npending) remainder_(&r.h, r.pending, r.npending);
    if (finish(&r.h) != data_hash) goto none;
    result = Py_BuildValue("(KOiO)", (unsigned long long)(type_and_count >> 8), sizes, frame_kind, values);
    goto fail; /* the references built into result are its own */
none:
    Py_INCREF(Py_None);
    result = Py_None;
fail:
    Py_XDECREF(sizes);
    Py_XDECREF(values);
    PyMem_Free(frame);
    PyBuffer_Release(&view);
    return result;
}

/* simd() -> whether hashes use the AVX2 loop; simd(False) turns it off, simd(True) back on where
 * the CPU has AVX2 (for tests that compare both loops). */
static PyObject *py_simd(PyObject *self, PyObject *args) {
    int on = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "|p", &on)) return NULL;
#ifdef HAVE_AVX2_PATH
    if (on >= 0) avx2_ok = on && __builtin_cpu_supports("avx2");
#endif
    return PyBool_FromLong(avx2_ok);
}

/* ---- rows of Arrow columns, gathered (ParquetSource) ------------------------------------------
 *
 * A batch of a shuffled read wants row rows[i] of table slots[i] for every key i, from many
 * decoded row groups (Arrow record batches). Arrow's take needs one call per table and then a
 * conversion to Python values; these read the columns' buffers directly and make the values in
 * one pass. specs[s] is table s's tuple: one bytes object per column, a ColSpec (where its Arrow
 * buffers are and how long, and the array's offset), then the objects that own those buffers.
 * Only gather.Gatherer.spec makes them (the addresses are trusted: a spec from anywhere else can
 * crash the process); every position read is checked against its buffer's length. */
typedef struct {
    const unsigned char *valid; /* NULL: no nulls */
    Py_ssize_t valid_len;
    const unsigned char *a; /* offsets (binary) or values (fixed) */
    Py_ssize_t a_len;
    const unsigned char *b; /* data (binary) */
    Py_ssize_t b_len;
    Py_ssize_t offset;
} ColSpec;

typedef struct {
    int loaded;
    ColSpec c;
} Column;

static void release_columns(Column *cols, Py_ssize_t n) {
    (void)n;
    PyMem_Free(cols);
}

static int load_column(PyObject *specs, Py_ssize_t s, Py_ssize_t col, Column *c) {
    PyObject *table = PyTuple_GET_ITEM(specs, s);
    if (!PyTuple_Check(table) || col < 0 || col >= PyTuple_GET_SIZE(table) - 1) {
        PyErr_Format(PyExc_ValueError, "gather: table %zd has no column %zd", s, col);
        return 0;
    }
    PyObject *entry = PyTuple_GET_ITEM(table, col);
    if (!PyBytes_Check(entry) || PyBytes_GET_SIZE(entry) != (Py_ssize_t)sizeof(ColSpec)) {
        PyErr_Format(PyExc_ValueError, "gather: column %zd of table %zd is not a column spec", col, s);
        return 0;
    }
    memcpy(&c->c, PyBytes_AS_STRING(entry), sizeof(ColSpec));
    if (c->c.offset < 0 || c->c.valid_len < 0 || c->c.a_len < 0 || c->c.b_len < 0) {
        PyErr_Format(PyExc_ValueError, "gather: column %zd of table %zd has a negative length", col, s);
        return 0;
    }
    c->loaded = 1;
    return 1;
}

/* The key arrays (int64, equal lengths) and the table of key i's column, loaded once a call. */
typedef struct {
    Py_buffer slots, rows;
    const int64_t *slot, *row;
    Py_ssize_t n, ntables;
    Column *cols;
} Keys;

static int keys_open(Keys *k, PyObject *specs, PyObject *slots, PyObject *rows) {
    memset(k, 0, sizeof(*k));
    if (!PyTuple_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "gather: specs must be a tuple");
        return 0;
    }
    if (PyObject_GetBuffer(slots, &k->slots, PyBUF_SIMPLE) < 0) return 0;
    if (PyObject_GetBuffer(rows, &k->rows, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&k->slots);
        return 0;
    }
    if (k->slots.len != k->rows.len || k->slots.len % 8) {
        PyErr_SetString(PyExc_ValueError, "gather: slots and rows must be int64 arrays of one length");
        goto fail;
    }
    k->n = k->slots.len / 8;
    k->slot = (const int64_t *)k->slots.buf;
    k->row = (const int64_t *)k->rows.buf;
    k->ntables = PyTuple_GET_SIZE(specs);
    k->cols = (Column *)PyMem_Calloc(k->ntables ? (size_t)k->ntables : 1, sizeof(Column));
    if (k->cols == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    return 1;
fail:
    PyBuffer_Release(&k->slots);
    PyBuffer_Release(&k->rows);
    return 0;
}

static void keys_close(Keys *k) {
    if (k->cols != NULL) release_columns(k->cols, k->ntables);
    k->cols = NULL;
    PyBuffer_Release(&k->slots);
    PyBuffer_Release(&k->rows);
}

/* Key i's column and its element index in the buffers; NULL (an error set) if out of range. */
static ColSpec *key_column(Keys *k, PyObject *specs, Py_ssize_t col, Py_ssize_t i,
                           Py_ssize_t *index, int *is_null) {
    int64_t s = k->slot[i], r = k->row[i];
    if (s < 0 || s >= k->ntables || PyTuple_GET_ITEM(specs, (Py_ssize_t)s) == Py_None) {
        PyErr_Format(PyExc_ValueError, "gather: key %zd names table %lld, which is not there", i, (long long)s);
        return NULL;
    }
    Column *col_ = &k->cols[s];
    if (!col_->loaded && !load_column(specs, (Py_ssize_t)s, col, col_)) return NULL;
    ColSpec *c = &col_->c;
    if (r < 0 || r > PY_SSIZE_T_MAX / 16 - c->offset) {
        PyErr_Format(PyExc_IndexError, "gather: row %lld of key %zd is out of range", (long long)r, i);
        return NULL;
    }
    Py_ssize_t at = c->offset + (Py_ssize_t)r;
    *index = at;
    *is_null = 0;
    if (c->valid != NULL) {
        if ((at >> 3) >= c->valid_len) {
            PyErr_Format(PyExc_IndexError, "gather: row %lld is past the validity bitmap", (long long)r);
            return NULL;
        }
        *is_null = !((c->valid[at >> 3] >> (at & 7)) & 1);
    }
    return c;
}

/* gather_binary(specs, col, slots, rows, text, wide) -> list of str (text) or bytes, None where null */
static PyObject *py_gather_binary(PyObject *self, PyObject *args) {
    PyObject *specs, *slots, *rows;
    Py_ssize_t col;
    int text, wide;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOOpp", &specs, &col, &slots, &rows, &text, &wide)) return NULL;
    Keys k;
    if (!keys_open(&k, specs, slots, rows)) return NULL;
    PyObject *out = NULL;
    /* two passes: where each value is (independent loads the CPU overlaps, each value's bytes
     * prefetched), then the objects made from bytes that are in the cache by then */
    const char **where = (const char **)PyMem_Malloc((k.n ? (size_t)k.n : 1) * sizeof(char *));
    Py_ssize_t *size = (Py_ssize_t *)PyMem_Malloc((k.n ? (size_t)k.n : 1) * sizeof(Py_ssize_t));
    if (where == NULL || size == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_ssize_t width = wide ? 8 : 4;
    for (Py_ssize_t i = 0; i < k.n; ++i) {
        Py_ssize_t at;
        int is_null;
        ColSpec *c = key_column(&k, specs, col, i, &at, &is_null);
        if (c == NULL) goto fail;
        if (is_null) {
            where[i] = NULL;
            size[i] = -1; /* null */
            continue;
        }
        if (at > c->a_len / width - 2) {
            PyErr_Format(PyExc_IndexError, "gather: row %lld is past the offsets", (long long)k.row[i]);
            goto fail;
        }
        int64_t start, end;
        const unsigned char *o = c->a + at * width;
        if (wide) {
            memcpy(&start, o, 8);
            memcpy(&end, o + 8, 8);
        } else {
            int32_t s32, e32;
            memcpy(&s32, o, 4);
            memcpy(&e32, o + 4, 4);
            start = s32;
            end = e32;
        }
        if (start < 0 || end < start || end > (int64_t)c->b_len) {
            PyErr_Format(PyExc_ValueError, "gather: row %lld has offsets %lld..%lld outside its data (%zd bytes)",
                         (long long)k.row[i], (long long)start, (long long)end, c->b_len);
            goto fail;
        }
        where[i] = c->b != NULL ? (const char *)c->b + start : ""; /* no data buffer: only empty values */
        size[i] = (Py_ssize_t)(end - start);
#if defined(__GNUC__) || defined(__clang__)
        if (where[i] != NULL)
            for (Py_ssize_t line = 0; line < size[i] && line < 512; line += 64) __builtin_prefetch(where[i] + line);
#endif
    }
    out = PyList_New(k.n);
    if (out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < k.n; ++i) {
        PyObject *v;
        if (size[i] < 0) {
            Py_INCREF(Py_None);
            v = Py_None;
        } else {
            v = text ? PyUnicode_DecodeUTF8(where[i], size[i], NULL) : PyBytes_FromStringAndSize(where[i], size[i]);
            if (v == NULL) goto fail;
        }
        PyList_SET_ITEM(out, i, v);
    }
    PyMem_Free(where);
    PyMem_Free(size);
    keys_close(&k);
    return out;
fail:
    Py_XDECREF(out);
    PyMem_Free(where);
    PyMem_Free(size);
    keys_close(&k);
    return NULL;
}

/* gather_fixed(specs, col, slots, rows, itemsize) -> (bytes, nulls): the keys' values, itemsize
 * bytes each (itemsize 0: bits, one byte 0 or 1 each), and the list of the keys that are null
 * (their bytes zero), or None when none is. */
static PyObject *py_gather_fixed(PyObject *self, PyObject *args) {
    PyObject *specs, *slots, *rows;
    Py_ssize_t col, itemsize;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOOn", &specs, &col, &slots, &rows, &itemsize)) return NULL;
    if (itemsize < 0 || itemsize > 64) {
        PyErr_SetString(PyExc_ValueError, "gather: itemsize must be 0 (bits) to 64");
        return NULL;
    }
    Keys k;
    if (!keys_open(&k, specs, slots, rows)) return NULL;
    PyObject *nulls = NULL, *out = NULL;
    Py_ssize_t step = itemsize ? itemsize : 1;
    if (k.n > PY_SSIZE_T_MAX / 64) {
        PyErr_NoMemory();
        goto fail;
    }
    out = PyBytes_FromStringAndSize(NULL, k.n * step);
    if (out == NULL) goto fail;
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < k.n; ++i, dst += step) {
        Py_ssize_t at;
        int is_null;
        ColSpec *c = key_column(&k, specs, col, i, &at, &is_null);
        if (c == NULL) goto fail;
        if (is_null) {
            memset(dst, 0, (size_t)step);
            if (nulls == NULL && (nulls = PyList_New(0)) == NULL) goto fail;
            PyObject *j = PyLong_FromSsize_t(i);
            if (j == NULL || PyList_Append(nulls, j) < 0) {
                Py_XDECREF(j);
                goto fail;
            }
            Py_DECREF(j);
            continue;
        }
        if (itemsize) {
            if (at >= c->a_len / itemsize) {
                PyErr_Format(PyExc_IndexError, "gather: row %lld is past the values", (long long)k.row[i]);
                goto fail;
            }
            memcpy(dst, c->a + at * itemsize, (size_t)itemsize);
        } else {
            if ((at >> 3) >= c->a_len) {
                PyErr_Format(PyExc_IndexError, "gather: row %lld is past the bits", (long long)k.row[i]);
                goto fail;
            }
            *dst = (c->a[at >> 3] >> (at & 7)) & 1;
        }
    }
    keys_close(&k);
    PyObject *result = Py_BuildValue("(NO)", out, nulls ? nulls : Py_None);
    Py_XDECREF(nulls);
    return result;
fail:
    Py_XDECREF(out);
    Py_XDECREF(nulls);
    keys_close(&k);
    return NULL;
}

/* gather_objects(lists, slots, rows) -> list: lists[slots[i]][rows[i]] for every key i (lists: a
 * tuple of lists; slots and rows: int64 arrays of one length). The values a ParquetSource holds as
 * Python objects (wide columns) are spread over hundreds of megabytes: the first pass finds each
 * and asks the CPU for its header, the second takes the references, by then mostly in the cache. */
static PyObject *py_gather_objects(PyObject *self, PyObject *args) {
    PyObject *lists, *slots, *rows;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OO", &PyTuple_Type, &lists, &slots, &rows)) return NULL;
    Py_buffer sv, rv;
    if (PyObject_GetBuffer(slots, &sv, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(rows, &rv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    PyObject *out = NULL;
    PyObject **found = NULL;
    if (sv.len != rv.len || sv.len % 8) {
        PyErr_SetString(PyExc_ValueError, "gather_objects: slots and rows must be int64 arrays of one length");
        goto done;
    }
    Py_ssize_t n = sv.len / 8, nlists = PyTuple_GET_SIZE(lists);
    const int64_t *slot = (const int64_t *)sv.buf, *row = (const int64_t *)rv.buf;
    found = (PyObject **)PyMem_Malloc((n ? (size_t)n : 1) * sizeof(PyObject *));
    if (found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* made before the first pass: no allocation (so no collection, no finalizer) runs between the
     * passes while found[] holds borrowed references */
    out = PyList_New(n);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; ++i) {
        if (slot[i] < 0 || slot[i] >= nlists) {
            PyErr_Format(PyExc_IndexError, "gather_objects: key %zd's list %lld is not one of %zd", i,
                         (long long)slot[i], nlists);
            goto done;
        }
        PyObject *list = PyTuple_GET_ITEM(lists, (Py_ssize_t)slot[i]);
        if (!PyList_Check(list)) {
            PyErr_Format(PyExc_TypeError, "gather_objects: lists[%lld] is not a list", (long long)slot[i]);
            goto done;
        }
        if (row[i] < 0 || row[i] >= PyList_GET_SIZE(list)) {
            PyErr_Format(PyExc_IndexError, "gather_objects: row %lld is past list %lld (%zd values)",
                         (long long)row[i], (long long)slot[i], PyList_GET_SIZE(list));
            goto done;
        }
        found[i] = PyList_GET_ITEM(list, (Py_ssize_t)row[i]);
#if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(found[i], 1);
#endif
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        Py_INCREF(found[i]);
        PyList_SET_ITEM(out, i, found[i]);
    }
done:
    if (PyErr_Occurred()) Py_CLEAR(out); /* a list of NULL items is safe to free */
    PyMem_Free(found);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&rv);
    return out;
}

static PyMethodDef methods[] = {
    {"chunk_records", py_chunk_records, METH_VARARGS,
     "chunk_records(buffer, base, begin, limit, verify) -> (num_records, sizes, sizes_frame, values) or None."},
    {"simd", py_simd, METH_VARARGS,
     "simd([on]) -> bool: whether hash64 uses the AVX2 loop (on=False: the portable one)."},
    {"small_chunks", py_small_chunks, METH_VARARGS,
     "small_chunks(buffer, base, begins, limits, verify) -> list: per chunk of one record, its bytes, "
     "zstd frames to decompress, or None."},
    {"gather_binary", py_gather_binary, METH_VARARGS,
     "gather_binary(specs, col, slots, rows, text, wide) -> list: each key's string (text) or bytes, or None."},
    {"gather_fixed", py_gather_fixed, METH_VARARGS,
     "gather_fixed(specs, col, slots, rows, itemsize) -> (bytes, nulls): each key's value bytes (0: a bit)."},
    {"gather_objects", py_gather_objects, METH_VARARGS,
     "gather_objects(lists, slots, rows) -> list: lists[slots[i]][rows[i]] for every key i."},
    {"hash64", py_hash64, METH_VARARGS,
     "hash64(data, k0, k1, k2, k3) -> the 64-bit HighwayHash of a bytes-like object."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_highway",
                                    "HighwayHash-64 and Riegeli chunks in C (see highway.py), and Arrow rows gathered (see parquet/gather.py).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__highway(void) {
#ifdef HAVE_AVX2_PATH
    __builtin_cpu_init();
    avx2_ok = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    return PyModule_Create(&module);
}
