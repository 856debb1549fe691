#define _GNU_SOURCE
#include "nodecfg.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --node NAME --host HOST --truth FILE [--content pattern|zeros|random] [--domain N]\n"
          "          [--pub SPEC]... [--sub SPEC]... [--relay SPEC]... [--check] [--ready-timeout S]\n"
          "          [--iface-ip ADDR] [--tracing humble|jazzy] | --list-types | --version\n"
          "SPEC: comma-separated key=value (see lab/common/nodecfg.h and docs/lab.md)\n",
          prog);
}

static int parse_u64(const char *s, uint64_t *v) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno || *s == '\0' || *end != '\0' || *s == '-') return -1;
  *v = x;
  return 0;
}
static int parse_f64(const char *s, double *v) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (errno || *s == '\0' || *end != '\0') return -1;
  *v = x;
  return 0;
}

static int parse_spec(node_spec *sp, spec_kind kind, const char *text) {
  memset(sp, 0, sizeof *sp);
  sp->kind = kind;
  sp->reliable = 1;
  sp->depth = 10;
  sp->ratio = 1.0;
  sp->expect = 0;
  sp->domain = -1;
  int have_bytes = 0;
  char *dup = strdup(text), *save = NULL;
  const char *what = kind == SPEC_PUB ? "--pub" : kind == SPEC_SUB ? "--sub" : "--relay";
  for (char *kv = strtok_r(dup, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq) { fprintf(stderr, "error: %s %s: %s is not key=value\n", what, text, kv); goto fail; }
    *eq = '\0';
    const char *k = kv, *v = eq + 1;
    uint64_t u;
    double d;
    if (!strcmp(k, "topic")) snprintf(sp->topic, sizeof sp->topic, "%s", v);
    else if (!strcmp(k, "type")) snprintf(sp->type_name, sizeof sp->type_name, "%s", v);
    else if (!strcmp(k, "input") && kind == SPEC_RELAY) snprintf(sp->input, sizeof sp->input, "%s", v);
    else if (!strcmp(k, "bytes") && kind != SPEC_SUB && !parse_u64(v, &u)) { sp->bytes = (size_t)u; have_bytes = 1; }
    else if (!strcmp(k, "rate") && kind == SPEC_PUB && !parse_f64(v, &d) && d > 0) sp->rate_hz = d;
    else if (!strcmp(k, "burst_every") && kind == SPEC_PUB && !parse_u64(v, &u)) sp->burst_every = u;
    else if (!strcmp(k, "burst_count") && kind == SPEC_PUB && !parse_u64(v, &u)) sp->burst_count = u;
    else if (!strcmp(k, "reliability") && (!strcmp(v, "reliable") || !strcmp(v, "best_effort"))) sp->reliable = !strcmp(v, "reliable");
    else if (!strcmp(k, "depth") && !parse_u64(v, &u) && u >= 1 && u <= 100000) sp->depth = (int)u;
    else if ((!strcmp(k, "readers") || !strcmp(k, "writers")) && !parse_u64(v, &u) && u <= 100000) sp->expect = (int)u;
    else if (!strcmp(k, "ratio") && kind == SPEC_RELAY && !parse_f64(v, &d) && d > 0 && d <= 1) sp->ratio = d;
    else if (!strcmp(k, "delay_ns") && kind == SPEC_RELAY && !parse_u64(v, &u)) sp->delay_ns = (int64_t)u;
    else if (!strcmp(k, "slow_every") && kind == SPEC_RELAY && !parse_u64(v, &u)) sp->slow_every = u;
    else if (!strcmp(k, "slow_ns") && kind == SPEC_RELAY && !parse_u64(v, &u)) sp->slow_ns = (int64_t)u;
    else if (!strcmp(k, "domain") && kind == SPEC_RELAY && !parse_u64(v, &u) && u <= 232) sp->domain = (int)u;
    else if (!strcmp(k, "compute") && kind == SPEC_RELAY && (!strcmp(v, "sleep") || !strcmp(v, "spin"))) sp->spin = !strcmp(v, "spin");
    else { fprintf(stderr, "error: %s %s: bad or unknown key %s=%s\n", what, text, k, v); goto fail; }
  }
  if (sp->topic[0] != '/') { fprintf(stderr, "error: %s %s: topic must start with '/'\n", what, text); goto fail; }
  if (kind == SPEC_RELAY && sp->input[0] != '/') { fprintf(stderr, "error: %s %s: input topic missing\n", what, text); goto fail; }
  if (kind == SPEC_PUB && sp->rate_hz <= 0) { fprintf(stderr, "error: %s %s: rate missing\n", what, text); goto fail; }
  if (sp->burst_every && (sp->burst_count < 2 || sp->burst_count > sp->burst_every)) {
    fprintf(stderr, "error: %s %s: burst_count must lie between 2 and burst_every\n", what, text);
    goto fail;
  }
  if (kind != SPEC_SUB && !have_bytes) { fprintf(stderr, "error: %s %s: bytes missing\n", what, text); goto fail; }
  if (!sp->type_name[0]) snprintf(sp->type_name, sizeof sp->type_name, "std_msgs/msg/UInt8MultiArray");
  sp->type = rosmsg_find(sp->type_name);
  if (!sp->type) { fprintf(stderr, "error: %s %s: unknown message type %s (see --list-types)\n", what, text, sp->type_name); goto fail; }
  /* ROS 2 topic "/a/b" is "rt/a/b" on the wire */
  memcpy(sp->dds_topic, "rt", 2);
  memcpy(sp->dds_topic + 2, sp->topic, strlen(sp->topic) + 1);
  free(dup);
  return 0;
fail:
  free(dup);
  return -1;
}

