/* ddslab-cyclone: one emulated ROS 2 node on Cyclone DDS (C API).
 *
 * Publishes periodic topics, subscribes, and relays (receive -> compute ->
 * publish) exactly as configured on the command line (see
 * lab/common/nodecfg.h), and records every sample it publishes or receives in
 * a JSON-lines ground-truth file (docs/lab.md). With --tracing it also plays
 * the ROS 2 layers above DDS: rclcpp / rcl / rmw_cyclonedds's tracepoints
 * (lab/common/nodetrace.h), the receive path shaped like rclcpp's executor
 * (one sample per take, the callback on the thread that took it). */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dds/dds.h"
#include "dds/version.h"
#include "nodecfg.h"
#include "nodetrace.h"
#include "rawtype.h"

static volatile int g_stop = 0;    /* stop publishing and exit */
static volatile int g_rx_stop = 0; /* stop the receive loop */
static int64_t g_t0 = 0, g_tstop = 0;
static truth_log g_truth;
static node_config g_cfg;

typedef struct {
  node_spec *spec;
  dds_entity_t writer;
  char guid[33];
  uint64_t published;
  uint64_t failed;
  double credit;
  pthread_t th;
  int started;
  nt_publisher nt;
} outlet;

typedef struct {
  dds_instance_handle_t handle;
  char guid[33];
} writer_id;

typedef struct {
  node_spec *spec;
  dds_entity_t reader;
  uint64_t received;
  writer_id writers[256];
  int nwriters;
  outlet *relays[NODECFG_MAX];
  int nrelays;
  nt_subscription nt;
} inlet;

static outlet g_out[NODECFG_MAX];
static int g_nout = 0;
static inlet g_in[NODECFG_MAX];
static int g_nin = 0;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static const char *die_prefix(void) { return g_cfg.node[0] ? g_cfg.node : "ddslab-cyclone"; }

static dds_entity_t get_topic(dds_entity_t pp, node_spec *sp) {
  static struct { char name[260]; char type[160]; dds_entity_t t, pp; } topics[NODECFG_MAX];
  static int ntopics = 0;
  for (int i = 0; i < ntopics; i++) {
    if (topics[i].pp == pp && !strcmp(topics[i].name, sp->dds_topic)) {
      if (strcmp(topics[i].type, rosmsg_dds_name(sp->type)) != 0) {
        fprintf(stderr, "%s: error: topic %s used with two types (%s and %s)\n", die_prefix(), sp->topic, topics[i].type,
                rosmsg_dds_name(sp->type));
        exit(2);
      }
      return topics[i].t;
    }
  }
  struct ddsi_sertype *st = rawtype_new(rosmsg_dds_name(sp->type));
  dds_entity_t t = dds_create_topic_sertype(pp, sp->dds_topic, &st, NULL, NULL, NULL);
  if (t < 0) {
    fprintf(stderr, "%s: error: cannot create topic %s: %s\n", die_prefix(), sp->dds_topic, dds_strretcode(t));
    exit(3);
  }
  snprintf(topics[ntopics].name, sizeof topics[ntopics].name, "%s", sp->dds_topic);
  topics[ntopics].pp = pp;
  snprintf(topics[ntopics].type, sizeof topics[ntopics].type, "%s", rosmsg_dds_name(sp->type));
  topics[ntopics].t = t;
  ntopics++;
  return t;
}

/* ROS 2 default QoS: reliable, volatile, keep last 10 (or what the scenario says). */
static dds_qos_t *endpoint_qos(const node_spec *sp, int writer) {
  dds_qos_t *q = dds_create_qos();
  dds_qset_reliability(q, sp->reliable ? DDS_RELIABILITY_RELIABLE : DDS_RELIABILITY_BEST_EFFORT, DDS_SECS(10));
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, sp->depth);
  dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
  if (writer) dds_qset_writer_data_lifecycle(q, false);
  return q;
}

