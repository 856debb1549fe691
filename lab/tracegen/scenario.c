/*
 * ddslab-tracegen --scenario NAME: ros2_tracing event sequences that behave like
 * real ROS 2 (rclcpp / rcl / rmw of Humble and Jazzy), with a ground truth.
 *
 * Node processes are forked; samples cross processes through queues in shared
 * memory (mmap MAP_SHARED, created before the fork). Each process runs:
 *  - its main thread: rcl_init, the nodes' creation, then the executor (takes,
 *    subscription and service callbacks), as `rclcpp::spin` would;
 *  - a timer thread (timer callbacks, a second executor thread) if it has timers;
 *  - a graph listener thread (the rmw's ros_discovery_info reader).
 * What every node does, as rclcpp does it: the /rosout publisher (rcl's stack copy:
 * its rcl_publisher_init carries a stack address, every /rosout rcl_publish another
 * undeclared one, no rclcpp_publish) before rcl_node_init; the /parameter_events
 * publisher and subscription (TimeSource) and a few parameter events at start-up;
 * the six parameter services; a ros_discovery_info publish (rmw_publish without
 * rcl) for every entity created, and the rmw flavour's own entities (fastrtps:
 * rmw_publisher_init / rmw_subscription_init of its discovery writer and reader;
 * cyclonedds: none).
 * Data path: Humble: rclcpp_publish -> rcl_publish -> rmw_publish, then the source
 * timestamp is taken (inside the DDS write), then the sample is written; Jazzy: the
 * timestamp is taken, rmw_publish(handle, message, timestamp), then the write.
 * Takes: rmw_take -> rcl_take -> rclcpp_take -> callback_start ... callback_end.
 *
 * The ground truth (--truth FILE, JSON lines) is what the generator did: one line
 * per publish and per take (docs/tracing.md, "The lab replica and the generator").
 */
#define _GNU_SOURCE
#include "ros2_tp.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tracegen_scenario_main(int argc, char **argv);

/* ------------------------------------------------------------------------- */
/* events                                                                      */

#define EVENTS(X)                                                                              \
  X(rcl_init) X(rcl_node_init) X(rmw_publisher_init) X(rcl_publisher_init) X(rclcpp_publish)   \
  X(rcl_publish) X(rmw_publish) X(rmw_subscription_init) X(rcl_subscription_init)              \
  X(rclcpp_subscription_init) X(rclcpp_subscription_callback_added) X(rmw_take) X(rcl_take)    \
  X(rclcpp_take) X(rcl_timer_init) X(rclcpp_timer_callback_added) X(rclcpp_timer_link_node)    \
  X(rclcpp_callback_register) X(callback_start) X(callback_end) X(rcl_service_init)            \
  X(rclcpp_service_callback_added) X(rcl_client_init) X(rcl_lifecycle_state_machine_init)      \
  X(rcl_lifecycle_transition) X(rclcpp_executor_get_next_ready)                                \
  X(rclcpp_executor_wait_for_work) X(rclcpp_executor_execute) X(rclcpp_intra_publish)          \
  X(rclcpp_ipb_to_subscription) X(rclcpp_buffer_to_ipb) X(rclcpp_construct_ring_buffer)        \
  X(rclcpp_ring_buffer_enqueue) X(rclcpp_ring_buffer_dequeue) X(rclcpp_ring_buffer_clear)

enum ev {
#define X(n) EV_##n,
  EVENTS(X)
#undef X
  EV_N
};
static const char *EV_NAME[EV_N] = {
#define X(n) #n,
  EVENTS(X)
#undef X
};

/* ------------------------------------------------------------------------- */
/* the scenario's specification (built before the fork, the same in every process) */

#define MAXP 24
#define MAXN 40
#define MAXT 48
#define MAXPUB 128
#define MAXSUB 128
#define MAXTIMER 32
#define MAXSRV 8
#define MAXCLI 8
#define MAXACT 4

enum topic_kind { TK_DATA, TK_ROSOUT, TK_PARAM, TK_DISC };
enum rmw_flavour { RMW_FASTRTPS, RMW_CYCLONEDDS };

struct topic_s { char name[96]; int kind; };
struct node_s {
  int proc;
  char name[48], ns[48], fq[112];
  int lifecycle;
  int rosout_pub, pe_pub, pe_sub, lc_pub;
};
struct pub_s { int node, topic, intra, depth, via_rcl_only; };
struct sub_s {
  int node, topic, intra, depth;
  int republish, every; /* publish on `republish` every `every`-th callback (-1: never) */
  int log_every;        /* log in the callback every N-th (0: never) */
  int kill_after;       /* SIGKILL the process inside the N-th callback (0: never) */
  int is_pe;            /* a TimeSource /parameter_events subscription */
};
struct action_s { int pub, every, log; };
struct timer_s {
  int node;
  int64_t period, phase;
  struct action_s act[MAXACT];
  int nact;
  int client, client_every;
};
struct srv_s { int node; char name[112]; };
struct cli_s { int node, srv; };
struct proc_s { char name[16]; int ntimers; };

struct spec {
  int np, nn, nt, npub, nsub, ntimer, nsrv, ncli;
  struct proc_s proc[MAXP];
  struct node_s node[MAXN];
  struct topic_s topic[MAXT];
  struct pub_s pub[MAXPUB];
  struct sub_s sub[MAXSUB];
  struct timer_s timer[MAXTIMER];
  struct srv_s srv[MAXSRV];
  struct cli_s cli[MAXCLI];
};

struct sopts {
  const char *distro, *lib_dir, *scenario, *truth;
  int jazzy;
  int rmw;
  uint64_t messages, rate_hz, kill_after;
};

static struct spec S;
static struct sopts O;

static void die(const char *msg) {
  fprintf(stderr, "tracegen: %s\n", msg);
  exit(2);
}

static int topic_id(const char *name, int kind) {
  for (int i = 0; i < S.nt; i++)
    if (!strcmp(S.topic[i].name, name)) return i;
  if (S.nt >= MAXT) die("too many topics");
  snprintf(S.topic[S.nt].name, sizeof S.topic[0].name, "%s", name);
  S.topic[S.nt].kind = kind;
  return S.nt++;
}

static int add_proc(const char *name) {
  if (S.np >= MAXP) die("too many processes");
  snprintf(S.proc[S.np].name, sizeof S.proc[0].name, "%s", name);
  return S.np++;
}

static int add_pub_full(int node, const char *topic, int kind, int intra, int depth) {
  if (S.npub >= MAXPUB) die("too many publishers");
  struct pub_s *p = &S.pub[S.npub];
  p->node = node;
  p->topic = topic_id(topic, kind);
  p->intra = intra;
  p->depth = depth;
  return S.npub++;
}

static int add_pub(int node, const char *topic, int intra) {
  return add_pub_full(node, topic, TK_DATA, intra, 10);
}

static int add_sub_full(int node, const char *topic, int kind, int intra, int depth) {
  if (S.nsub >= MAXSUB) die("too many subscriptions");
  struct sub_s *s = &S.sub[S.nsub];
  memset(s, 0, sizeof *s);
  s->node = node;
  s->topic = topic_id(topic, kind);
  s->intra = intra;
  s->depth = depth;
  s->republish = -1;
  s->every = 1;
  return S.nsub++;
}

static int add_sub(int node, const char *topic, int intra, int log_every) {
  int s = add_sub_full(node, topic, TK_DATA, intra, 10);
  S.sub[s].log_every = log_every;
  return s;
}

static int add_node(int proc, const char *ns, const char *name, int lifecycle) {
  if (S.nn >= MAXN) die("too many nodes");
  struct node_s *n = &S.node[S.nn];
  n->proc = proc;
  snprintf(n->name, sizeof n->name, "%s", name);
  snprintf(n->ns, sizeof n->ns, "%s", ns);
  snprintf(n->fq, sizeof n->fq, "%s/%s", strcmp(ns, "/") ? ns : "", name);
  n->lifecycle = lifecycle;
  int id = S.nn++;
  n->rosout_pub = add_pub_full(id, "/rosout", TK_ROSOUT, 0, 1000);
  n->pe_pub = add_pub_full(id, "/parameter_events", TK_PARAM, 0, 1000);
  n->pe_sub = add_sub_full(id, "/parameter_events", TK_PARAM, 0, 1000);
  S.sub[n->pe_sub].is_pe = 1;
  n->lc_pub = -1;
  if (lifecycle) {
    char t[112];
    snprintf(t, sizeof t, "%s/transition_event", n->fq);
    n->lc_pub = add_pub_full(id, t, TK_DATA, 0, 10);
    S.pub[n->lc_pub].via_rcl_only = 1; /* rcl_lifecycle publishes with rcl_publish itself */
  }
  return id;
}