int nodecfg_parse(node_config *cfg, int argc, char **argv) {
  memset(cfg, 0, sizeof *cfg);
  cfg->ready_timeout_s = 30.0;
  snprintf(cfg->node, sizeof cfg->node, "node");
  snprintf(cfg->host, sizeof cfg->host, "host");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout, argv[0]); return 1; }
    if (!strcmp(a, "--list-types")) { rosmsg_list(stdout); return 1; }
    if (!strcmp(a, "--check")) { cfg->check_only = 1; continue; }
    if (!v) { fprintf(stderr, "error: %s needs a value\n", a); return -1; }
    i++;
    if (!strcmp(a, "--node")) snprintf(cfg->node, sizeof cfg->node, "%s", v);
    else if (!strcmp(a, "--host")) snprintf(cfg->host, sizeof cfg->host, "%s", v);
    else if (!strcmp(a, "--truth")) snprintf(cfg->truth, sizeof cfg->truth, "%s", v);
    else if (!strcmp(a, "--iface-ip")) snprintf(cfg->iface_ip, sizeof cfg->iface_ip, "%s", v);
    else if (!strcmp(a, "--domain")) {
      uint64_t d;
      if (parse_u64(v, &d) || d > 232) { fprintf(stderr, "error: bad --domain %s\n", v); return -1; }
      cfg->domain = (int)d;
    }
    else if (!strcmp(a, "--tracing")) {
      if (strcmp(v, "humble") != 0 && strcmp(v, "jazzy") != 0) { fprintf(stderr, "error: --tracing must be humble or jazzy, not %s\n", v); return -1; }
      snprintf(cfg->tracing, sizeof cfg->tracing, "%s", v);
    }
    else if (!strcmp(a, "--run-id")) { /* only tags the command line so a run's processes can be found */ }
    else if (!strcmp(a, "--ready-timeout")) {
      if (parse_f64(v, &cfg->ready_timeout_s) || cfg->ready_timeout_s <= 0) { fprintf(stderr, "error: bad --ready-timeout %s\n", v); return -1; }
    } else if (!strcmp(a, "--content")) {
      if (!strcmp(v, "pattern")) cfg->content = CONTENT_PATTERN;
      else if (!strcmp(v, "zeros")) cfg->content = CONTENT_ZEROS;
      else if (!strcmp(v, "random")) cfg->content = CONTENT_RANDOM;
      else { fprintf(stderr, "error: --content must be pattern, zeros or random, not %s\n", v); return -1; }
    } else if (!strcmp(a, "--pub") || !strcmp(a, "--sub") || !strcmp(a, "--relay")) {
      if (cfg->nspecs >= NODECFG_MAX) { fprintf(stderr, "error: more than %d topics in one node\n", NODECFG_MAX); return -1; }
      spec_kind k = !strcmp(a, "--pub") ? SPEC_PUB : !strcmp(a, "--sub") ? SPEC_SUB : SPEC_RELAY;
      if (parse_spec(&cfg->specs[cfg->nspecs], k, v)) return -1;
      cfg->nspecs++;
    } else { fprintf(stderr, "error: unknown option %s\n", a); usage(stderr, argv[0]); return -1; }
  }
  if (!cfg->check_only && !cfg->truth[0]) { fprintf(stderr, "error: --truth FILE is required\n"); return -1; }
  /* every relay input must be subscribed */
  for (int i = 0; i < cfg->nspecs; i++) {
    node_spec *r = &cfg->specs[i];
    if (r->kind != SPEC_RELAY) continue;
    int found = 0;
    for (int j = 0; j < cfg->nspecs; j++)
      if (cfg->specs[j].kind == SPEC_SUB && !strcmp(cfg->specs[j].topic, r->input)) found = 1;
    if (!found) { fprintf(stderr, "error: relay input %s has no --sub in this node\n", r->input); return -1; }
  }
  return 0;
}