static void publish_one(outlet *o, const char *src_guid, int64_t src_seq) {
  rosmsg *msg = &o->spec->msg;
  int64_t t;
  truth_pub_trace tr;
  if (nt_on) {
    /* the user fills the message, then rclcpp::Publisher::publish -> rcl_publish ->
     * rmw_publish, which (rmw_cyclonedds >= 2.1, Jazzy) takes tstamp = dds_time(),
     * records rmw_publish with it and writes the sample with dds_write_ts(..., tstamp);
     * Humble's records rmw_publish { message } and then dds_write() stamps the sample */
    rosmsg_set_stamp(msg, now_realtime_ns());
    rosmsg_set_counter(msg, o->published + 1);
    NT_TRACE(tr.rclcpp_publish, nt_api.rclcpp_publish(&o->nt.rcl, msg->buf));
    nt_api.rcl_publish(&o->nt.rcl, msg->buf);
    uint64_t mark = nt_clock_mark();
    if (nt_api.distro[0] == 'j') {
      /* Jazzy: the rmw takes the stamp, records it in rmw_publish, writes with it */
      tr.rmw_publish.rt_ns = t = now_realtime_ns();
      nt_api.rmw_publish(&o->nt.rmw, msg->buf, t);
      tr.rmw_publish.mono_ns = nt_event_mono(mark);
    } else {
      /* Humble/Iron: TRACEPOINT(rmw_publish, msg) first; the DDS write stamps the sample after it */
      nt_api.rmw_publish(&o->nt.rmw, msg->buf, 0);
      tr.rmw_publish.mono_ns = nt_event_mono(mark);
      tr.rmw_publish.rt_ns = t = now_realtime_ns();
    }
  } else {
    t = now_realtime_ns();
    rosmsg_set_stamp(msg, t);
    rosmsg_set_counter(msg, o->published + 1);
  }
  rawsample s;
  memset(&s, 0, sizeof s);
  s.buf = msg->buf;
  s.len = (uint32_t)msg->size;
  dds_return_t rc = dds_write_ts(o->writer, &s, t);
  if (rc == DDS_RETCODE_OK) {
    o->published++;
    if (nt_on) tr.tid = current_tid();
    truth_publish(&g_truth, t, o->spec->topic, o->guid, (int64_t)o->published, msg->size, src_guid, src_seq,
                  nt_on ? &tr : NULL);
  } else {
    o->failed++;
    if (o->failed <= 5) fprintf(stderr, "%s: write on %s failed: %s\n", die_prefix(), o->spec->topic, dds_strretcode(rc));
  }
}

static void *pub_thread(void *arg) {
  outlet *o = arg;
  const double period_ns = 1e9 / o->spec->rate_hz;
  for (uint64_t k = 0; !g_stop; k++) {
    int64_t due = g_t0 + (int64_t)llround((double)k * period_ns);
    if (due >= g_tstop) break;
    sleep_until_realtime(due, &g_stop);
    if (g_stop) break;
    /* the timer callback of a ROS 2 publisher node; late? publish at once: the mean rate is what the scenario asks for */
    if (nt_on) nt_api.callback_start(&o->nt.timer_cb, 0);
    publish_one(o, NULL, -1);
    /* an injected sender burst: the next burst_count - 1 samples at once, their periods skipped */
    if (o->spec->burst_every && k % o->spec->burst_every == 0)
      for (uint64_t b = 1; b < o->spec->burst_count && !g_stop; b++, k++) publish_one(o, NULL, -1);
    if (nt_on) nt_api.callback_end(&o->nt.timer_cb);
  }
  return NULL;
}

static const char *writer_guid_of(inlet *in, dds_instance_handle_t h) {
  for (int i = 0; i < in->nwriters; i++)
    if (in->writers[i].handle == h) return in->writers[i].guid;
  dds_builtintopic_endpoint_t *ep = dds_get_matched_publication_data(in->reader, h);
  static char unknown[33] = "00000000000000000000000000000000";
  if (!ep) return unknown;
  writer_id *w = &in->writers[in->nwriters < 256 ? in->nwriters++ : 255];
  w->handle = h;
  guid_hex(ep->key.v, w->guid);
  dds_builtintopic_free_endpoint(ep);
  return w->guid;
}