static int add_timer(int node, double hz, double phase_ms) {
  if (S.ntimer >= MAXTIMER) die("too many timers");
  struct timer_s *t = &S.timer[S.ntimer];
  memset(t, 0, sizeof *t);
  t->node = node;
  t->period = (int64_t)(1e9 / hz);
  t->phase = (int64_t)(phase_ms * 1e6);
  t->client = -1;
  S.proc[S.node[node].proc].ntimers++;
  return S.ntimer++;
}

static void timer_action(int timer, int pub, int every, int log) {
  struct timer_s *t = &S.timer[timer];
  if (t->nact >= MAXACT) die("too many timer actions");
  t->act[t->nact++] = (struct action_s){pub, every, log};
}

static int add_srv(int node, const char *name) {
  if (S.nsrv >= MAXSRV) die("too many services");
  S.srv[S.nsrv].node = node;
  snprintf(S.srv[S.nsrv].name, sizeof S.srv[0].name, "%s", name);
  return S.nsrv++;
}

static int add_cli(int node, int srv) {
  if (S.ncli >= MAXCLI) die("too many clients");
  S.cli[S.ncli] = (struct cli_s){node, srv};
  return S.ncli++;
}

/* --- the scenarios ------------------------------------------------------- */

static void build_relay3(const char *prefix, uint64_t kill_after) {
  char ta[96], tb[96], ns[48];
  snprintf(ta, sizeof ta, "%s/topic_a", prefix);
  snprintf(tb, sizeof tb, "%s/topic_b", prefix);
  snprintf(ns, sizeof ns, "/%s", kill_after ? "killed" : "relay3");
  double hz = (double)O.rate_hz;
  int src = add_node(add_proc(kill_after ? "k_source" : "source"), ns, "source", 0);
  int pa = add_pub(src, ta, 0);
  int t = add_timer(src, hz, 0.0);
  timer_action(t, pa, 1, 1);
  int relay = add_node(add_proc(kill_after ? "k_relay" : "relay"), ns, "relay", 0);
  int pb = add_pub(relay, tb, 0);
  int s = add_sub(relay, ta, 0, 1);
  S.sub[s].republish = pb;
  S.sub[s].kill_after = (int)kill_after;
  int sink = add_node(add_proc(kill_after ? "k_sink" : "sink"), ns, "sink", 0);
  add_sub(sink, tb, 0, 1);
}

static void build_pingpong(void) {
  double hz = (double)O.rate_hz / 2;
  int ping = add_node(add_proc("ping"), "/pingpong", "ping", 0);
  int pp = add_pub(ping, "/ping", 0);
  int t = add_timer(ping, hz, 1.3);
  timer_action(t, pp, 1, 1);
  int s_pong = add_sub(ping, "/pong", 0, 1);
  S.sub[s_pong].republish = pp;
  S.sub[s_pong].every = 2;
  int pong = add_node(add_proc("pong"), "/pingpong", "pong", 0);
  int ppo = add_pub(pong, "/pong", 0);
  int s_ping = add_sub(pong, "/ping", 0, 1);
  S.sub[s_ping].republish = ppo;
}

static void build_multipub(void) {
  double hz = (double)O.rate_hz;
  /* a: base rate (period T); b: period 7T/5, every 5th tick coincides with one of a's
   * (two processes publishing within microseconds); c1 and c2 in one process, periods 3T
   * and 4T offset by T/2 from a and b, coinciding with each other every 12T (back-to-back
   * on one thread) */
  int a = add_node(add_proc("talker_a"), "/multipub", "talker_a", 0);
  int pa = add_pub(a, "/chatter", 0);
  timer_action(add_timer(a, hz, 0.0), pa, 1, 0);
  int b = add_node(add_proc("talker_b"), "/multipub", "talker_b", 0);
  int pb = add_pub(b, "/chatter", 0);
  timer_action(add_timer(b, hz * 5 / 7, 0.0), pb, 1, 1);
  int pc = add_proc("talker_c");
  int c1 = add_node(pc, "/multipub", "talker_c1", 0);
  int c2 = add_node(pc, "/multipub", "talker_c2", 0);
  int p1 = add_pub(c1, "/chatter", 0);
  int p2 = add_pub(c2, "/chatter", 0);
  timer_action(add_timer(c1, hz / 3, 500.0 / hz), p1, 1, 1);
  timer_action(add_timer(c2, hz / 4, 500.0 / hz), p2, 1, 0);
  int l = add_node(add_proc("listener"), "/multipub", "listener", 0);
  add_sub(l, "/chatter", 0, 10);
}

static void build_intra(void) {
  double hz = (double)O.rate_hz / 2;
  int pr = add_proc("intra_main");
  int prod = add_node(pr, "/intra", "producer", 0);
  int cons = add_node(pr, "/intra", "consumer", 0);
  int pd = add_pub(prod, "/intra/data", 1);
  timer_action(add_timer(prod, hz, 0.7), pd, 1, 1);
  int pp = add_pub(cons, "/intra/processed", 0);
  int s = add_sub(cons, "/intra/data", 1, 2);
  S.sub[s].republish = pp;
  int ext = add_node(add_proc("intra_ext"), "/intra", "external", 0);
  add_sub(ext, "/intra/data", 0, 0);
  add_sub(ext, "/intra/processed", 0, 5);
}

static void build_service(void) {
  int server = add_node(add_proc("srv_server"), "/service", "server", 1);
  int srv = add_srv(server, "/service/add_two_ints");
  int client = add_node(add_proc("srv_client"), "/service", "client", 0);
  int cli = add_cli(client, srv);
  int t = add_timer(client, (double)O.rate_hz / 10, 0.9);
  S.timer[t].client = cli;
  S.timer[t].client_every = 1;
}

static int build(const char *name) {
  uint64_t k = O.kill_after ? O.kill_after : (O.messages / 2 ? O.messages / 2 : 1);
  if (!strcmp(name, "relay3")) build_relay3("", 0);
  else if (!strcmp(name, "pingpong")) build_pingpong();
  else if (!strcmp(name, "multipub")) build_multipub();
  else if (!strcmp(name, "intra")) build_intra();
  else if (!strcmp(name, "service")) build_service();
  else if (!strcmp(name, "killed")) build_relay3("/killed", k);
  else if (!strcmp(name, "all")) {
    build_relay3("", 0);
    build_pingpong();
    build_multipub();
    build_intra();
    build_service();
    build_relay3("/killed", k);
  } else return -1;
  return 0;
}

/* ------------------------------------------------------------------------- */
/* shared memory                                                               */

#define RINGCAP 1024

struct sample {
  int64_t source_ts;
  uint64_t order;
  int32_t pub_pid, pub_tid;
  int16_t pub, topic; /* pub: publisher index (-1: discovery) */
  int16_t pub_proc, intra;
  uint64_t seq; /* services: request sequence number */
};

struct ring {
  atomic_int lock;
  uint32_t cap; /* intra-process rings only: the subscription's depth (DDS queues: RINGCAP) */
  uint64_t head, tail;
  struct sample s[RINGCAP];
};

enum { TR_PUBLISH = 1, TR_TAKE, TR_SERVICE };

struct trec {
  uint8_t kind, internal, rosout, intra, callback, inter;
  int16_t node, topic, pub_node, srv;
  int32_t pid, tid, pub_pid, pub_tid;
  uint64_t order;
  int64_t source_ts, t_pre, t_post;
};

