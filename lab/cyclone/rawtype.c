#include "rawtype.h"

#include <stdlib.h>
#include <string.h>

#include "dds/dds.h"
#include "dds/ddsi/ddsi_serdata.h"
#include "dds/ddsi/ddsi_sertype.h"
#include "dds/ddsi/q_radmin.h"
#include "dds/ddsrt/heap.h"

struct rawserdata {
  struct ddsi_serdata c;
  uint32_t len;   /* payload bytes, encapsulation header included */
  int64_t sn;     /* RTPS writer sequence number, -1 if not received from the network */
  uint8_t *data;  /* len bytes, allocated rounded up to a multiple of 4 */
};

static struct rawserdata *rsd_new(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, size_t len) {
  struct rawserdata *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  ddsi_serdata_init(&d->c, type, kind);
  d->c.hash = type->serdata_basehash; /* keyless: every sample is the one instance */
  d->len = (uint32_t)len;
  d->sn = -1;
  d->data = calloc(1, ((len + 3) & ~(size_t)3) + 4);
  if (!d->data) { free(d); return NULL; }
  return d;
}

static bool sd_eqkey(const struct ddsi_serdata *a, const struct ddsi_serdata *b) { (void)a; (void)b; return true; }
static uint32_t sd_get_size(const struct ddsi_serdata *d) { return ((const struct rawserdata *)d)->len; }

/* Reads the writerSN of the DATA / DATA_FRAG submessage the first fragment came in.
 * Both submessages start: id(1) flags(1) length(2) extraFlags(2) octetsToInlineQos(2)
 * readerId(4) writerId(4) writerSN(8 = int32 high, uint32 low); flags bit 0 = little endian. */
static int64_t writer_sn_of(const struct nn_rdata *frag) {
  if (frag->submsg_zoff == 0) return -1;
  const unsigned char *sm = NN_RMSG_PAYLOADOFF(frag->rmsg, NN_RDATA_SUBMSG_OFF(frag));
  if (sm[0] != 0x15 && sm[0] != 0x16) return -1; /* DATA, DATA_FRAG */
  uint32_t hi, lo;
  memcpy(&hi, sm + 16, 4);
  memcpy(&lo, sm + 20, 4);
  if (!(sm[1] & 1)) { hi = __builtin_bswap32(hi); lo = __builtin_bswap32(lo); }
  return ((int64_t)(int32_t)hi << 32) | lo;
}

static struct ddsi_serdata *sd_from_ser(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind,
                                        const struct nn_rdata *fragchain, size_t size) {
  struct rawserdata *d = rsd_new(type, kind, size);
  if (!d) return NULL;
  d->sn = writer_sn_of(fragchain);
  uint32_t off = 0;
  for (const struct nn_rdata *f = fragchain; f; f = f->nextfrag) {
    if (f->maxp1 > off && off < size) {
      const unsigned char *payload = NN_RMSG_PAYLOADOFF(f->rmsg, NN_RDATA_PAYLOAD_OFF(f));
      uint32_t end = f->maxp1 > size ? (uint32_t)size : f->maxp1;
      memcpy(d->data + off, payload + (off - f->min), end - off);
      off = end;
    }
  }
  return &d->c;
}

static struct ddsi_serdata *sd_from_ser_iov(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind,
                                            ddsrt_msg_iovlen_t niov, const ddsrt_iovec_t *iov, size_t size) {
  struct rawserdata *d = rsd_new(type, kind, size);
  if (!d) return NULL;
  size_t off = 0;
  for (ddsrt_msg_iovlen_t i = 0; i < niov && off < size; i++) {
    size_t n = iov[i].iov_len;
    if (off + n > size) n = size - off;
    memcpy(d->data + off, iov[i].iov_base, n);
    off += n;
  }
  return &d->c;
}

static struct ddsi_serdata *sd_from_keyhash(const struct ddsi_sertype *type, const struct ddsi_keyhash *kh) {
  (void)kh;
  struct rawserdata *d = rsd_new(type, SDK_KEY, 0);
  return d ? &d->c : NULL;
}

static struct ddsi_serdata *sd_from_sample(const struct ddsi_sertype *type, enum ddsi_serdata_kind kind, const void *sample) {
  const rawsample *s = sample;
  size_t len = kind == SDK_DATA ? s->len : 0;
  struct rawserdata *d = rsd_new(type, kind, len);
  if (!d) return NULL;
  if (len) memcpy(d->data, s->buf, len);
  return &d->c;
}

static void sd_to_ser(const struct ddsi_serdata *dcmn, size_t off, size_t sz, void *buf) {
  const struct rawserdata *d = (const struct rawserdata *)dcmn;
  memcpy(buf, d->data + off, sz);
}

static struct ddsi_serdata *sd_to_ser_ref(const struct ddsi_serdata *dcmn, size_t off, size_t sz, ddsrt_iovec_t *ref) {
  const struct rawserdata *d = (const struct rawserdata *)dcmn;
  ref->iov_base = d->data + off;
  ref->iov_len = (ddsrt_iov_len_t)sz;
  return ddsi_serdata_ref(dcmn);
}