/* rmw_take of rmw_cyclonedds: one sample per take, skipping invalid samples
 * (instance state changes); 0 if no valid sample was there. */
static int take_one(inlet *in, rawsample *s, dds_sample_info_t *info) {
  void *ptr = s;
  for (;;) {
    dds_return_t n = dds_take(in->reader, &ptr, info, 1, 1);
    if (n <= 0) return 0;
    if (info->valid_data) return 1;
  }
}

/* One taken sample: rmw_take -> rcl_take -> rclcpp_take -> the subscription
 * callback (where relays compute and publish), on this thread. */
static void on_sample(inlet *in, const rawsample *s, const dds_sample_info_t *info) {
  const char *guid = writer_guid_of(in, info->publication_handle);
  truth_recv_trace tr;
  if (nt_on) {
    NT_TRACE(tr.rmw_take, nt_api.rmw_take(&in->nt.rmw, s, info->source_timestamp, 1));
    nt_api.rcl_take(s);
    nt_api.rclcpp_take(s);
    NT_TRACE(tr.callback_start, nt_api.callback_start(&in->nt.callback, 0));
  } else {
    tr.rmw_take.rt_ns = now_realtime_ns();
  }
  /* t_ns: the take returned the sample (rmw_take.rt_ns) */
  in->received++;
  for (int r = 0; r < in->nrelays; r++) {
    outlet *o = in->relays[r];
    o->credit += o->spec->ratio;
    if (o->credit >= 1.0 - 1e-9) {
      o->credit -= 1.0;
      compute_for(relay_compute_ns(o->spec, s->sn), o->spec->spin);
      publish_one(o, guid, s->sn);
    }
  }
  if (nt_on) {
    NT_TRACE(tr.callback_end, nt_api.callback_end(&in->nt.callback));
    tr.tid = current_tid();
  }
  truth_receive(&g_truth, tr.rmw_take.rt_ns, in->spec->topic, guid, s->sn, s->len, info->source_timestamp,
                nt_on ? &tr : NULL);
}

/* What rclcpp's executor does for a subscription the wait set reported ready,
 * repeated while samples remain (rclcpp's next wait would return at once).
 * A ready reader whose first take finds no valid sample is an empty take. */
static void drain(inlet *in, int ready) {
  rawsample s;
  dds_sample_info_t info;
  for (int k = 0;; k++) {
    if (!take_one(in, &s, &info)) {
      if (k == 0 && ready) nt_take_nothing(&in->nt, &s);
      return;
    }
    on_sample(in, &s, &info);
  }
}

static void *rx_thread(void *arg) {
  dds_entity_t ws = *(dds_entity_t *)arg;
  dds_attach_t ready[NODECFG_MAX];
  while (!g_rx_stop) {
    if (g_nin == 0) {
      /* a waitset with nothing attached returns at once: do not spin */
      usleep(100000);
      continue;
    }
    dds_return_t n = dds_waitset_wait(ws, ready, NODECFG_MAX, DDS_MSECS(100));
    for (dds_return_t k = 0; k < n && k < NODECFG_MAX; k++) {
      if (ready[k] < (dds_attach_t)g_nin) drain(&g_in[ready[k]], 1);
    }
  }
  for (int i = 0; i < g_nin; i++) drain(&g_in[i], 0);
  return NULL;
}

/* The participant of another domain (a relay bridging domains publishes its output there):
 * one per domain, created on first use with the same user data as the node's own. */