struct shm {
  atomic_int init_done, start, stop, timers_running;
  int64_t t0_mono;
  atomic_uint_fast64_t activity;
  atomic_uint bell[MAXP], disc_bell[MAXP];
  atomic_int processing[MAXP], dead[MAXP], timer_done[MAXP], disc_active[MAXP];
  int32_t pid[MAXP];
  atomic_int sub_active[MAXSUB];
  struct ring sub_ring[MAXSUB], intra_ring[MAXSUB], disc_ring[MAXP], req_ring[MAXSRV],
      resp_ring[MAXCLI];
  atomic_uint_fast64_t counts[MAXP][EV_N];
  uint64_t truth_cap;
  atomic_uint_fast64_t truth_n, truth_lost;
  struct trec truth[];
};

static struct shm *SH;

static void ring_lock(struct ring *r) {
  while (atomic_exchange_explicit(&r->lock, 1, memory_order_acquire)) sched_yield();
}
static void ring_unlock(struct ring *r) { atomic_store_explicit(&r->lock, 0, memory_order_release); }

/* Appends; a full queue drops the new sample (returns false). */
static bool ring_push(struct ring *r, const struct sample *s) {
  ring_lock(r);
  if (r->head - r->tail >= RINGCAP) {
    ring_unlock(r);
    return false;
  }
  r->s[r->head % RINGCAP] = *s;
  r->head++;
  ring_unlock(r);
  atomic_fetch_add(&SH->activity, 1);
  return true;
}

static bool ring_pop(struct ring *r, struct sample *s) {
  ring_lock(r);
  if (r->head == r->tail) {
    ring_unlock(r);
    return false;
  }
  *s = r->s[r->tail % RINGCAP];
  r->tail++;
  ring_unlock(r);
  atomic_fetch_add(&SH->activity, 1);
  return true;
}

static uint64_t ring_count(struct ring *r) {
  ring_lock(r);
  uint64_t n = r->head - r->tail;
  ring_unlock(r);
  return n;
}

static void futex_wait(atomic_uint *addr, unsigned seen, long timeout_ns) {
  struct timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT, seen, &ts, NULL, 0);
}
static void futex_wake(atomic_uint *addr) {
  syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE, 1 << 20, NULL, NULL, 0);
}
static void ring_bell(atomic_uint *bell) {
  atomic_fetch_add(bell, 1);
  futex_wake(bell);
}