static void sd_to_ser_unref(struct ddsi_serdata *d, const ddsrt_iovec_t *ref) {
  (void)ref;
  ddsi_serdata_unref(d);
}

static bool sd_to_sample(const struct ddsi_serdata *dcmn, void *sample, void **bufptr, void *buflim) {
  (void)bufptr; (void)buflim;
  const struct rawserdata *d = (const struct rawserdata *)dcmn;
  rawsample *s = sample;
  s->buf = NULL;
  s->len = d->len;
  s->sn = d->sn;
  memset(s->head, 0, sizeof s->head);
  memcpy(s->head, d->data, d->len < RAWSAMPLE_HEAD ? d->len : RAWSAMPLE_HEAD);
  return true;
}

static struct ddsi_serdata *sd_to_untyped(const struct ddsi_serdata *dcmn) {
  struct rawserdata *d = rsd_new(dcmn->type, SDK_KEY, 0);
  if (!d) return NULL;
  d->c.type = NULL;
  return &d->c;
}

static bool sd_untyped_to_sample(const struct ddsi_sertype *type, const struct ddsi_serdata *d, void *sample,
                                 void **bufptr, void *buflim) {
  (void)type; (void)d; (void)bufptr; (void)buflim;
  rawsample *s = sample;
  memset(s, 0, sizeof *s);
  s->sn = -1;
  return true;
}

static void sd_free(struct ddsi_serdata *dcmn) {
  struct rawserdata *d = (struct rawserdata *)dcmn;
  free(d->data);
  free(d);
}

static size_t sd_print(const struct ddsi_sertype *type, const struct ddsi_serdata *dcmn, char *buf, size_t size) {
  (void)type;
  const struct rawserdata *d = (const struct rawserdata *)dcmn;
  return (size_t)snprintf(buf, size, "raw %u bytes sn %lld", d->len, (long long)d->sn);
}

static void sd_get_keyhash(const struct ddsi_serdata *d, struct ddsi_keyhash *buf, bool force_md5) {
  (void)d; (void)force_md5;
  memset(buf, 0, sizeof *buf);
}

static const struct ddsi_serdata_ops rawserdata_ops = {
  .eqkey = sd_eqkey,
  .get_size = sd_get_size,
  .from_ser = sd_from_ser,
  .from_ser_iov = sd_from_ser_iov,
  .from_keyhash = sd_from_keyhash,
  .from_sample = sd_from_sample,
  .to_ser = sd_to_ser,
  .to_ser_ref = sd_to_ser_ref,
  .to_ser_unref = sd_to_ser_unref,
  .to_sample = sd_to_sample,
  .to_untyped = sd_to_untyped,
  .untyped_to_sample = sd_untyped_to_sample,
  .free = sd_free,
  .print = sd_print,
  .get_keyhash = sd_get_keyhash,
};

static void st_free(struct ddsi_sertype *tp) {
  ddsi_sertype_fini(tp);
  free(tp);
}
static void st_zero_samples(const struct ddsi_sertype *tp, void *samples, size_t count) {
  (void)tp;
  memset(samples, 0, count * sizeof(rawsample));
}
static void st_realloc_samples(void **ptrs, const struct ddsi_sertype *tp, void *old, size_t oldcount, size_t count) {
  (void)tp;
  rawsample *n = realloc(old, count * sizeof(rawsample));
  if (n && count > oldcount) memset(n + oldcount, 0, (count - oldcount) * sizeof(rawsample));
  for (size_t i = 0; i < count; i++) ptrs[i] = n ? &n[i] : NULL;
}
static void st_free_samples(const struct ddsi_sertype *tp, void **ptrs, size_t count, dds_free_op_t op) {
  (void)tp; (void)count;
  if ((op & DDS_FREE_ALL_BIT) && ptrs && ptrs[0]) free(ptrs[0]);
}
static bool st_equal(const struct ddsi_sertype *a, const struct ddsi_sertype *b) { (void)a; (void)b; return true; }
static uint32_t st_hash(const struct ddsi_sertype *tp) { (void)tp; return 0x7a11ab5u; }
static size_t st_get_serialized_size(const struct ddsi_sertype *tp, const void *sample) {
  (void)tp;
  return ((const rawsample *)sample)->len;
}
static bool st_serialize_into(const struct ddsi_sertype *tp, const void *sample, void *dst, size_t sz) {
  (void)tp;
  const rawsample *s = sample;
  if (sz < s->len) return false;
  memcpy(dst, s->buf, s->len);
  return true;
}

static const struct ddsi_sertype_ops rawtype_ops = {
  .version = ddsi_sertype_v0,
  .arg = NULL,
  .free = st_free,
  .zero_samples = st_zero_samples,
  .realloc_samples = st_realloc_samples,
  .free_samples = st_free_samples,
  .equal = st_equal,
  .hash = st_hash,
  .get_serialized_size = st_get_serialized_size,
  .serialize_into = st_serialize_into,
};

struct ddsi_sertype *rawtype_new(const char *dds_type_name) {
  struct ddsi_sertype *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  ddsi_sertype_init(st, dds_type_name, &rawtype_ops, &rawserdata_ops, true);
  return st;
}