static dds_entity_t g_pp_main;
static struct { int domain; dds_entity_t pp; } g_pp_other[NODECFG_MAX];
static int g_npp_other = 0;
static dds_entity_t participant_for(int domain) {
  if (domain < 0 || domain == g_cfg.domain) return g_pp_main;
  for (int i = 0; i < g_npp_other; i++)
    if (g_pp_other[i].domain == domain) return g_pp_other[i].pp;
  dds_qos_t *pq = dds_create_qos();
  const char *ud = "enclave=/;";
  dds_qset_userdata(pq, ud, strlen(ud));
  dds_entity_t pp = dds_create_participant((dds_domainid_t)domain, pq, NULL);
  dds_delete_qos(pq);
  if (pp < 0) {
    fprintf(stderr, "%s: error: cannot create a participant in domain %d: %s\n", die_prefix(), domain, dds_strretcode(pp));
    exit(3);
  }
  g_pp_other[g_npp_other].domain = domain;
  g_pp_other[g_npp_other++].pp = pp;
  fprintf(stderr, "%s: participant in domain %d for bridged outputs\n", die_prefix(), domain);
  return pp;
}

/* Waits until the participant has discovered `expect` writers of the reader's topic. */
static int wait_for_remote_writers(dds_entity_t pp, const node_spec *sp) {
  static dds_entity_t pubs = 0;
  if (sp->expect == 0) return 0;
  if (pubs == 0) pubs = dds_create_reader(pp, DDS_BUILTIN_TOPIC_DCPSPUBLICATION, NULL, NULL);
  int64_t deadline = now_realtime_ns() + (int64_t)(g_cfg.ready_timeout_s * 1e9);
  int seen = 0;
  while (!g_stop) {
    void *buf[256] = {NULL};
    dds_sample_info_t si[256];
    dds_return_t n = dds_read(pubs, buf, si, 256, 256);
    seen = 0;
    for (int k = 0; k < n; k++) {
      const dds_builtintopic_endpoint_t *ep = buf[k];
      if (si[k].valid_data && si[k].instance_state == DDS_IST_ALIVE && ep->topic_name && !strcmp(ep->topic_name, sp->dds_topic)) seen++;
    }
    if (n > 0) dds_return_loan(pubs, buf, n);
    if (seen >= sp->expect) return 0;
    if (now_realtime_ns() > deadline) break;
    usleep(10000);
  }
  fprintf(stderr, "%s: error: discovery found %d of %d writers of %s within %.0f s\n", die_prefix(), seen, sp->expect,
          sp->topic, g_cfg.ready_timeout_s);
  return -1;
}