static int64_t now_rt(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static int64_t now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static void sleep_until_mono(int64_t t) {
  struct timespec ts = {t / 1000000000, t % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* ------------------------------------------------------------------------- */
/* per process (after the fork)                                                */

struct ent { uint64_t pad[4]; }; /* an object whose address serves as a handle */

struct pub_rt {
  struct ent rcl, rmw, msg[4];
  uint8_t gid[ROS2TP_GID_SIZE];
  uint64_t count;
  pthread_mutex_t mu;
};
struct sub_rt {
  struct ent rcl, rmw, rclcpp, cb, intra_obj, intra_cb, ipb, ringbuf, take_msg;
  uint8_t gid[ROS2TP_GID_SIZE];
  uint64_t count, takes;
};
struct timer_rt { struct ent rcl, cb; uint64_t tick; int64_t next, end; };
struct node_rt {
  struct ent rcl, rmw, sm;
  struct ent psrv[6], prmw[6], pcb[6];
  struct ent lsrv[5], lrmw[5], lcb[5];
  uint64_t logs;
};
struct srv_rt { struct ent rcl, rmw, cb; uint64_t calls; };
struct cli_rt { struct ent rcl, rmw; uint64_t seq; };

struct proc_rt {
  int idx;
  struct ros2tp_api api;
  struct ent context, disc_w, disc_r, disc_take_msg;
  uint8_t prefix[12];
  uint32_t entity_key;
  uint64_t disc_order;
  pthread_mutex_t disc_mu;
  struct pub_rt pub[MAXPUB];
  struct sub_rt sub[MAXSUB];
  struct timer_rt timer[MAXTIMER];
  struct node_rt node[MAXN];
  struct srv_rt srv[MAXSRV];
  struct cli_rt cli[MAXCLI];
};

static struct proc_rt *P;
static struct ros2tp_api *A;

struct tctx { int tid; int64_t pending; };
static __thread struct tctx TC = {0, -1};

static void thread_begin(void) {
  TC.tid = (int)syscall(SYS_gettid);
  TC.pending = -1;
}

/* After every tracepoint of a thread: closes the window of the thread's last publish. */
static void after_event(void) {
  if (TC.pending >= 0) {
    SH->truth[TC.pending].t_post = now_rt();
    TC.pending = -1;
  }
}

#define TP(name, ...)                                                                          \
  do {                                                                                         \
    A->name(__VA_ARGS__);                                                                      \
    atomic_fetch_add_explicit(&SH->counts[P->idx][EV_##name], 1, memory_order_relaxed);        \
    after_event();                                                                             \
  } while (0)
/* the Jazzy-only events (no-ops in the Humble library): counted only where emitted */
#define TPJ(name, ...)                                                                         \
  do {                                                                                         \
    if (O.jazzy) TP(name, __VA_ARGS__);                                                        \
  } while (0)

static int64_t truth_add(const struct trec *r) {
  uint64_t i = atomic_fetch_add(&SH->truth_n, 1);
  if (i >= SH->truth_cap) {
    atomic_fetch_add(&SH->truth_lost, 1);
    return -1;
  }
  SH->truth[i] = *r;
  return (int64_t)i;
}

static void make_gid(uint8_t *gid, uint8_t kind) {
  memset(gid, 0, ROS2TP_GID_SIZE);
  memcpy(gid, P->prefix, 12);
  uint32_t k = ++P->entity_key;
  gid[12] = (uint8_t)(k >> 16);
  gid[13] = (uint8_t)(k >> 8);
  gid[14] = (uint8_t)k;
  gid[15] = kind;
  if (O.jazzy) {
    /* rmw's gid is 16 bytes from Iron on, the tracepoint still copies 24: the last 8 are
     * whatever follows it in memory (Humble: zeros) */
    uintptr_t junk = (uintptr_t)gid ^ ((uintptr_t)k << 40);
    memcpy(gid + 16, &junk, 8);
  }
}

/* --- delivery -------------------------------------------------------------- */

static void deliver(const struct sample *s, int topic) {
  for (int i = 0; i < S.nsub; i++) {
    if (S.sub[i].topic != topic || !atomic_load(&SH->sub_active[i])) continue;
    int q = S.node[S.sub[i].node].proc;
    if (atomic_load(&SH->dead[q])) continue;
    if (ring_push(&SH->sub_ring[i], s)) ring_bell(&SH->bell[q]);
  }
}

/* ros_discovery_info (rmw_dds_common ParticipantEntitiesInfo): published by the rmw on
 * the thread that creates an entity, with no rcl_publish / rclcpp_publish; read by the
 * graph listener of every other process (local publications are ignored). */
static void discovery_publish(void) {
  pthread_mutex_lock(&P->disc_mu);
  uint64_t order = ++P->disc_order;
  struct ent msg; /* rmw builds the message on its stack */
  struct trec r = {.kind = TR_PUBLISH, .internal = 1, .inter = 1, .node = -1, .pub_node = -1,
                   .srv = -1, .pid = getpid(), .tid = TC.tid, .order = order};
  r.topic = (int16_t)topic_id("ros_discovery_info", TK_DISC);
  int64_t ts;
  if (O.jazzy) {
    ts = now_rt();
    r.t_pre = now_rt();
    TP(rmw_publish, &P->disc_w, &msg, ts);
  } else {
    r.t_pre = now_rt();
    TP(rmw_publish, NULL, &msg, 0);
    ts = now_rt(); /* the source timestamp is taken inside the write */
  }
  r.source_ts = ts;
  struct sample s = {.source_ts = ts, .order = order, .pub_pid = getpid(), .pub_tid = TC.tid,
                     .pub = -1, .topic = r.topic, .pub_proc = (int16_t)P->idx};
  for (int q = 0; q < S.np; q++) {
    if (q == P->idx || !atomic_load(&SH->disc_active[q]) || atomic_load(&SH->dead[q])) continue;
    if (ring_push(&SH->disc_ring[q], &s)) ring_bell(&SH->disc_bell[q]);
  }
  TC.pending = truth_add(&r);
  pthread_mutex_unlock(&P->disc_mu);
}

/* rclcpp's intra-process ring buffer (capacity = the subscription's depth): the enqueue
 * and dequeue tracepoints are emitted under the buffer's mutex, as rclcpp does. */
static void intra_enqueue(int si, const struct sample *s) {
  struct ring *r = &SH->intra_ring[si];
  ring_lock(r);
  int ow = 0;
  if (r->head - r->tail >= r->cap) {
    r->tail++;
    ow = 1;
  }
  uint64_t idx = r->head % r->cap;
  r->s[idx] = *s;
  r->head++;
  TPJ(rclcpp_ring_buffer_enqueue, &P->sub[si].ringbuf, idx, r->head - r->tail, ow);
  ring_unlock(r);
  atomic_fetch_add(&SH->activity, 1);
  ring_bell(&SH->bell[P->idx]);
}

static bool intra_dequeue(int si, struct sample *s) {
  struct ring *r = &SH->intra_ring[si];
  ring_lock(r);
  if (r->head == r->tail) {
    ring_unlock(r);
    return false;
  }
  uint64_t idx = r->tail % r->cap;
  *s = r->s[idx];
  r->tail++;
  TPJ(rclcpp_ring_buffer_dequeue, &P->sub[si].ringbuf, idx, r->head - r->tail);
  ring_unlock(r);
  atomic_fetch_add(&SH->activity, 1);
  return true;
}

static int intra_subs_of(int pub, int *list, int max) {
  int n = 0;
  const struct pub_s *p = &S.pub[pub];
  for (int i = 0; i < S.nsub && n < max; i++) {
    const struct sub_s *s = &S.sub[i];
    if (s->topic == p->topic && s->intra && S.node[s->node].proc == P->idx &&
        atomic_load(&SH->sub_active[i]))
      list[n++] = i;
  }
  return n;
}

static int dds_subs_of(int topic) {
  int n = 0;
  for (int i = 0; i < S.nsub; i++)
    if (S.sub[i].topic == topic && atomic_load(&SH->sub_active[i])) n++;
  return n;
}

/* One publish of publisher `pub`, as rclcpp + rcl + rmw do it. */
static void publish(int pub) {
  const struct pub_s *ps = &S.pub[pub];
  struct pub_rt *p = &P->pub[pub];
  int kind = S.topic[ps->topic].kind;
  int rosout = kind == TK_ROSOUT;
  pthread_mutex_lock(&p->mu);
  uint64_t order = ++p->count;
  const void *msg = &p->msg[order % 4];
  struct ent stack_msg, stack_pub; /* rcl's /rosout: log message and publisher copy on the stack */
  if (rosout) msg = &stack_msg;
  int intra_list[8];
  int n_intra = ps->intra ? intra_subs_of(pub, intra_list, 8) : 0;
  int inter = !ps->intra || dds_subs_of(ps->topic) > n_intra;
  struct trec r = {.kind = TR_PUBLISH, .rosout = (uint8_t)rosout, .intra = n_intra > 0,
                   .inter = (uint8_t)inter, .node = (int16_t)ps->node, .topic = (int16_t)ps->topic,
                   .pub_node = -1, .srv = -1, .pid = getpid(), .tid = TC.tid, .order = order};
  struct sample s = {.order = order, .pub_pid = getpid(), .pub_tid = TC.tid, .pub = (int16_t)pub,
                     .topic = (int16_t)ps->topic, .pub_proc = (int16_t)P->idx};
  if (n_intra > 0) {
    TPJ(rclcpp_intra_publish, &p->rcl, msg);
    s.intra = 1;
    for (int k = 0; k < n_intra; k++) intra_enqueue(intra_list[k], &s);
    s.intra = 0;
  }
  int64_t ts = 0;
  if (inter) {
    if (!rosout && !ps->via_rcl_only) TP(rclcpp_publish, &p->rcl, msg);
    TP(rcl_publish, rosout ? (const void *)&stack_pub : (const void *)&p->rcl, msg);
    if (O.jazzy) {
      ts = now_rt();
      r.t_pre = now_rt();
      TP(rmw_publish, &p->rmw, msg, ts);
    } else {
      r.t_pre = now_rt();
      TP(rmw_publish, NULL, msg, 0);
      ts = now_rt(); /* Humble: the DDS write stamps the sample after the tracepoint */
    }
    s.source_ts = ts;
    deliver(&s, ps->topic);
  }
  r.source_ts = ts;
  int64_t rec = truth_add(&r);
  if (inter) TC.pending = rec;
  pthread_mutex_unlock(&p->mu);
}

static void log_rosout(int node) {
  P->node[node].logs++;
  publish(S.node[node].rosout_pub);
}

/* --- entity creation (main thread) ------------------------------------------ */

static void create_publisher(int pub) {
  struct pub_rt *p = &P->pub[pub];
  const struct pub_s *ps = &S.pub[pub];
  pthread_mutex_init(&p->mu, NULL);
  make_gid(p->gid, 0x03);
  if (O.rmw == RMW_CYCLONEDDS) discovery_publish();
  TP(rmw_publisher_init, &p->rmw, p->gid);
  if (O.rmw == RMW_FASTRTPS) discovery_publish();
  if (S.topic[ps->topic].kind == TK_ROSOUT) {
    /* rcl logging_rosout: rcl_publisher_init on a stack entry, copied into a hash map */
    struct ent stack_entry;
    TP(rcl_publisher_init, &stack_entry, &P->node[ps->node].rcl, &p->rmw, S.topic[ps->topic].name,
       (size_t)ps->depth);
  } else {
    TP(rcl_publisher_init, &p->rcl, &P->node[ps->node].rcl, &p->rmw, S.topic[ps->topic].name,
       (size_t)ps->depth);
  }
}

static const char *sub_symbol(int sub) {
  static char buf[256];
  const struct sub_s *s = &S.sub[sub];
  if (s->is_pe)
    return "std::_Bind<void (rclcpp::TimeSource::NodeState::*(rclcpp::TimeSource::NodeState*, "
           "std::_Placeholder<1>))(std::shared_ptr<rcl_interfaces::msg::ParameterEvent_<std::"
           "allocator<void> > const>)>";
  snprintf(buf, sizeof buf,
           "tg::Node::Node(rclcpp::NodeOptions const&)::{lambda(std::shared_ptr<std_msgs::msg::"
           "String_<std::allocator<void> > const>)#%d}",
           sub % 7 + 1);
  return buf;
}

static void create_subscription(int sub) {
  struct sub_rt *s = &P->sub[sub];
  const struct sub_s *ss = &S.sub[sub];
  make_gid(s->gid, 0x04);
  if (O.rmw == RMW_CYCLONEDDS) discovery_publish();
  TP(rmw_subscription_init, &s->rmw, s->gid);
  if (O.rmw == RMW_FASTRTPS) discovery_publish();
  TP(rcl_subscription_init, &s->rcl, &P->node[ss->node].rcl, &s->rmw, S.topic[ss->topic].name,
     (size_t)ss->depth);
  const char *sym = sub_symbol(sub);
  if (ss->intra) {
    /* the intra-process subscription object, with its own copy of the callback */
    SH->intra_ring[sub].cap = (uint32_t)ss->depth;
    TPJ(rclcpp_construct_ring_buffer, &s->ringbuf, (uint64_t)ss->depth);
    TPJ(rclcpp_buffer_to_ipb, &s->ringbuf, &s->ipb);
    TPJ(rclcpp_ipb_to_subscription, &s->ipb, &s->intra_obj);
    TP(rclcpp_subscription_callback_added, &s->intra_obj, &s->intra_cb);
    TP(rclcpp_subscription_init, &s->rcl, &s->intra_obj);
    TP(rclcpp_callback_register, &s->intra_cb, sym);
  }
  TP(rclcpp_subscription_init, &s->rcl, &s->rclcpp);
  TP(rclcpp_subscription_callback_added, &s->rclcpp, &s->cb);
  TP(rclcpp_callback_register, &s->cb, sym);
  atomic_store(&SH->sub_active[sub], 1);
}

static void create_service(struct ent *rcl, struct ent *rmw, struct ent *cb, int node,
                           const char *name, const char *symbol, bool traced_init) {
  if (traced_init) {
    discovery_publish();
    TP(rcl_service_init, rcl, &P->node[node].rcl, rmw, name);
  }
  TP(rclcpp_service_callback_added, rcl, cb);
  TP(rclcpp_callback_register, cb, symbol);
}

static const char *PARAM_SRV[6] = {"get_parameters", "get_parameter_types", "set_parameters",
                                   "set_parameters_atomically", "describe_parameters",
                                   "list_parameters"};
static const char *PARAM_TYPE[6] = {"GetParameters", "GetParameterTypes", "SetParameters",
                                    "SetParametersAtomically", "DescribeParameters",
                                    "ListParameters"};
static const char *LC_SRV[5] = {"change_state", "get_state", "get_available_states",
                                "get_available_transitions", "get_transition_graph"};

static void create_node(int node) {
  const struct node_s *ns = &S.node[node];
  struct node_rt *n = &P->node[node];
  char name[192], sym[512];
  discovery_publish(); /* the node's entities in the participant's ParticipantEntitiesInfo */
  create_publisher(ns->rosout_pub);
  TP(rcl_node_init, &n->rcl, &n->rmw, ns->name, ns->ns);
  for (int k = 0; k < 6; k++) {
    snprintf(name, sizeof name, "%s/%s", ns->fq, PARAM_SRV[k]);
    snprintf(sym, sizeof sym,
             "rclcpp::ParameterService::ParameterService(std::shared_ptr<rclcpp::node_interfaces::"
             "NodeBaseInterface>, std::shared_ptr<rclcpp::node_interfaces::NodeServicesInterface>, "
             "rclcpp::node_interfaces::NodeParametersInterface*, rclcpp::QoS const&)::{lambda(std::"
             "shared_ptr<rmw_request_id_t>, std::shared_ptr<rcl_interfaces::srv::%s_Request_<std::"
             "allocator<void> > >, std::shared_ptr<rcl_interfaces::srv::%s_Response_<std::allocator"
             "<void> > >)#%d}",
             PARAM_TYPE[k], PARAM_TYPE[k], k + 1);
    create_service(&n->psrv[k], &n->prmw[k], &n->pcb[k], node, name, sym, true);
  }
  create_publisher(ns->pe_pub);
  publish(ns->pe_pub); /* use_sim_time declared */
  create_subscription(ns->pe_sub);
  publish(ns->pe_pub);
  publish(ns->pe_pub);
  if (ns->lifecycle) {
    /* rcl_lifecycle's com interface: the transition_event publisher and five services
     * (rcl), then the state machine, then rclcpp_lifecycle's wrappers of the services */
    create_publisher(ns->lc_pub);
    for (int k = 0; k < 5; k++) {
      snprintf(name, sizeof name, "%s/%s", ns->fq, LC_SRV[k]);
      discovery_publish();
      TP(rcl_service_init, &n->lsrv[k], &n->rcl, &n->lrmw[k], name);
    }
    TP(rcl_lifecycle_state_machine_init, &n->rcl, &n->sm);
    for (int k = 0; k < 5; k++) {
      snprintf(sym, sizeof sym,
               "rclcpp_lifecycle::LifecycleNode::LifecycleNodeInterfaceImpl::init(bool)::{lambda("
               "std::shared_ptr<rmw_request_id_t>, std::shared_ptr<lifecycle_msgs::srv::%s_Request_"
               "<std::allocator<void> > >)#%d}",
               LC_SRV[k], k + 1);
      create_service(&n->lsrv[k], &n->lrmw[k], &n->lcb[k], node, "", sym, false);
    }
  }
  for (int i = 0; i < S.npub; i++)
    if (S.pub[i].node == node && i != ns->rosout_pub && i != ns->pe_pub && i != ns->lc_pub)
      create_publisher(i);
  for (int i = 0; i < S.nsub; i++)
    if (S.sub[i].node == node && i != ns->pe_sub) create_subscription(i);
  for (int i = 0; i < S.nsrv; i++)
    if (S.srv[i].node == node) {
      snprintf(sym, sizeof sym,
               "tg::Server::Server(rclcpp::NodeOptions const&)::{lambda(std::shared_ptr<example_"
               "interfaces::srv::AddTwoInts_Request_<std::allocator<void> > >, std::shared_ptr<"
               "example_interfaces::srv::AddTwoInts_Response_<std::allocator<void> > >)#1}");
      create_service(&P->srv[i].rcl, &P->srv[i].rmw, &P->srv[i].cb, node, S.srv[i].name, sym, true);
    }
  for (int i = 0; i < S.ncli; i++)
    if (S.cli[i].node == node) {
      discovery_publish();
      TP(rcl_client_init, &P->cli[i].rcl, &n->rcl, &P->cli[i].rmw, S.srv[S.cli[i].srv].name);
    }
  for (int i = 0; i < S.ntimer; i++)
    if (S.timer[i].node == node) {
      struct timer_rt *t = &P->timer[i];
      TP(rcl_timer_init, &t->rcl, S.timer[i].period);
      TP(rclcpp_timer_callback_added, &t->rcl, &t->cb);
      snprintf(sym, sizeof sym, "tg::Node::Node(rclcpp::NodeOptions const&)::{lambda()#%d}", i % 5 + 1);
      TP(rclcpp_callback_register, &t->cb, sym);
      TP(rclcpp_timer_link_node, &t->rcl, &n->rcl);
    }
}

static void lifecycle_start(int node) {
  /* configure then activate, as `ros2 lifecycle set` or a launch file would trigger */
  static const char *steps[4][2] = {{"unconfigured", "configuring"}, {"configuring", "inactive"},
                                    {"inactive", "activating"}, {"activating", "active"}};
  for (int k = 0; k < 4; k++) {
    TP(rcl_lifecycle_transition, &P->node[node].sm, steps[k][0], steps[k][1]);
    publish(S.node[node].lc_pub);
  }
}

/* --- callbacks ---------------------------------------------------------------- */

static void sub_callback(int sub, int intra) {
  const struct sub_s *ss = &S.sub[sub];
  struct sub_rt *s = &P->sub[sub];
  const void *cb = intra ? &s->intra_cb : &s->cb;
  TP(callback_start, cb, intra);
  uint64_t n = ++s->count;
  if (ss->log_every && n % (uint64_t)ss->log_every == 0) log_rosout(ss->node);
  if (ss->kill_after && n == (uint64_t)ss->kill_after) {
    kill(getpid(), SIGKILL);
    for (;;) pause();
  }
  if (ss->republish >= 0 && n % (uint64_t)ss->every == 0) publish(ss->republish);
  TP(callback_end, cb);
}

static bool executor_take(int sub) {
  struct sample smp;
  if (!ring_pop(&SH->sub_ring[sub], &smp)) return false;
  const struct sub_s *ss = &S.sub[sub];
  struct sub_rt *s = &P->sub[sub];
  atomic_store(&SH->processing[P->idx], 1);
  TP(rclcpp_executor_get_next_ready);
  TP(rclcpp_executor_execute, &s->rcl);
  if (++s->takes % 13 == 0) {
    /* woken for this subscription but the middleware had nothing yet */
    TP(rmw_take, &s->rmw, &s->take_msg, 0, 0);
    TP(rcl_take, &s->take_msg);
    TP(rclcpp_take, &s->take_msg);
    TP(rclcpp_executor_get_next_ready);
    TP(rclcpp_executor_execute, &s->rcl);
  }
  TP(rmw_take, &s->rmw, &s->take_msg, smp.source_ts, 1);
  TP(rcl_take, &s->take_msg);
  TP(rclcpp_take, &s->take_msg);
  /* a sample of an intra-process publisher of this process reaches an intra-process
   * subscription through DDS too: rclcpp drops that copy (no callback) */
  int drop = ss->intra && smp.pub >= 0 && S.pub[smp.pub].intra && smp.pub_proc == P->idx;
  struct trec r = {.kind = TR_TAKE, .callback = (uint8_t)!drop, .inter = 1,
                   .node = (int16_t)ss->node, .topic = (int16_t)ss->topic,
                   .pub_node = smp.pub >= 0 ? (int16_t)S.pub[smp.pub].node : -1, .srv = -1,
                   .pid = getpid(), .tid = TC.tid, .pub_pid = smp.pub_pid, .pub_tid = smp.pub_tid,
                   .order = smp.order, .source_ts = smp.source_ts};
  truth_add(&r);
  if (!drop) sub_callback(sub, 0);
  atomic_store(&SH->processing[P->idx], 0);
  return true;
}

static bool executor_intra(int sub) {
  struct sample smp;
  if (!ring_count(&SH->intra_ring[sub])) return false;
  const struct sub_s *ss = &S.sub[sub];
  struct sub_rt *s = &P->sub[sub];
  atomic_store(&SH->processing[P->idx], 1);
  TP(rclcpp_executor_get_next_ready);
  TP(rclcpp_executor_execute, &s->intra_obj);
  if (!intra_dequeue(sub, &smp)) { /* overwritten meanwhile: nothing to take */
    atomic_store(&SH->processing[P->idx], 0);
    return true;
  }
  struct trec r = {.kind = TR_TAKE, .callback = 1, .intra = 1, .node = (int16_t)ss->node,
                   .topic = (int16_t)ss->topic, .pub_node = (int16_t)S.pub[smp.pub].node,
                   .srv = -1, .pid = getpid(), .tid = TC.tid, .pub_pid = smp.pub_pid,
                   .pub_tid = smp.pub_tid, .order = smp.order, .source_ts = 0};
  truth_add(&r);
  sub_callback(sub, 1);
  atomic_store(&SH->processing[P->idx], 0);
  return true;
}

static bool executor_service(int srv) {
  struct sample smp;
  if (!ring_pop(&SH->req_ring[srv], &smp)) return false;
  struct srv_rt *sv = &P->srv[srv];
  atomic_store(&SH->processing[P->idx], 1);
  TP(rclcpp_executor_get_next_ready);
  TP(rclcpp_executor_execute, &sv->rcl);
  TP(callback_start, &sv->cb, 0);
  sv->calls++;
  if (sv->calls % 4 == 1) log_rosout(S.srv[srv].node);
  struct trec r = {.kind = TR_SERVICE, .callback = 1, .node = (int16_t)S.srv[srv].node,
                   .topic = -1, .pub_node = (int16_t)smp.pub, .srv = (int16_t)srv,
                   .pid = getpid(), .tid = TC.tid, .pub_pid = smp.pub_pid, .pub_tid = smp.pub_tid,
                   .order = smp.seq};
  truth_add(&r);
  TP(callback_end, &sv->cb);
  /* the response (rmw_send_response is not traced) */
  int cli = (int)smp.order;
  struct sample resp = smp;
  int q = S.node[S.cli[cli].node].proc;
  if (ring_push(&SH->resp_ring[cli], &resp)) ring_bell(&SH->bell[q]);
  atomic_store(&SH->processing[P->idx], 0);
  return true;
}

static bool executor_response(int cli) {
  struct sample smp;
  /* rclcpp Humble/Jazzy: a client's response is taken and handled with no tracepoint */
  return ring_pop(&SH->resp_ring[cli], &smp);
}

static bool quiet_everywhere_mine(void) {
  for (int i = 0; i < S.nsub; i++)
    if (S.node[S.sub[i].node].proc == P->idx &&
        (ring_count(&SH->sub_ring[i]) || ring_count(&SH->intra_ring[i])))
      return false;
  return true;
}

static void executor_loop(void) {
  int idle_traced = 0;
  unsigned rr = 0;
  for (;;) {
    unsigned bell = atomic_load(&SH->bell[P->idx]);
    bool did = false;
    /* round robin over the ready entities, one executable at a time */
    int nitems = S.nsub * 2 + S.nsrv + S.ncli;
    for (int k = 0; k < nitems && !did; k++) {
      int j = (int)((rr + (unsigned)k) % (unsigned)nitems);
      if (j < S.nsub * 2) {
        int sub = j / 2;
        if (S.node[S.sub[sub].node].proc != P->idx) continue;
        did = (j % 2) ? executor_intra(sub) : executor_take(sub);
      } else if (j < S.nsub * 2 + S.nsrv) {
        int srv = j - S.nsub * 2;
        if (S.node[S.srv[srv].node].proc == P->idx) did = executor_service(srv);
      } else {
        int cli = j - S.nsub * 2 - S.nsrv;
        if (S.node[S.cli[cli].node].proc == P->idx) did = executor_response(cli);
      }
      if (did) rr = (unsigned)j + 1;
    }
    if (did) {
      idle_traced = 0;
      continue;
    }
    if (atomic_load(&SH->stop) && quiet_everywhere_mine()) break;
    if (!idle_traced) {
      TP(rclcpp_executor_get_next_ready);
      TP(rclcpp_executor_wait_for_work, -1);
      idle_traced = 1;
    }
    futex_wait(&SH->bell[P->idx], bell, 20000000);
  }
}

static void *timer_thread(void *arg) {
  (void)arg;
  thread_begin();
  while (!atomic_load(&SH->start)) futex_wait((atomic_uint *)&SH->start, 0, 50000000);
  int64_t t0 = SH->t0_mono;
  int64_t duration = (int64_t)(O.messages * 1000000000ull / (O.rate_hz ? O.rate_hz : 1));
  int mine[MAXTIMER], n = 0;
  for (int i = 0; i < S.ntimer; i++)
    if (S.node[S.timer[i].node].proc == P->idx) {
      mine[n++] = i;
      P->timer[i].next = t0 + S.timer[i].phase;
      P->timer[i].end = t0 + duration;
    }
  for (;;) {
    int64_t next = INT64_MAX;
    for (int k = 0; k < n; k++) {
      struct timer_rt *t = &P->timer[mine[k]];
      if (t->next < t->end && t->next < next) next = t->next;
    }
    if (next == INT64_MAX) break;
    if (now_mono() < next) {
      TP(rclcpp_executor_wait_for_work, -1);
      sleep_until_mono(next);
    }
    /* every timer that is due runs, one after the other on this thread */
    for (int k = 0; k < n; k++) {
      int ti = mine[k];
      struct timer_rt *t = &P->timer[ti];
      const struct timer_s *ts = &S.timer[ti];
      if (t->next >= t->end || t->next > now_mono()) continue;
      TP(rclcpp_executor_get_next_ready);
      TP(rclcpp_executor_execute, &t->rcl);
      TP(callback_start, &t->cb, 0);
      uint64_t tick = t->tick++;
      for (int a = 0; a < ts->nact; a++) {
        const struct action_s *ac = &ts->act[a];
        if (tick % (uint64_t)ac->every) continue;
        if (ac->log && tick % 4 != 3) log_rosout(ts->node); /* logs before most publishes */
        publish(ac->pub);
      }
      if (ts->client >= 0 && tick % (uint64_t)ts->client_every == 0) {
        struct cli_rt *c = &P->cli[ts->client];
        /* rcl_send_request / rmw_send_request: not traced */
        struct sample req = {.order = (uint64_t)ts->client, .seq = ++c->seq, .pub_pid = getpid(),
                             .pub_tid = TC.tid, .pub = (int16_t)S.cli[ts->client].node,
                             .pub_proc = (int16_t)P->idx};
        int srv = S.cli[ts->client].srv;
        int q = S.node[S.srv[srv].node].proc;
        if (ring_push(&SH->req_ring[srv], &req)) ring_bell(&SH->bell[q]);
      }
      TP(callback_end, &t->cb);
      t->next += ts->period;
    }
  }
  if (!atomic_exchange(&SH->timer_done[P->idx], 1)) atomic_fetch_sub(&SH->timers_running, 1);
  return NULL;
}

/* The rmw's graph listener: takes ros_discovery_info without a source timestamp, then
 * one more take that finds nothing; no rcl_take, no callback. */
static void *discovery_thread(void *arg) {
  (void)arg;
  thread_begin();
  for (;;) {
    unsigned bell = atomic_load(&SH->disc_bell[P->idx]);
    struct sample smp;
    int got = 0;
    while (ring_pop(&SH->disc_ring[P->idx], &smp)) {
      got = 1;
      TP(rmw_take, &P->disc_r, &P->disc_take_msg, 0, 1);
      struct trec r = {.kind = TR_TAKE, .internal = 1, .inter = 1, .node = -1,
                       .topic = smp.topic, .pub_node = -1, .srv = -1, .pid = getpid(),
                       .tid = TC.tid, .pub_pid = smp.pub_pid, .pub_tid = smp.pub_tid,
                       .order = smp.order, .source_ts = smp.source_ts};
      truth_add(&r);
    }
    if (got) {
      TP(rmw_take, &P->disc_r, &P->disc_take_msg, 0, 0);
      continue;
    }
    if (atomic_load(&SH->stop)) break;
    futex_wait(&SH->disc_bell[P->idx], bell, 20000000);
  }
  return NULL;
}

static int run_process(int idx) {
  P = calloc(1, sizeof *P);
  if (!P) {
    fprintf(stderr, "tracegen: out of memory\n");
    return 1;
  }
  P->idx = idx;
  A = &P->api;
  char err[512];
  if (ros2tp_load(O.distro, O.lib_dir, &P->api, err, sizeof err) != 0) {
    fprintf(stderr, "tracegen: %s\n", err);
    return 1;
  }
  prctl(PR_SET_NAME, S.proc[idx].name);
  thread_begin();
  pthread_mutex_init(&P->disc_mu, NULL);
  uint32_t pid = (uint32_t)getpid();
  /* a GUID prefix with the vendor id of the flavour's DDS (eProsima 01.0f, Eclipse 01.10) */
  uint8_t prefix[12] = {0x01, O.rmw == RMW_FASTRTPS ? 0x0f : 0x10, (uint8_t)(pid >> 8),
                        (uint8_t)pid, 0xa1, 0xb2, (uint8_t)idx, 0x00, 0x01, 0x00, 0x00, 0x00};
  memcpy(P->prefix, prefix, 12);

  TP(rcl_init, &P->context);
  /* the rmw context (participant) comes with the first node */
  uint8_t gid[ROS2TP_GID_SIZE];
  if (O.rmw == RMW_FASTRTPS) {
    make_gid(gid, 0x03);
    TP(rmw_publisher_init, &P->disc_w, gid);
    make_gid(gid, 0x04);
    TP(rmw_subscription_init, &P->disc_r, gid);
  }
  atomic_store(&SH->disc_active[idx], 1);
  pthread_t th_disc, th_timer;
  if (pthread_create(&th_disc, NULL, discovery_thread, NULL) != 0) return 1;
  for (int i = 0; i < S.nn; i++)
    if (S.node[i].proc == idx) create_node(i);
  for (int i = 0; i < S.nn; i++)
    if (S.node[i].proc == idx && S.node[i].lifecycle) lifecycle_start(i);
  int has_timer = S.proc[idx].ntimers > 0;
  if (has_timer && pthread_create(&th_timer, NULL, timer_thread, NULL) != 0) return 1;
  atomic_fetch_add(&SH->init_done, 1);
  executor_loop();
  if (has_timer) pthread_join(th_timer, NULL);
  pthread_join(th_disc, NULL);
  return 0;
}

/* ------------------------------------------------------------------------- */
/* parent                                                                      */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void write_truth(FILE *f, const pid_t *pids, const int *killed) {
  uint64_t n = atomic_load(&SH->truth_n);
  if (n > SH->truth_cap) n = SH->truth_cap;
  for (uint64_t i = 0; i < n; i++) {
    const struct trec *r = &SH->truth[i];
    const char *topic = r->topic >= 0 ? S.topic[r->topic].name : "";
    if (r->kind == TR_PUBLISH) {
      fprintf(f, "{\"kind\":\"publish\",\"pid\":%d,\"tid\":%d,\"node\":", r->pid, r->tid);
      if (r->node >= 0) json_str(f, S.node[r->node].fq);
      else fputs("null", f);
      fputs(",\"topic\":", f);
      json_str(f, topic);
      fprintf(f, ",\"order\":%" PRIu64 ",\"source_ts\":", r->order);
      if (r->inter) fprintf(f, "%" PRId64, r->source_ts);
      else fputs("null", f);
      fprintf(f,
              ",\"internal\":%s,\"rosout\":%s,\"intra\":%s,\"inter\":%s,\"window\":[%" PRId64
              ",%" PRId64 "]}\n",
              r->internal ? "true" : "false", r->rosout ? "true" : "false",
              r->intra ? "true" : "false", r->inter ? "true" : "false", r->t_pre, r->t_post);
    } else if (r->kind == TR_TAKE) {
      fprintf(f, "{\"kind\":\"take\",\"pid\":%d,\"tid\":%d,\"node\":", r->pid, r->tid);
      if (r->node >= 0) json_str(f, S.node[r->node].fq);
      else fputs("null", f);
      fputs(",\"topic\":", f);
      json_str(f, topic);
      fputs(",\"source_ts\":", f);
      if (r->intra) fputs("null", f);
      else fprintf(f, "%" PRId64, r->source_ts);
      fprintf(f, ",\"publisher_pid\":%d,\"publisher_tid\":%d,\"publisher_node\":", r->pub_pid,
              r->pub_tid);
      if (r->pub_node >= 0) json_str(f, S.node[r->pub_node].fq);
      else fputs("null", f);
      fprintf(f, ",\"order\":%" PRIu64 ",\"callback\":%s,\"intra\":%s,\"internal\":%s}\n",
              r->order, r->callback ? "true" : "false", r->intra ? "true" : "false",
              r->internal ? "true" : "false");
    } else if (r->kind == TR_SERVICE) {
      fprintf(f, "{\"kind\":\"service_call\",\"pid\":%d,\"tid\":%d,\"node\":", r->pid, r->tid);
      json_str(f, S.node[r->node].fq);
      fputs(",\"service\":", f);
      json_str(f, S.srv[r->srv].name);
      fprintf(f, ",\"client_pid\":%d,\"client_node\":", r->pub_pid);
      json_str(f, S.node[r->pub_node].fq);
      fprintf(f, ",\"seq\":%" PRIu64 "}\n", r->order);
    }
  }
  for (int q = 0; q < S.np; q++) {
    fprintf(f, "{\"kind\":\"process\",\"pid\":%d,\"procname\":", (int)pids[q]);
    json_str(f, S.proc[q].name);
    fputs(",\"nodes\":[", f);
    int first = 1;
    for (int i = 0; i < S.nn; i++)
      if (S.node[i].proc == q) {
        if (!first) fputc(',', f);
        json_str(f, S.node[i].fq);
        first = 0;
      }
    fprintf(f, "],\"killed\":%s}\n", killed[q] ? "true" : "false");
  }
}

static void scenario_usage(FILE *f) {
  fprintf(f,
          "usage: ddslab-tracegen --scenario relay3|pingpong|multipub|intra|service|killed|all\n"
          "                       --distro humble|jazzy [--rmw fastrtps|cyclonedds]\n"
          "                       [--messages N] [--rate HZ] [--kill-after K] [--truth FILE]\n"
          "                       [--lib-dir DIR]\n"
          "Forks the scenario's node processes, which emit ros2_tracing events as rclcpp / rcl /\n"
          "rmw would (see docs/tracing.md). The source timers run N / HZ seconds (defaults 400,\n"
          "200 Hz). --truth writes one JSON line per publish, take and service call, and one per\n"
          "process. killed: the relay SIGKILLs itself in its K-th callback (default N/2).\n");
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || end == s) return -1;
  *out = v;
  return 0;
}

int tracegen_scenario_main(int argc, char **argv) {
  O = (struct sopts){.messages = 400, .rate_hz = 200, .rmw = RMW_FASTRTPS};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      scenario_usage(stdout);
      return 0;
    }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "tracegen: %s needs a value\n", a);
      return 2;
    }
    i++;
    uint64_t n;
    if (!strcmp(a, "--scenario")) O.scenario = v;
    else if (!strcmp(a, "--distro")) O.distro = v;
    else if (!strcmp(a, "--lib-dir")) O.lib_dir = v;
    else if (!strcmp(a, "--truth")) O.truth = v;
    else if (!strcmp(a, "--rmw")) {
      if (!strcmp(v, "fastrtps")) O.rmw = RMW_FASTRTPS;
      else if (!strcmp(v, "cyclonedds")) O.rmw = RMW_CYCLONEDDS;
      else {
        fprintf(stderr, "tracegen: --rmw fastrtps|cyclonedds, not '%s'\n", v);
        return 2;
      }
    } else if (parse_u64(v, &n) != 0) {
      fprintf(stderr, "tracegen: %s: '%s' is not a number\n", a, v);
      return 2;
    } else if (!strcmp(a, "--messages") && n >= 1) O.messages = n;
    else if (!strcmp(a, "--rate") && n >= 1 && n <= 5000) O.rate_hz = n;
    else if (!strcmp(a, "--kill-after") && n >= 1) O.kill_after = n;
    else {
      fprintf(stderr, "tracegen: bad option %s %s\n", a, v);
      scenario_usage(stderr);
      return 2;
    }
  }
  if (!O.distro || (strcmp(O.distro, "humble") && strcmp(O.distro, "jazzy"))) {
    fprintf(stderr, "tracegen: --distro humble|jazzy is required\n");
    return 2;
  }
  O.jazzy = !strcmp(O.distro, "jazzy");
  topic_id("ros_discovery_info", TK_DISC);
  if (!O.scenario || build(O.scenario) != 0) {
    fprintf(stderr, "tracegen: unknown scenario '%s'\n", O.scenario ? O.scenario : "");
    scenario_usage(stderr);
    return 2;
  }
  FILE *truth = NULL;
  if (O.truth && !(truth = fopen(O.truth, "w"))) {
    fprintf(stderr, "tracegen: cannot write %s: %s\n", O.truth, strerror(errno));
    return 1;
  }
  uint64_t cap = 200000 + O.messages * 400;
  size_t size = sizeof(struct shm) + cap * sizeof(struct trec);
  SH = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (SH == MAP_FAILED) {
    fprintf(stderr, "tracegen: mmap %zu bytes: %s\n", size, strerror(errno));
    return 1;
  }
  SH->truth_cap = cap;
  int with_timers = 0;
  for (int q = 0; q < S.np; q++) with_timers += S.proc[q].ntimers > 0;
  atomic_store(&SH->timers_running, with_timers);
  for (int q = 0; q < S.np; q++)
    if (!S.proc[q].ntimers) atomic_store(&SH->timer_done[q], 1);
  fflush(stdout);
  pid_t pids[MAXP];
  int alive[MAXP], killed[MAXP], failed = 0;
  for (int q = 0; q < S.np; q++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "tracegen: fork: %s\n", strerror(errno));
      return 1;
    }
    if (pid == 0) _exit(run_process(q));
    pids[q] = pid;
    SH->pid[q] = pid;
    alive[q] = 1;
    killed[q] = 0;
  }
  int expect_kill[MAXP] = {0};
  for (int i = 0; i < S.nsub; i++)
    if (S.sub[i].kill_after) expect_kill[S.node[S.sub[i].node].proc] = 1;
  /* reaps the children that ended; a process that dies leaves its queues behind */
  int n_alive = S.np;