int nodecfg_build(node_config *cfg) {
  for (int i = 0; i < cfg->nspecs; i++) {
    node_spec *sp = &cfg->specs[i];
    if (sp->kind == SPEC_SUB) continue;
    if (sp->bytes == 0) {
      /* an empty serialized payload: no encapsulation header, no stamp, no counter */
      memset(&sp->msg, 0, sizeof sp->msg);
      continue;
    }
    unsigned n = 0, m = 0;
    size_t below = 0, above = 0;
    if (rosmsg_solve(sp->type, sp->bytes, &n, &m, &below, &above)) {
      fprintf(stderr, "error: topic %s: %s cannot be serialised to exactly %zu bytes; nearest sizes: %zu and %zu\n",
              sp->topic, rosmsg_ros_name(sp->type), sp->bytes, below, above);
      return -1;
    }
    if (rosmsg_build(sp->type, n, m, cfg->content, 0x1234567ull + (uint64_t)i, &sp->msg)) {
      fprintf(stderr, "error: topic %s: out of memory building a %zu-byte sample\n", sp->topic, sp->bytes);
      return -1;
    }
  }
  return 0;
}

int64_t now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t now_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

instant_ns now_instant(void) {
  instant_ns i;
  i.rt_ns = now_realtime_ns();
  i.mono_ns = now_monotonic_ns();
  return i;
}

int64_t current_tid(void) { return (int64_t)gettid(); }

void sleep_until_realtime(int64_t t_ns, volatile int *stop) {
  /* sleep in slices of at most 100 ms so that a stop request is seen quickly */
  for (;;) {
    if (stop && *stop) return;
    int64_t now = now_realtime_ns();
    if (now >= t_ns) return;
    int64_t target = t_ns - now > 100000000 ? now + 100000000 : t_ns;
    struct timespec ts = {.tv_sec = target / 1000000000, .tv_nsec = target % 1000000000};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      if (stop && *stop) return;
    }
  }
}

int64_t relay_compute_ns(const node_spec *sp, int64_t sn) {
  if (sp->slow_every > 0 && sn > 0 && (uint64_t)sn % sp->slow_every == 0) return sp->slow_ns;
  return sp->delay_ns;
}

void compute_for(int64_t d_ns, int spin) {
  if (d_ns <= 0) return;
  if (spin) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int64_t end = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec + d_ns;
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((int64_t)b.tv_sec * 1000000000 + b.tv_nsec < end);
  } else {
    struct timespec ts = {.tv_sec = d_ns / 1000000000, .tv_nsec = d_ns % 1000000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
  }
}

void guid_hex(const uint8_t g[16], char out[33]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) { out[2 * i] = hx[g[i] >> 4]; out[2 * i + 1] = hx[g[i] & 15]; }
  out[32] = '\0';
}