static int all_matched(int report) {
  int ok = 1;
  for (int i = 0; i < g_nout; i++) {
    dds_publication_matched_status_t st;
    dds_get_publication_matched_status(g_out[i].writer, &st);
    if ((int)st.current_count < g_out[i].spec->expect) {
      ok = 0;
      if (report) fprintf(stderr, "%s: writer %s matched %u of %d readers\n", die_prefix(), g_out[i].spec->topic, st.current_count, g_out[i].spec->expect);
    }
  }
  for (int i = 0; i < g_nin; i++) {
    dds_subscription_matched_status_t st;
    dds_get_subscription_matched_status(g_in[i].reader, &st);
    if ((int)st.current_count < g_in[i].spec->expect) {
      ok = 0;
      if (report) fprintf(stderr, "%s: reader %s matched %u of %d writers\n", die_prefix(), g_in[i].spec->topic, st.current_count, g_in[i].spec->expect);
    }
  }
  return ok;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--version")) {
    printf("ddslab-cyclone cyclonedds %s\n", DDS_VERSION);
    return 0;
  }
  int r = nodecfg_parse(&g_cfg, argc, argv);
  if (r) return r > 0 ? 0 : 2;
  if (nodecfg_build(&g_cfg)) return 2;
  if (g_cfg.check_only) {
    for (int i = 0; i < g_cfg.nspecs; i++) {
      node_spec *sp = &g_cfg.specs[i];
      if (sp->kind != SPEC_SUB)
        printf("ok %s %s %zu bytes (n=%u m=%u)\n", sp->topic, rosmsg_dds_name(sp->type), sp->msg.size, sp->msg.n, sp->msg.m);
    }
    return 0;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  if (truth_open(&g_truth, g_cfg.truth, g_cfg.host, g_cfg.node)) {
    fprintf(stderr, "%s: error: cannot write ground truth %s\n", die_prefix(), g_cfg.truth);
    return 2;
  }
  char err[512];
  if (nt_init(g_cfg.tracing, err, sizeof err)) {
    fprintf(stderr, "%s: error: tracing: %s\n", die_prefix(), err);
    return 2;
  }

  /* One participant per process, as rmw_cyclonedds does; ROS 2 marks it with its enclave. */
  dds_qos_t *pq = dds_create_qos();
  const char *ud = "enclave=/;";
  dds_qset_userdata(pq, ud, strlen(ud));
  dds_entity_t pp = dds_create_participant((dds_domainid_t)g_cfg.domain, pq, NULL);
  dds_delete_qos(pq);
  if (pp < 0) {
    fprintf(stderr, "%s: error: cannot create participant: %s (check CYCLONEDDS_URI)\n", die_prefix(), dds_strretcode(pp));
    return 3;
  }
  g_pp_main = pp;
  dds_entity_t ws = dds_create_waitset(pp);
  nt_node_init(g_cfg.node, "/");

  /* Writers first. Readers are created only once discovery knows the remote writers of their
   * topic: a volatile Cyclone reader that gets a writer's first HEARTBEAT before it has
   * processed that writer's SEDP announcement drops it, syncs on the next heartbeat (the one
   * piggybacked on sample 1) and never delivers sample 1. Fast DDS sends its first heartbeat
   * the moment it matches the reader, so with Fast DDS writers this race is common. */
  for (int pass = 0; pass < 2; pass++)
  for (int i = 0; i < g_cfg.nspecs; i++) {
    node_spec *sp = &g_cfg.specs[i];
    if ((pass == 0) != (sp->kind != SPEC_SUB)) continue;
    if (pass == 1 && wait_for_remote_writers(pp, sp)) {
      g_stop = 1;
      truth_close(&g_truth);
      dds_delete(pp);
      return 4;
    }
    dds_entity_t spp = sp->kind == SPEC_RELAY ? participant_for(sp->domain) : pp;
    dds_entity_t t = get_topic(spp, sp);
    if (sp->kind == SPEC_SUB) {
      inlet *in = &g_in[g_nin++];
      in->spec = sp;
      dds_qos_t *q = endpoint_qos(sp, 0);
      in->reader = dds_create_reader(pp, t, q, NULL);
      dds_delete_qos(q);
      if (in->reader < 0) { fprintf(stderr, "%s: error: reader %s: %s\n", die_prefix(), sp->topic, dds_strretcode(in->reader)); return 3; }
      dds_entity_t rc = dds_create_readcondition(in->reader, DDS_ANY_STATE);
      dds_waitset_attach(ws, rc, (dds_attach_t)(in - g_in));
      dds_guid_t g;
      dds_get_guid(in->reader, &g);
      char hex[33];
      guid_hex(g.v, hex);
      char sym[512];
      nt_subscription_symbol(sym, sizeof sym, g_cfg.node, rosmsg_ros_name(sp->type), sp->topic);
      nt_subscription_init(&in->nt, g.v, sp->topic, sp->depth, sym);
      fprintf(stderr, "%s: reader %s type %s guid %s\n", die_prefix(), sp->topic, rosmsg_dds_name(sp->type), hex);
    } else {
      outlet *o = &g_out[g_nout++];
      o->spec = sp;
      dds_qos_t *q = endpoint_qos(sp, 1);
      o->writer = dds_create_writer(spp, t, q, NULL);
      dds_delete_qos(q);
      if (o->writer < 0) { fprintf(stderr, "%s: error: writer %s: %s\n", die_prefix(), sp->topic, dds_strretcode(o->writer)); return 3; }
      dds_guid_t g;
      dds_get_guid(o->writer, &g);
      guid_hex(g.v, o->guid);
      nt_publisher_init(&o->nt, g.v, sp->topic, sp->depth);
      if (sp->kind == SPEC_PUB) {
        char sym[512];
        nt_timer_symbol(sym, sizeof sym, g_cfg.node, sp->topic);
        nt_timer_init(&o->nt, (int64_t)llround(1e9 / sp->rate_hz), sym);
      }
      fprintf(stderr, "%s: writer %s type %s %zu bytes guid %s\n", die_prefix(), sp->topic, rosmsg_dds_name(sp->type), sp->msg.size, o->guid);
    }
  }
  /* relays hang off the reader of their input topic */
  for (int i = 0; i < g_nout; i++) {
    if (g_out[i].spec->kind != SPEC_RELAY) continue;
    for (int j = 0; j < g_nin; j++)
      if (!strcmp(g_in[j].spec->topic, g_out[i].spec->input)) { g_in[j].relays[g_in[j].nrelays++] = &g_out[i]; break; }
  }

  pthread_t rx;
  pthread_create(&rx, NULL, rx_thread, &ws);

  /* READY once discovery has matched every endpoint with the peers the scenario has */
  int64_t deadline = now_realtime_ns() + (int64_t)(g_cfg.ready_timeout_s * 1e9);
  int64_t next_report = now_realtime_ns() + 3000000000LL;
  while (!all_matched(0)) {
    if (g_stop) goto shutdown;
    int64_t now = now_realtime_ns();
    if (now > deadline) {
      all_matched(1);
      fprintf(stderr, "%s: error: discovery did not complete within %.0f s\n", die_prefix(), g_cfg.ready_timeout_s);
      g_stop = 1;
      g_rx_stop = 1;
      pthread_join(rx, NULL);
      truth_close(&g_truth);
      dds_delete(pp);
      return 4;
    }
    if (now > next_report) { all_matched(1); next_report = now + 3000000000LL; }
    usleep(10000);
  }
  printf("READY\n");
  fflush(stdout);

  char line[256];
  int started = 0;
  while (!g_stop) {
    int k = read_control_line(line, sizeof line, 100);
    if (k < 0) break;
    if (k == 0) continue;
    long long a, b;
    if (!started && sscanf(line, "START %lld %lld", &a, &b) == 2) {
      g_t0 = a;
      g_tstop = b;
      started = 1;
      for (int i = 0; i < g_nout; i++) {
        if (g_out[i].spec->kind != SPEC_PUB) continue;
        pthread_create(&g_out[i].th, NULL, pub_thread, &g_out[i]);
        g_out[i].started = 1;
      }
    } else if (!strcmp(line, "STOP")) {
      break;
    }
  }

shutdown:
  g_stop = 1;
  for (int i = 0; i < g_nout; i++)
    if (g_out[i].started) pthread_join(g_out[i].th, NULL);
  g_rx_stop = 1;
  pthread_join(rx, NULL);
  int failed = 0;
  for (int i = 0; i < g_nout; i++) {
    fprintf(stderr, "%s: published %s %llu samples (%llu failed writes)\n", die_prefix(), g_out[i].spec->topic,
            (unsigned long long)g_out[i].published, (unsigned long long)g_out[i].failed);
    if (g_out[i].failed) failed = 1;
  }
  for (int i = 0; i < g_nin; i++)
    fprintf(stderr, "%s: received %s %llu samples\n", die_prefix(), g_in[i].spec->topic, (unsigned long long)g_in[i].received);
  truth_close(&g_truth);
  for (int i = 0; i < g_npp_other; i++) dds_delete(g_pp_other[i].pp);
  dds_delete(pp);
  for (int i = 0; i < g_cfg.nspecs; i++) rosmsg_free(&g_cfg.specs[i].msg);
  return failed ? 5 : 0;
}