#define REAP(block)                                                                            \
  do {                                                                                         \
    int st_;                                                                                   \
    pid_t w_;                                                                                  \
    while ((w_ = waitpid(-1, &st_, (block) ? 0 : WNOHANG)) > 0) {                              \
      for (int q_ = 0; q_ < S.np; q_++)                                                        \
        if (pids[q_] == w_ && alive[q_]) {                                                     \
          alive[q_] = 0;                                                                       \
          n_alive--;                                                                           \
          atomic_store(&SH->dead[q_], 1);                                                      \
          if (!atomic_exchange(&SH->timer_done[q_], 1)) atomic_fetch_sub(&SH->timers_running, 1); \
          if (WIFSIGNALED(st_) && WTERMSIG(st_) == SIGKILL && expect_kill[q_]) killed[q_] = 1; \
          else if (!WIFEXITED(st_) || WEXITSTATUS(st_) != 0) {                                 \
            fprintf(stderr, "tracegen: process %s (pid %d) failed\n", S.proc[q_].name, (int)w_); \
            failed = 1;                                                                        \
          }                                                                                    \
        }                                                                                      \
      if (!(block) || n_alive == 0) break;                                                     \
    }                                                                                          \
  } while (0)
  int64_t deadline = now_mono() + 30000000000LL;
  while (atomic_load(&SH->init_done) + (S.np - n_alive) < S.np && !failed && now_mono() < deadline) {
    REAP(0);
    usleep(1000);
  }
  if (failed || now_mono() >= deadline) {
    fprintf(stderr, "tracegen: the node processes did not start\n");
    for (int q = 0; q < S.np; q++)
      if (alive[q]) kill(pids[q], SIGKILL);
    return 1;
  }
  SH->t0_mono = now_mono() + 50000000;
  atomic_store(&SH->start, 1);
  futex_wake((atomic_uint *)&SH->start);
  /* stop when every timer has run and nothing has moved for a while */
  uint64_t last = UINT64_MAX;
  int stable = 0;
  while (n_alive > 0) {
    REAP(0);
    usleep(2000);
    if (atomic_load(&SH->timers_running) > 0) continue;
    int busy = 0;
    for (int q = 0; q < S.np; q++)
      if (alive[q] && atomic_load(&SH->processing[q])) busy = 1;
    for (int i = 0; i < S.nsub && !busy; i++)
      if (alive[S.node[S.sub[i].node].proc] &&
          (ring_count(&SH->sub_ring[i]) || ring_count(&SH->intra_ring[i])))
        busy = 1;
    for (int q = 0; q < S.np && !busy; q++)
      if (alive[q] && ring_count(&SH->disc_ring[q])) busy = 1;
    for (int i = 0; i < S.nsrv && !busy; i++)
      if (ring_count(&SH->req_ring[i])) busy = 1;
    uint64_t act = atomic_load(&SH->activity);
    if (!busy && act == last) stable++;
    else stable = 0;
    last = act;
    if (stable >= 10) break;
  }
  atomic_store(&SH->stop, 1);
  for (int q = 0; q < S.np; q++) {
    futex_wake(&SH->bell[q]);
    futex_wake(&SH->disc_bell[q]);
  }
  while (n_alive > 0) REAP(1);
  for (int q = 0; q < S.np; q++)
    if (expect_kill[q] && !killed[q]) {
      fprintf(stderr, "tracegen: process %s was to kill itself and did not\n", S.proc[q].name);
      failed = 1;
    }
  uint64_t counts[5] = {0};
  uint64_t n = atomic_load(&SH->truth_n);
  if (n > SH->truth_cap) n = SH->truth_cap;
  for (uint64_t i = 0; i < n; i++) {
    const struct trec *r = &SH->truth[i];
    if (r->kind == TR_PUBLISH) counts[r->internal ? 2 : r->rosout ? 3 : 0]++;
    else if (r->kind == TR_TAKE) counts[r->internal ? 4 : 1]++;
  }
  for (int q = 0; q < S.np; q++) {
    printf("{\"pid\":%d,\"procname\":\"%s\",\"killed\":%s,\"events\":{", (int)pids[q],
           S.proc[q].name, killed[q] ? "true" : "false");
    uint64_t total = 0;
    int first = 1;
    for (int e = 0; e < EV_N; e++) {
      uint64_t v = atomic_load(&SH->counts[q][e]);
      if (!v) continue;
      total += v;
      printf("%s\"%s\":%" PRIu64, first ? "" : ",", EV_NAME[e], v);
      first = 0;
    }
    printf("},\"total\":%" PRIu64 "}\n", total);
  }
  printf("{\"scenario\":\"%s\",\"distro\":\"%s\",\"rmw\":\"%s\",\"processes\":%d,\"publishes\":%" PRIu64
         ",\"takes\":%" PRIu64 ",\"internal_publishes\":%" PRIu64 ",\"rosout_publishes\":%" PRIu64
         ",\"internal_takes\":%" PRIu64 ",\"truth_lost\":%" PRIu64 "}\n",
         O.scenario, O.distro, O.rmw == RMW_FASTRTPS ? "fastrtps" : "cyclonedds", S.np, counts[0],
         counts[1], counts[2], counts[3], counts[4], (uint64_t)atomic_load(&SH->truth_lost));
  if (truth) {
    write_truth(truth, pids, killed);
    if (fclose(truth) != 0) {
      fprintf(stderr, "tracegen: writing %s failed\n", O.truth);
      return 1;
    }
  }
  return failed ? 1 : 0;
}