/* Names in the ground truth are written into JSON strings: escape what JSON requires. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') { fputc('\\', f); fputc(ch, f); }
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

int truth_open(truth_log *t, const char *path, const char *host, const char *node) {
  memset(t, 0, sizeof *t);
  t->f = fopen(path, "w");
  if (!t->f) return -1;
  setvbuf(t->f, NULL, _IOFBF, 1 << 20);
  pthread_mutex_init(&t->lock, NULL);
  snprintf(t->host, sizeof t->host, "%s", host);
  snprintf(t->node, sizeof t->node, "%s", node);
  return 0;
}

static void truth_head(truth_log *t, const char *event, int64_t t_ns, const char *topic) {
  fprintf(t->f, "{\"event\":\"%s\",\"t_ns\":%lld,\"host\":", event, (long long)t_ns);
  json_str(t->f, t->host);
  fputs(",\"node\":", t->f);
  json_str(t->f, t->node);
  fputs(",\"topic\":", t->f);
  json_str(t->f, topic);
}

static void truth_instant(FILE *f, const char *name, instant_ns i) {
  fprintf(f, ",\"%s_ns\":%lld,\"%s_mono_ns\":%lld", name, (long long)i.rt_ns, name, (long long)i.mono_ns);
}

void truth_publish(truth_log *t, int64_t t_ns, const char *topic, const char *writer_guid, int64_t seq, size_t size,
                   const char *src_writer_guid, int64_t src_seq, const truth_pub_trace *tr) {
  pthread_mutex_lock(&t->lock);
  truth_head(t, "publish", t_ns, topic);
  fprintf(t->f, ",\"writer_guid\":\"%s\",\"seq\":%lld,\"size\":%zu", writer_guid, (long long)seq, size);
  if (src_writer_guid) fprintf(t->f, ",\"src_writer_guid\":\"%s\",\"src_seq\":%lld", src_writer_guid, (long long)src_seq);
  if (tr) {
    fprintf(t->f, ",\"source_ts_ns\":%lld", (long long)tr->rmw_publish.rt_ns);
    truth_instant(t->f, "rclcpp_publish", tr->rclcpp_publish);
    truth_instant(t->f, "rmw_publish", tr->rmw_publish);
    fprintf(t->f, ",\"tid\":%lld", (long long)tr->tid);
  }
  fputs("}\n", t->f);
  t->lines++;
  pthread_mutex_unlock(&t->lock);
}

void truth_receive(truth_log *t, int64_t t_ns, const char *topic, const char *writer_guid, int64_t seq, size_t size,
                   int64_t source_ts_ns, const truth_recv_trace *tr) {
  pthread_mutex_lock(&t->lock);
  truth_head(t, "receive", t_ns, topic);
  fprintf(t->f, ",\"writer_guid\":\"%s\",\"seq\":%lld,\"size\":%zu,\"source_ts_ns\":%lld", writer_guid,
          (long long)seq, size, (long long)source_ts_ns);
  if (tr) {
    truth_instant(t->f, "rmw_take", tr->rmw_take);
    truth_instant(t->f, "callback_start", tr->callback_start);
    truth_instant(t->f, "callback_end", tr->callback_end);
    fprintf(t->f, ",\"tid\":%lld", (long long)tr->tid);
  }
  fputs("}\n", t->f);
  t->lines++;
  pthread_mutex_unlock(&t->lock);
}

void truth_close(truth_log *t) {
  if (!t->f) return;
  pthread_mutex_lock(&t->lock);
  fflush(t->f);
  fsync(fileno(t->f));
  fclose(t->f);
  t->f = NULL;
  pthread_mutex_unlock(&t->lock);
}

int read_control_line(char *buf, size_t cap, int timeout_ms) {
  /* stdin is read byte-wise so that nothing is buffered behind our back */
  struct pollfd p = {.fd = 0, .events = POLLIN};
  size_t len = 0;
  int r = poll(&p, 1, timeout_ms);
  if (r == 0) return 0;
  if (r < 0) return errno == EINTR ? 0 : -1;
  for (;;) {
    char ch;
    ssize_t k = read(0, &ch, 1);
    if (k == 0) return len ? 1 : -1;
    if (k < 0) { if (errno == EINTR) continue; return -1; }
    if (ch == '\n') break;
    if (len + 1 < cap) buf[len++] = ch;
  }
  buf[len] = '\0';
  return 1;
}
